//go:build !linux

package cow

import (
	"errors"
	"unsafe"
)

// adviseHuge is Linux's transparent huge pages advice; elsewhere the
// memory keeps its base pages.
func adviseHuge(unsafe.Pointer, uintptr) error { return errors.ErrUnsupported }
