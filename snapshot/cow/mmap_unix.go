//go:build unix

package cow

import "golang.org/x/sys/unix"

// canMapSlabs: plain-data pages live in mapped slabs (see newPage).
const canMapSlabs = true

// mapSlab maps size bytes of zeroed, private memory. NORESERVE: the memory
// is committed as pages are touched, and a slab is mostly untouched when it
// is mapped.
func mapSlab(size uintptr) ([]byte, error) {
	return unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
}

// unmapSlab gives a slab back to the kernel. It cannot fail for a slab
// mapSlab returned; if it did, the memory would only stay mapped.
func unmapSlab(mem []byte) { _ = unix.Munmap(mem) }
