//go:build cgo && linux

package cmalloc

/*
#include <stdlib.h>
#include <malloc.h>

static int ringflow_trim(void) {
#ifdef __GLIBC__
	return malloc_trim(0);
#else
	return 0;
#endif
}

static int ringflow_trims(void) {
#ifdef __GLIBC__
	return 1;
#else
	return 0;
#endif
}
*/
import "C"

import "unsafe"

// Trim returns to the kernel the pages of every free chunk the C
// allocator holds. It reports whether any memory was released.
func Trim() bool { return C.ringflow_trim() != 0 }

// Supported reports whether Trim can release memory in this build.
func Supported() bool { return C.ringflow_trims() != 0 }

// scatter allocates n chunks of size bytes with C's malloc, writes to each
// and frees every other one, leaving the freed chunks as holes between
// live ones that the allocator keeps. It returns the live chunks, for
// release. The package's tests use it to build what a restore leaves.
func scatter(n, size int) []unsafe.Pointer {
	all := make([]unsafe.Pointer, n)
	for i := range all {
		p := C.malloc(C.size_t(size))
		if p == nil {
			panic("cmalloc: malloc failed")
		}
		b := unsafe.Slice((*byte)(p), size)
		for j := 0; j < size; j += 4096 {
			b[j] = 1
		}
		all[i] = p
	}
	var live []unsafe.Pointer
	for i, p := range all {
		if i%2 == 1 {
			C.free(p)
		} else {
			live = append(live, p)
		}
	}
	return live
}

// release frees chunks scatter left live.
func release(live []unsafe.Pointer) {
	for _, p := range live {
		C.free(p)
	}
}
