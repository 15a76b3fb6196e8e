package cow

import (
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

// refOf returns the live directory entry and slot index of key k, which
// must be present.
func refOf(t *testing.T, m *Map[uint64, int64], k uint64) (*pageRef[uint64, int64], uint64) {
	t.Helper()
	h := keygroups.HashUint64(k)
	tb := m.table(h)
	i, ok := tb.find(h, k)
	if !ok {
		t.Fatalf("key %d not in the map", k)
	}
	return &tb.dir[i>>pageShift], i & pageMask
}

// keysOfPage returns the keys the page of r holds, in slot order.
func keysOfPage(r *pageRef[uint64, int64]) []uint64 {
	var keys []uint64
	for si := range uint64(pageSlots) {
		if r.occupied(si) {
			keys = append(keys, r.slot(si).key)
		}
	}
	return keys
}

// keyInOtherChunk returns a key on k's page in another chunk than k's.
func keyInOtherChunk(t *testing.T, m *Map[uint64, int64], k uint64) uint64 {
	t.Helper()
	r, si := refOf(t, m, k)
	for _, o := range keysOfPage(r) {
		if _, osi := refOf(t, m, o); osi>>chunkShift != si>>chunkShift {
			return o
		}
	}
	t.Fatalf("key %d's page has entries in one chunk only", k)
	return 0
}

// TestFirstWriteCopiesOneChunk: the first write to a frozen page copies
// only the chunk it writes; the page's other entries are still read from
// the frozen page, through the live map and the snapshot alike, and the
// page drops its base once CopyAhead has completed it.
func TestFirstWriteCopiesOneChunk(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, 100_000)
	want := mapContents(t, m)
	frozen := mapContents(t, m)
	snap := m.Freeze()

	k := uint64(4242)
	s0 := m.Stats()
	p, _ := m.Upsert(k)
	*p += 1000
	want[k] += 1000
	s1 := m.Stats()
	if got := s1.ChunksCopied - s0.ChunksCopied; got != 1 {
		t.Fatalf("the first write to a frozen page copied %d chunks, want 1", got)
	}
	r, si := refOf(t, m, k)
	if r.base == nil || r.have != 1<<(si>>chunkShift) {
		t.Fatalf("after one write: base %p, chunks %#x; want a partial page with chunk %d", r.base, r.have, si>>chunkShift)
	}
	diffMaps(t, "live map with a partial page", mapContents(t, m), want)
	diffMaps(t, "snapshot", snapshotContents(t, snap), frozen)

	// A second write to the same chunk copies nothing more.
	p, _ = m.Upsert(k)
	*p += 1
	want[k]++
	if got := m.Stats().ChunksCopied - s1.ChunksCopied; got != 0 {
		t.Fatalf("a second write to a copied chunk copied %d chunks", got)
	}

	// CopyAhead completes the partial page, besides copying the frozen
	// pages ahead.
	copyAheadAll(m)
	if r, _ := refOf(t, m, k); r.base != nil {
		t.Fatalf("after CopyAhead the page still has a base (chunks %#x)", r.have)
	}
	if s := m.Stats(); s.PagesCompleted == s1.PagesCompleted {
		t.Fatal("CopyAhead completed no page")
	}
	diffMaps(t, "live map after CopyAhead", mapContents(t, m), want)
	diffMaps(t, "snapshot after CopyAhead", snapshotContents(t, snap), frozen)
	snap.Release()
}

// TestSecondChunkFillsThePage: after the first write to a frozen page
// copied its chunk, a write to another of its chunks copies all the rest at
// once, and the page drops its base; the snapshot keeps the old values.
func TestSecondChunkFillsThePage(t *testing.T) {
	m := newCounters(t, 1, keygroups.Range{})
	// One key group; a table 7/8 full, so a page has entries in several chunks.
	fillCounters(t, m, growAt(1<<14)-1)
	snap := m.Freeze()
	defer snap.Release()
	k := uint64(99)
	other := keyInOtherChunk(t, m, k)
	r, _ := refOf(t, m, k)
	keys := keysOfPage(r)
	s0 := m.Stats()
	p, _ := m.Upsert(k)
	*p = -1
	if r, _ := refOf(t, m, k); r.base == nil || m.Stats().ChunksCopied-s0.ChunksCopied != 1 {
		t.Fatalf("first write: base %p, %d chunks copied; want a partial page and 1", r.base, m.Stats().ChunksCopied-s0.ChunksCopied)
	}
	p, _ = m.Upsert(other)
	*p = -2
	if got := m.Stats().ChunksCopied - s0.ChunksCopied; got != pageChunks {
		t.Fatalf("writes to two chunks of a page copied %d chunks, want all %d", got, pageChunks)
	}
	if r, _ := refOf(t, m, k); r.base != nil {
		t.Fatalf("a write to a second chunk left the page partial (chunks %#x)", r.have)
	}
	for _, key := range keys {
		want := int64(key)
		switch key {
		case k:
			want = -1
		case other:
			want = -2
		}
		if v, _ := m.Get(key); v != want {
			t.Fatalf("map: key %d = %d, want %d", key, v, want)
		}
		if v, _ := snap.Get(key); v != int64(key) {
			t.Fatalf("snapshot: key %d = %d, want %d", key, v, key)
		}
	}
}

// TestPartialPageAcrossFreeze: a page still partial at a freeze belongs to
// that snapshot as it is (its chunks and its base's); the next write to it
// copies it whole, and each snapshot keeps its own values.
func TestPartialPageAcrossFreeze(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, 100_000)
	v1 := mapContents(t, m)
	s1 := m.Freeze()

	k := uint64(777)
	other := keyInOtherChunk(t, m, k)
	p, _ := m.Upsert(k)
	*p = -7
	if r, _ := refOf(t, m, k); r.base == nil {
		t.Fatal("the write did not leave a partial page")
	}
	v2 := mapContents(t, m)
	s2 := m.Freeze()

	c0 := m.Stats()
	p, _ = m.Upsert(other)
	*p = -8
	c1 := m.Stats()
	if c1.PagesCompleted-c0.PagesCompleted != 1 || c1.PagesCopied-c0.PagesCopied != 1 {
		t.Fatalf("a write to a frozen partial page: %d pages completed, %d copied; want 1, 1",
			c1.PagesCompleted-c0.PagesCompleted, c1.PagesCopied-c0.PagesCopied)
	}
	if r, _ := refOf(t, m, other); r.base != nil {
		t.Fatal("the frozen partial page was copied into another partial page")
	}
	v3 := mapContents(t, m)
	if v3[k] != -7 || v3[other] != -8 {
		t.Fatalf("map: key %d = %d, key %d = %d; want -7, -8", k, v3[k], other, v3[other])
	}
	diffMaps(t, "first snapshot", snapshotContents(t, s1), v1)
	diffMaps(t, "second snapshot", snapshotContents(t, s2), v2)

	// Released, the snapshots give their pages back, the partial page's
	// base included.
	s1.Release()
	s2.Release()
	copyAheadAll(m) // reclaims
	for range 3 {
		s := m.Freeze()
		fillCounters(t, m, 100_000)
		s.Release()
		copyAheadAll(m)
	}
	if st := m.Stats(); st.PagesRetired != 0 {
		t.Fatalf("%d pages still retired with every snapshot released", st.PagesRetired)
	}
}
