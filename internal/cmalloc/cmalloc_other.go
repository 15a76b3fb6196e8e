//go:build !(cgo && linux)

package cmalloc

import "unsafe"

// Trim does nothing without cgo on Linux: see the package doc.
func Trim() bool { return false }

// Supported reports whether Trim can release memory in this build.
func Supported() bool { return false }

func scatter(n, size int) []unsafe.Pointer { return nil }

func release(live []unsafe.Pointer) {}
