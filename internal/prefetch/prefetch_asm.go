//go:build amd64 || arm64

package prefetch

import "unsafe"

// spans brings in the lines of *p[i] and *p[i]+last for i < n; n > 0.
//
//go:noescape
func spans(p *unsafe.Pointer, n int, last uintptr)

// forWrite prefetches, for writing, lines cache lines from p; lines > 0.
//
//go:noescape
func forWrite(p unsafe.Pointer, lines int)
