package prefetch

import (
	"testing"
	"unsafe"
)

// TestSpansTouchesNothing checks Spans over many objects (including an
// empty batch) leaves them unchanged and does not fault.
func TestSpansTouchesNothing(t *testing.T) {
	type obj struct{ a, b, c, d, e uint64 }
	objs := make([]obj, 1000)
	ptrs := make([]unsafe.Pointer, len(objs))
	for i := range objs {
		objs[i] = obj{uint64(i), 1, 2, 3, uint64(i)}
		ptrs[i] = unsafe.Pointer(&objs[i])
	}
	Spans(nil, 40)
	Spans(ptrs, unsafe.Sizeof(obj{}))
	Spans(ptrs[:1], 1)
	for i, o := range objs {
		if o != (obj{uint64(i), 1, 2, 3, uint64(i)}) {
			t.Fatalf("object %d changed: %+v", i, o)
		}
	}
}
