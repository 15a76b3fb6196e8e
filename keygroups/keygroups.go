package keygroups

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

const (
	// DefaultMaxParallelism is the number of key groups used when a job does
	// not choose one.
	DefaultMaxParallelism = 128
	// UpperBoundMaxParallelism is the largest allowed number of key groups
	// (Flink's 1<<15), small enough that kg*p never overflows an int32.
	UpperBoundMaxParallelism = 1 << 15
)

// Sentinel errors, wrapped by Validate and the functions that call it.
var (
	// ErrMaxParallelism reports a maximum parallelism outside
	// [1, UpperBoundMaxParallelism].
	ErrMaxParallelism = errors.New("keygroups: max parallelism out of range")
	// ErrParallelism reports a parallelism outside [1, maxParallelism].
	ErrParallelism = errors.New("keygroups: parallelism out of range")
	// ErrSubtask reports a subtask index outside [0, parallelism).
	ErrSubtask = errors.New("keygroups: subtask index out of range")
)

// ValidateMaxParallelism checks 1 <= maxParallelism <= UpperBoundMaxParallelism.
func ValidateMaxParallelism(maxParallelism int) error {
	if maxParallelism < 1 || maxParallelism > UpperBoundMaxParallelism {
		return fmt.Errorf("%w: max parallelism %d, want 1..%d",
			ErrMaxParallelism, maxParallelism, UpperBoundMaxParallelism)
	}
	return nil
}

// Validate checks a (parallelism, maxParallelism) pair: maxParallelism in
// [1, 32768] and parallelism in [1, maxParallelism].
func Validate(parallelism, maxParallelism int) error {
	if err := ValidateMaxParallelism(maxParallelism); err != nil {
		return err
	}
	if parallelism < 1 || parallelism > maxParallelism {
		return fmt.Errorf("%w: parallelism %d, want 1..%d (the max parallelism)",
			ErrParallelism, parallelism, maxParallelism)
	}
	return nil
}

// DefaultMaxParallelismFor returns the maximum parallelism Flink picks for an
// operator of parallelism p when none is configured: the next power of two
// >= p + p/2, at least 128 and at most 32768.
func DefaultMaxParallelismFor(parallelism int) int {
	n := parallelism + parallelism/2
	if n <= DefaultMaxParallelism {
		return DefaultMaxParallelism
	}
	if n >= UpperBoundMaxParallelism {
		return UpperBoundMaxParallelism
	}
	return 1 << bits.Len(uint(n-1))
}

// Of returns the key group of a key hash: keyHash % maxParallelism. It does
// not validate maxParallelism (it is called per record); it returns -1 when
// maxParallelism < 1.
func Of(keyHash uint64, maxParallelism int) int {
	if maxParallelism < 1 {
		return -1
	}
	return int(keyHash % uint64(maxParallelism))
}

// OfBytes returns the key group of a key given as bytes: xxhash64(key) % maxP.
func OfBytes(key []byte, maxParallelism int) int {
	return Of(xxhash.Sum64(key), maxParallelism)
}

// OfString is OfBytes for a string key, without converting it.
func OfString(key string, maxParallelism int) int {
	return Of(xxhash.Sum64String(key), maxParallelism)
}

// OfUint64 is the key group of a uint64 key, hashed as its 8 little-endian
// bytes (HashUint64).
func OfUint64(key uint64, maxParallelism int) int {
	return Of(HashUint64(key), maxParallelism)
}

// SubtaskOf returns the subtask that owns key group kg: kg*p/maxP. Like Of it
// does not validate (see Validate); arguments must satisfy
// 0 <= kg < maxP and 1 <= p <= maxP <= 32768.
func SubtaskOf(keyGroup, parallelism, maxParallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

// Range is a half-open interval [Start, End) of key groups.
type Range struct {
	Start, End int
}

// Len is the number of key groups in r.
func (r Range) Len() int { return r.End - r.Start }

// Contains reports whether key group kg lies in r.
func (r Range) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// Intersect returns the key groups in both r and o (empty if none).
func (r Range) Intersect(o Range) Range {
	s := Range{Start: max(r.Start, o.Start), End: min(r.End, o.End)}
	if s.End < s.Start {
		s.End = s.Start
	}
	return s
}

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// RangeOf returns the contiguous key groups owned by subtask i of p, computed
// exactly as Flink's computeKeyGroupRangeForOperatorIndex:
// start = ceil(i*maxP/p), last = floor(((i+1)*maxP-1)/p).
func RangeOf(subtask, parallelism, maxParallelism int) (Range, error) {
	if err := Validate(parallelism, maxParallelism); err != nil {
		return Range{}, err
	}
	if subtask < 0 || subtask >= parallelism {
		return Range{}, fmt.Errorf("%w: subtask %d, want 0..%d", ErrSubtask, subtask, parallelism-1)
	}
	start := (subtask*maxParallelism + parallelism - 1) / parallelism
	last := ((subtask+1)*maxParallelism - 1) / parallelism
	return Range{Start: start, End: last + 1}, nil
}

// Ranges returns RangeOf(i) for every subtask i of p.
func Ranges(parallelism, maxParallelism int) ([]Range, error) {
	if err := Validate(parallelism, maxParallelism); err != nil {
		return nil, err
	}
	rs := make([]Range, parallelism)
	for i := range rs {
		rs[i], _ = RangeOf(i, parallelism, maxParallelism)
	}
	return rs, nil
}

// Transfer says that a new subtask must read KeyGroups from the state that
// OldSubtask wrote.
type Transfer struct {
	OldSubtask int
	KeyGroups  Range
}

// Rescale returns, for each new subtask j of newParallelism, the old subtasks
// (of oldParallelism) whose key-group ranges overlap j's range, with the
// overlap, in increasing key-group order. The transfers of subtask j cover
// RangeOf(j, newParallelism, maxP) exactly.
func Rescale(oldParallelism, newParallelism, maxParallelism int) ([][]Transfer, error) {
	if err := Validate(oldParallelism, maxParallelism); err != nil {
		return nil, fmt.Errorf("old parallelism: %w", err)
	}
	if err := Validate(newParallelism, maxParallelism); err != nil {
		return nil, fmt.Errorf("new parallelism: %w", err)
	}
	old, _ := Ranges(oldParallelism, maxParallelism)
	plan := make([][]Transfer, newParallelism)
	for j := range plan {
		r, _ := RangeOf(j, newParallelism, maxParallelism)
		for i := SubtaskOf(r.Start, oldParallelism, maxParallelism); i < oldParallelism; i++ {
			o := old[i].Intersect(r)
			if o.Len() == 0 {
				break
			}
			plan[j] = append(plan[j], Transfer{OldSubtask: i, KeyGroups: o})
		}
	}
	return plan, nil
}
