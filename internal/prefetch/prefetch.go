// Package prefetch asks the CPU to start loading memory that a loop will
// soon read at random, so that a batch's cache misses overlap.
//
// Spans issues the architecture's prefetch instruction (PREFETCHT0 on
// amd64), which retires at once: the loop that follows runs while the lines
// arrive. A prefetch that finds every miss buffer taken is dropped, so
// callers ask for a few tens of lines at a time, a group ahead of their use
// (cow.Map.PrefetchAhead). A pass of plain loads over a whole batch, which
// no miss can drop, was the alternative, but each load that misses holds
// its place in the reorder buffer and stalls the loop behind it: on the
// machine of docs/perf.md, one update of 1M keys took 38.9 ns after such a
// pass and 24.7 ns with PREFETCHT0 a group ahead (BenchmarkPrefetchGroups
// in snapshot/cow, medians of three).
//
// L2Bytes tells callers whether their data is large enough for prefetching
// to be worth trying; Policy decides, from the times of batches run both
// ways, whether it pays where they run.
package prefetch

import "unsafe"

// Spans asks, for every address p in ptrs, for the cache lines holding p[0]
// and p[span-1]: the first and last byte of an object of span bytes (an
// object of at most 64 bytes spans one or two lines). span must be at
// least 1, and every p must point at readable memory (where there is no
// prefetch instruction, it is read). Spans has no other effect.
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
