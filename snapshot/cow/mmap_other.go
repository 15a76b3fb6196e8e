//go:build !unix

package cow

import "errors"

// canMapSlabs: elsewhere every page lives on the Go heap.
const canMapSlabs = false

func mapSlab(uintptr) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapSlab([]byte) {}
