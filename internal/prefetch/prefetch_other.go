//go:build !amd64 && !arm64

package prefetch

import "unsafe"

// sink keeps the loads of spans from being optimised away.
var sink byte

// spans loads a byte of every line, the portable stand-in for a prefetch.
func spans(p *unsafe.Pointer, n int, last uintptr) {
	var x byte
	for _, q := range unsafe.Slice(p, n) {
		x |= *(*byte)(q) | *(*byte)(unsafe.Add(q, last))
	}
	sink = x
}

func forWrite(p unsafe.Pointer, lines int) {}
