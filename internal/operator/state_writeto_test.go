package operator

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ringflow/ringflow/keygroups"
)

// discardWriter is a StateWriter that counts the bytes it is given.
type discardWriter struct{ bytes int }

func (w *discardWriter) PutKeyGroup(_ string, _ int, blob []byte) error {
	w.bytes += len(blob)
	return nil
}
func (w *discardWriter) ReuseKeyGroup(string, int, uint64) error { return nil }
func (w *discardWriter) AppendKeyGroupDelta(_ string, _ int, blob []byte) error {
	w.bytes += len(blob)
	return nil
}
func (w *discardWriter) PutSubtask(_ string, blob []byte) error { w.bytes += len(blob); return nil }
func (w *discardWriter) BeforeCommit(fn func() error)           { fn() }
func (w *discardWriter) Pause() error                           { return nil }

// TestWriteToAllocs: writing out a snapshot of plain keys and values
// allocates nothing per entry, full or as deltas. (Per-entry allocations
// were ~2M per checkpoint at 1M keys; the GC cycles they caused ran on the
// workers' cores.)
func TestWriteToAllocs(t *testing.T) {
	const keys = 20_000
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
	tb := newTable[uint64, int64](ctx, "state", keygroups.HashUint64)
	id := uint64(0)
	update := func() {
		for k := uint64(0); k < keys; k++ {
			v, _, err := tb.m.UpsertHashedNew(keygroups.HashUint64(k), k)
			if err != nil {
				t.Fatal(err)
			}
			*v += int64(k)
		}
	}
	w := &discardWriter{}
	checkpoint := func() {
		id++
		s, err := tb.freeze(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTo(w); err != nil {
			t.Fatal(err)
		}
		s.Release()
		tb.complete(id)
	}
	update()
	checkpoint() // full blobs
	for _, mode := range []string{"full", "delta"} {
		update()
		if mode == "full" {
			tb.persisted.valid = false // no base: every key group in full
		}
		w.bytes = 0
		allocs := mallocs(checkpoint)
		if w.bytes < keys*2 { // at least a byte of key and one of value per entry (varints)
			t.Fatalf("%s: wrote %d bytes for %d keys", mode, w.bytes, keys)
		}
		if allocs > 300 {
			t.Fatalf("%s write-out of %d keys: %.0f allocations, want a few per key group at most", mode, keys, allocs)
		}
		t.Logf("%s write-out of %d keys in 128 key groups: %.0f allocations, %d bytes", mode, keys, allocs, w.bytes)
	}
}

// mallocs returns the heap allocations fn made. (testing.AllocsPerRun runs
// fn twice, and the second checkpoint would find nothing changed.)
func mallocs(fn func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs - before.Mallocs)
}

// TestWriteToReusesBlobBuffer: the blob buffer a write-out grew is handed
// back to the table and taken by the next snapshot, rather than grown
// afresh (page faults and garbage) at every checkpoint.
func TestWriteToReusesBlobBuffer(t *testing.T) {
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
	tb := newTable[uint64, int64](ctx, "state", keygroups.HashUint64)
	for k := range uint64(5_000) {
		v, _, err := tb.m.UpsertHashedNew(keygroups.HashUint64(k), k)
		if err != nil {
			t.Fatal(err)
		}
		*v = int64(k)
	}
	first, err := tb.freeze(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.WriteTo(&discardWriter{}); err != nil {
		t.Fatal(err)
	}
	back := tb.encodeBuf.Load()
	if back == nil || cap(*back) == 0 {
		t.Fatal("the write-out did not hand its blob buffer back to the table")
	}
	first.Release()
	tb.complete(1)
	second, err := tb.freeze(2)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(second.buf[:1]) != unsafe.SliceData((*back)[:1]) {
		t.Fatal("the next snapshot did not take the buffer the last write-out gave back")
	}
	second.Release()
}
