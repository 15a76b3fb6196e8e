// Package intbits reads and writes an integer of 1, 2, 4 or 8 bytes
// through a pointer, for code generic over integer types that knows only a
// type's size and signedness: the state codecs that write keys and values
// as varints.
package intbits

import "unsafe"

// Load returns the integer of size bytes at p, sign-extended if signed.
func Load(p unsafe.Pointer, size uintptr, signed bool) uint64 {
	switch {
	case size == 8:
		return *(*uint64)(p)
	case size == 4 && signed:
		return uint64(*(*int32)(p))
	case size == 4:
		return uint64(*(*uint32)(p))
	case size == 2 && signed:
		return uint64(*(*int16)(p))
	case size == 2:
		return uint64(*(*uint16)(p))
	case signed:
		return uint64(*(*int8)(p))
	}
	return uint64(*(*uint8)(p))
}

// Store writes the low size bytes of x at p.
func Store(p unsafe.Pointer, size uintptr, x uint64) {
	switch size {
	case 1:
		*(*uint8)(p) = uint8(x)
	case 2:
		*(*uint16)(p) = uint16(x)
	case 4:
		*(*uint32)(p) = uint32(x)
	default:
		*(*uint64)(p) = x
	}
}
