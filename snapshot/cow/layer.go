package cow

import "math/bits"

// SubKeyHash combines the hash of a key with the hash of a sub-key (a
// MapState's user key, a window, a timer's timestamp) into a hash that lies
// in the same key group as keyHash but spreads over the table with the
// sub-key. It lets richer state be layered on a Map with a composite key
// type, e.g. Map[struct{ Key, UserKey }, V], whose Config.Hash is
//
//	func(c composite) uint64 { return SubKeyHash(hash(c.Key), hash(c.UserKey), maxP) }
//
// maxParallelism must be the Map's (valid: 1..32768).
func SubKeyHash(keyHash, subHash uint64, maxParallelism int) uint64 {
	maxP := uint64(maxParallelism)
	mixed := (keyHash ^ bits.RotateLeft64(subHash*0xC2B2AE3D27D4EB4F, 31)) * 0x9E3779B97F4A7C15
	// NB: (mixed>>16)*maxP < 2^63 for maxP <= 2^15, so adding the key
	// group cannot overflow and the residue mod maxP is exactly keyHash's.
	return (mixed>>16)*maxP + keyHash%maxP
}
