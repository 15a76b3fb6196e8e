// Package prefetch asks the CPU to start loading memory that a loop will
// soon read at random, so that a batch's cache misses overlap.
//
// A plain load of each address does that too, but each load that misses
// holds its place in the reorder buffer until the data arrives, so only as
// many misses overlap as the buffer holds loads of one iteration's worth. A
// prefetch instruction retires at once: a loop of them issues every miss of
// a batch, bounded only by the core's miss buffers.
package prefetch

import "unsafe"

// Spans prefetches, for every address p in ptrs, the cache lines holding
// p[0] and p[span-1]: the first and last byte of an object of span bytes
// (an object of at most 64 bytes spans one or two lines). span must be at
// least 1. Spans has no other effect.
func Spans(ptrs []unsafe.Pointer, span uintptr) {
	if len(ptrs) == 0 || span == 0 {
		return
	}
	spans(unsafe.SliceData(ptrs), len(ptrs), span-1)
}

// ForWrite asks the CPU to fetch, with ownership, the cache lines of the n
// bytes at p, which the caller is about to write: a store to a line
// another core holds, or that has left the caches, otherwise waits for
// that transfer in the store buffer. It has no other effect.
func ForWrite(p unsafe.Pointer, n uintptr) {
	if n == 0 {
		return
	}
	// One prefetch per 64 bytes from p reaches every line of the range
	// (the last may land past it, in the range's last line or beyond: a
	// prefetch never faults).
	forWrite(p, int((uintptr(p)&63+n+63)/64))
}
