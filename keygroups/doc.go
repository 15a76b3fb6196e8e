// Package keygroups maps keys to key groups and key groups to subtasks.
//
// A key group is the unit in which keyed state is stored, snapshotted and
// moved when a job is rescaled. Every keyed operator has a fixed number of
// key groups, its maximum parallelism maxP (default 128, at most 32768), and
// a current parallelism p with 1 <= p <= maxP. The mapping is the one Apache
// Flink uses (KeyGroupRangeAssignment), with xxhash64 in place of Java's
// hashCode+murmur:
//
//	hash      = xxhash64(key bytes)                  uint64/int64 keys: their 8 little-endian bytes
//	key group = hash % maxP                          Of
//	subtask   = kg * p / maxP                        SubtaskOf
//	range(i)  = [ceil(i*maxP/p), floor(((i+1)*maxP-1)/p)]   RangeOf (inclusive ends, as in Flink)
//
// The ranges of subtasks 0..p-1 are contiguous, non-empty and cover
// [0, maxP) exactly once, and RangeOf(i) holds precisely the key groups with
// SubtaskOf == i. Because state is addressed by key group, rescaling from p1
// to p2 subtasks only reassigns whole key groups: Rescale lists, for every
// new subtask, which old subtasks' key groups it must read.
//
// Range is half-open, [Start, End), which is how Go code iterates; the
// inclusive Flink end is End-1.
//
// # Hashing without allocation
//
// HashUint64, HashInt64, HashString and HashBytes hash the common key types
// without allocating. HashUint64 is XXH64 (seed 0) specialised to one 8-byte
// block, computed inline in a few multiplies; it equals
// xxhash.Sum64(little-endian bytes of k), which a test checks.
//
// # Hot paths
//
// Of and SubtaskOf do no validation: they are called per record. Validate
// (or NewPartitioner, which validates once) is where bad parallelism settings
// turn into errors. A Partitioner precomputes a key group → subtask table and
// uses a mask instead of a division when maxP is a power of two.
package keygroups
