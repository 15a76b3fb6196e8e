package cow

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms ringflow
// runs on (x86-64, and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// adviseHuge asks the kernel to back the whole huge pages inside
// [p, p+size) with transparent huge pages (madvise MADV_HUGEPAGE). It is
// advice: with THP set to "never", or where a huge page cannot be found,
// the memory stays in base pages, and the error, if any, is only reported.
// Memory not yet touched gets huge pages at its first fault; the kernel's
// khugepaged collapses what was touched before.
func adviseHuge(p unsafe.Pointer, size uintptr) error {
	start := uintptr(p)
	from, to := (start+hugePage-1)&^(hugePage-1), (start+size)&^(hugePage-1)
	if to <= from {
		return unix.EINVAL // no whole huge page inside
	}
	return unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, from-start)), to-from), unix.MADV_HUGEPAGE)
}
