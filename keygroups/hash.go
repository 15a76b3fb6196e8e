package keygroups

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// XXH64 primes (seed 0).
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261
)

// HashUint64 returns xxhash64 of k's 8 little-endian bytes. It is XXH64 with
// seed 0 unrolled for exactly one 8-byte lane: no slice, no allocation, and
// it inlines.
func HashUint64(k uint64) uint64 {
	h := prime5 + 8
	h ^= bits.RotateLeft64(k*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// HashInt64 hashes k as the 8 little-endian bytes of its two's complement.
func HashInt64(k int64) uint64 { return HashUint64(uint64(k)) }

// HashString returns xxhash64 of the bytes of s, without converting it.
func HashString(s string) uint64 { return xxhash.Sum64String(s) }

// HashBytes returns xxhash64 of b.
func HashBytes(b []byte) uint64 { return xxhash.Sum64(b) }

// Partitioner routes key hashes to key groups and subtasks for one
// validated (parallelism, maxParallelism) pair. Its methods do no division
// when maxParallelism is a power of two and never allocate.
type Partitioner struct {
	maxP    uint64
	mask    uint64 // maxP-1 when maxP is a power of two, else 0
	pow2    bool
	subtask []uint16 // key group → subtask
}

// NewPartitioner validates parallelism and maxParallelism and precomputes
// the key group → subtask table.
func NewPartitioner(parallelism, maxParallelism int) (*Partitioner, error) {
	if err := Validate(parallelism, maxParallelism); err != nil {
		return nil, err
	}
	p := &Partitioner{
		maxP:    uint64(maxParallelism),
		pow2:    maxParallelism&(maxParallelism-1) == 0,
		subtask: make([]uint16, maxParallelism),
	}
	if p.pow2 {
		p.mask = p.maxP - 1
	}
	for kg := range p.subtask {
		p.subtask[kg] = uint16(SubtaskOf(kg, parallelism, maxParallelism))
	}
	return p, nil
}

// MaxParallelism is the number of key groups.
func (p *Partitioner) MaxParallelism() int { return int(p.maxP) }

// KeyGroup returns keyHash % maxParallelism.
func (p *Partitioner) KeyGroup(keyHash uint64) int {
	if p.pow2 {
		return int(keyHash & p.mask)
	}
	return int(keyHash % p.maxP)
}

// Subtask returns the subtask that owns the key group of keyHash.
func (p *Partitioner) Subtask(keyHash uint64) int {
	return int(p.subtask[p.KeyGroup(keyHash)])
}

// SubtaskOfKeyGroup returns the subtask that owns key group kg, which must
// be in [0, maxParallelism).
func (p *Partitioner) SubtaskOfKeyGroup(kg int) int { return int(p.subtask[kg]) }
