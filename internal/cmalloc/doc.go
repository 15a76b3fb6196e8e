// Package cmalloc hands back to the kernel the memory the C allocator
// keeps after C code has freed it.
//
// Pebble allocates its block cache and memtables with C's malloc when cgo
// is enabled. glibc serves each thread from one of up to eight arenas per
// core, and keeps what is freed inside an arena for later calls, returning
// only the free space at an arena's top. A restore reads a whole
// checkpoint through the block cache from several threads, so after each
// one the arenas hold megabytes of free but resident chunks, scattered
// among live ones: in-place restores every few seconds raised a process's
// resident memory by about 8 MB each, none of it in use. Trim releases
// those pages, and is called after a restore, where the cost of walking
// the arenas (a millisecond or so) does not matter.
//
// Without cgo, or with a C library other than glibc, Trim does nothing:
// Pebble then allocates from the Go heap, whose free pages the Go runtime
// returns itself.
package cmalloc
