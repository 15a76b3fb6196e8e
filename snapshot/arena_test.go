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
	seed := testSeed(t)
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
