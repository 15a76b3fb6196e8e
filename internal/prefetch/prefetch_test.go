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

// TestForWriteTouchesNothing checks ForWrite over aligned and unaligned
// ranges, empty ones included, leaves the memory unchanged and does not
// fault.
func TestForWriteTouchesNothing(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, r := range [][2]int{{0, 0}, {0, 1}, {1, 63}, {63, 2}, {5, 1000}, {64, 4032}, {0, 4096}} {
		ForWrite(unsafe.Pointer(&buf[r[0]]), uintptr(r[1]))
	}
	for i, b := range buf {
		if b != byte(i*7) {
			t.Fatalf("byte %d changed to %d", i, b)
		}
	}
}
