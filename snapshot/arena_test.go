package snapshot

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestArenaChunksReturned: the bytes of a checkpoint live in arena chunks
// from Put until the checkpoint ends, committed, failed or aborted; then
// every chunk is back in the pool, and the pool keeps no more than one
// checkpoint's worth. A blob larger than a chunk round-trips through its
// own mapping.
func TestArenaChunksReturned(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	const kgs, size = 8, 1 << 20 // two per chunk
	perCheckpoint := kgs * size / arenaChunkBytes
	for id := uint64(1); id <= 4; id++ {
		p := s.mustBegin(t, id)
		for kg := 0; kg < kgs; kg++ {
			if err := p.PutKeyGroup("count", kg, blob(kg, int(id), size)); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.chunks.inUse(); got != perCheckpoint {
			t.Fatalf("checkpoint %d pending: %d chunks in use, want %d", id, got, perCheckpoint)
		}
		if id == 3 {
			p.Abort()
		} else if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
		if got := s.chunks.inUse(); got != 0 {
			t.Fatalf("checkpoint %d ended: %d chunks in use, want 0", id, got)
		}
		if s.chunks.mapped > perCheckpoint {
			t.Fatalf("checkpoint %d ended: pool holds %d chunks, more than one checkpoint's %d",
				id, s.chunks.mapped, perCheckpoint)
		}
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	checkKeyGroups(t, c, []int{4, 4, 4, 4, 4, 4, 4, 4}, size)

	big := blob(0, 5, arenaChunkBytes+12345)
	p := s.mustBegin(t, 5)
	if err := p.PutKeyGroup("count", 0, big); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	if c, err = s.Latest(); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.KeyGroup("count", 0); !bytes.Equal(got, big) {
		t.Fatalf("blob of %d bytes (larger than a chunk) did not round-trip", len(big))
	}
}

// TestArenaPutRacesEnd: Puts from several goroutines race with Abort:
// each Put either succeeds or fails saying the checkpoint ended, none
// touches memory the arena handed back (the chunks are unmapped at once
// here, so that would fault), and every chunk comes back.
func TestArenaPutRacesEnd(t *testing.T) {
	seed := seeds.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	s, _ := openTest(t, vfs.NewMem(), 1)
	defer s.Close()
	s.chunks.noReuse = true // a write or read after release faults
	const writers, perWriter, size = 4, 8, 512 << 10
	blobs := make([][]byte, writers*perWriter)
	for kg := range blobs {
		blobs[kg] = blob(kg, 0, size)
	}
	for id := uint64(1); id <= 20; id++ {
		p := s.mustBegin(t, id)
		var wg sync.WaitGroup
		errs := make(chan error, len(blobs))
		put := make(chan struct{}, len(blobs))
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for kg := w * perWriter; kg < (w+1)*perWriter; kg++ {
					errs <- p.PutKeyGroup("count", kg, blobs[kg])
					put <- struct{}{}
				}
			}()
		}
		if r.IntN(4) > 0 {
			// Abort in the middle of the writing.
			for range 1 + r.IntN(len(blobs)-1) {
				<-put
			}
			p.Abort()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !strings.Contains(err.Error(), "already ended") {
				t.Fatalf("checkpoint %d: Put failed with %v, want success or 'already ended'", id, err)
			}
		}
		p.Abort()
		if got := s.chunks.inUse(); got != 0 {
			t.Fatalf("checkpoint %d aborted: %d chunks in use", id, got)
		}
	}
	// With chunks reused, a committed checkpoint must hold exactly its own
	// bytes.
	s.chunks.mu.Lock()
	s.chunks.noReuse = false
	s.chunks.mu.Unlock()
	p := s.mustBegin(t, 21)
	for kg := 0; kg < 64; kg++ {
		if err := p.PutKeyGroup("count", kg, blob(kg, 21, 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	versions := make([]int, 64)
	for i := range versions {
		versions[i] = 21
	}
	checkKeyGroups(t, c, versions, 64<<10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.chunks.mapped != 0 {
		t.Fatalf("closed store still maps %d chunks", s.chunks.mapped)
	}
	if err := p.PutKeyGroup("count", 0, []byte("late")); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("Put after Commit: %v, want an error saying the checkpoint ended", err)
	}
}

// TestIngestBottomLevel: the tables of a checkpoint (its blobs, its
// manifest) overlap nothing stored, so Pebble ingests both into its bottom
// level; the garbage of a dropped full checkpoint is one range tombstone
// that covers its blob table whole. So no compaction ever rewrites
// checkpoint data: a cost that write-out would otherwise add, at 1M keys
// ~40 MB a second, on the job's cores.
func TestIngestBottomLevel(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	bottom := func() uint64 {
		m := s.db.Metrics()
		return m.Levels[len(m.Levels)-1].TablesIngested
	}
	for id := uint64(1); id <= 12; id++ {
		before := bottom()
		commitFull(t, s, id, 16, int(id), 4<<10)
		if n := bottom() - before; n < 2 {
			t.Fatalf("checkpoint %d: %d tables ingested into the bottom level, want 2 (blobs, manifest)\n%s",
				id, n, s.db.Metrics())
		}
		m := s.db.Metrics()
		for l := range m.Levels {
			if b := m.Levels[l].TableBytesCompacted; b != 0 {
				t.Fatalf("after checkpoint %d: compactions wrote %d bytes into L%d, want none\n%s", id, b, l, m)
			}
		}
	}
	// Garbage collection dropped every full checkpoint but the last two,
	// each origin with one range tombstone.
	var origins []string
	seen := map[string]bool{}
	for _, k := range rawKeys(t, s, prefixBlob) {
		o := strings.Fields(k)[1]
		if !seen[o] {
			seen[o] = true
			origins = append(origins, o)
		}
	}
	if got := fmt.Sprint(origins); got != "[11 12]" {
		t.Fatalf("blob origins stored: %s, want [11 12]", got)
	}
}

// TestTombstoneGroups: garbage is split into groups that do not overlap
// (Pebble rejects one ingestion of overlapping tables): one per blob origin,
// a range tombstone for an origin with no live blob, point tombstones for
// one with live blobs; a malformed blob key stays in its origin's group.
func TestTombstoneGroups(t *testing.T) {
	k := func(origin uint64, kg int) []byte {
		return blobKey(origin, entryKey{kind: KindKeyGroup, op: "count", a: uint32(kg)})
	}
	malformed := append(idKey(prefixBlob, 1), 0xff) // origin 1, then junk
	garbage := dedupeKVs([]sstKV{
		{key: k(1, 0), delete: true}, {key: k(1, 5), delete: true}, {key: malformed, delete: true},
		{key: k(2, 3), delete: true},
		{key: k(7, 1), delete: true}, {key: k(7, 2), delete: true},
		{key: idKey(prefixManifest, 1), delete: true},
		{key: idKey(prefixQuarantine, 4), value: []byte("bad manifest")},
		{key: idKey(prefixManifest, 4), delete: true},
	})
	groups := tombstoneGroups(garbage, map[uint64]bool{2: true}) // origin 2 still has a live blob
	var got []string
	for _, g := range groups {
		var parts []string
		for _, kv := range g {
			switch {
			case kv.end != nil:
				from, _ := decodeIDKey(kv.key)
				to, _ := decodeIDKey(kv.end)
				parts = append(parts, fmt.Sprintf("range[%c %d,%c %d)", kv.key[0], from, kv.end[0], to))
				if len(kv.key) != 9 || len(kv.end) != 9 {
					t.Fatalf("range [%q, %q) is not over an id prefix", kv.key, kv.end)
				}
			case kv.delete:
				parts = append(parts, "del "+describeKey(kv.key))
			default:
				parts = append(parts, "set "+describeKey(kv.key))
			}
		}
		got = append(got, strings.Join(parts, "; "))
	}
	want := []string{
		"range[b 1,b 2)",
		`del blob 2 keygroup op="count" kg=3`,
		"range[b 7,b 8)",
		"range[m 1,m 2); range[m 4,m 5)",
		"set q 4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Groups are ordered and disjoint: each starts after the previous ends.
	for i := 1; i < len(groups); i++ {
		prev, cur := groups[i-1], groups[i]
		end := prev[len(prev)-1].key
		if last := prev[len(prev)-1]; last.end != nil {
			end = last.end
		}
		if bytes.Compare(cur[0].key, end) < 0 {
			t.Fatalf("group %d starts at %q, inside group %d ending at %q", i, cur[0].key, i-1, end)
		}
	}
}

// TestArenaPoolKeepsRecentPeak: a checkpoint twice the usual size, coming
// back every few checkpoints (full blobs after a run of deltas), finds its
// chunks still mapped instead of mapping (and faulting in) new ones; once
// keepWindow smaller checkpoints have passed, the peak is let go.
func TestArenaPoolKeepsRecentPeak(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	const size = arenaChunkBytes / 2 // two blobs per chunk
	id := uint64(0)
	checkpoint := func(chunks int) {
		id++
		p := s.mustBegin(t, id)
		for kg := range 2 * chunks {
			if err := p.PutKeyGroup("count", kg, blob(kg, int(id), size)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint(2)
	maps := s.chunks.maps
	for range 3 {
		for range 5 {
			checkpoint(1)
		}
		checkpoint(2)
		if s.chunks.maps != maps {
			t.Fatalf("checkpoint %d mapped %d new chunks; want the last large one's reused", id, s.chunks.maps-maps)
		}
	}
	for range keepWindow {
		checkpoint(1)
	}
	if s.chunks.mapped != 1 {
		t.Fatalf("after %d small checkpoints the pool holds %d chunks, want 1", keepWindow, s.chunks.mapped)
	}
}
