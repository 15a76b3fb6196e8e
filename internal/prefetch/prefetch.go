// Package prefetch asks the CPU to start loading memory that a loop will
// soon read at random, so that a batch's cache misses overlap.
//
// On amd64, Spans issues plain loads, in a loop that does nothing else, not
// PREFETCHT0. A prefetch instruction retires at once and so could issue
// every miss of a batch, bounded only by the miss buffers, where each load
// that misses holds its place in the reorder buffer; but on the machine of
// docs/perf.md (an AMD EPYC guest, state in 4 KiB pages) prefetches that
// miss the TLB did little: one subtask's 1M keys took 74-86 ns per update
// after a PREFETCHT0 pass, 47-50 ns after a pass of loads, and 75-107 ns
// with no pass at all (BenchmarkSubtaskUpdate). A load walks the page
// tables, and a loop of independent loads still keeps dozens of misses in
// flight. Elsewhere (arm64) Spans uses the architecture's prefetch.
package prefetch

import "unsafe"

// Spans brings in, for every address p in ptrs, the cache lines holding
// p[0] and p[span-1]: the first and last byte of an object of span bytes
// (an object of at most 64 bytes spans one or two lines). span must be at
// least 1, and every p must point at readable memory (on amd64 it is
// read). Spans has no other effect.
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
