package keygroups

import "fmt"

// RangeWithin returns the key groups subtask i of p owns when the p
// subtasks share only the key groups of r (a process of a distributed job
// holds a contiguous range of them): RangeOf over r's length, shifted to
// r's start.
func RangeWithin(r Range, subtask, parallelism int) (Range, error) {
	if parallelism > r.Len() {
		return Range{}, fmt.Errorf("%w: parallelism %d exceeds the %d key groups of %v", ErrParallelism, parallelism, r.Len(), r)
	}
	s, err := RangeOf(subtask, parallelism, r.Len())
	if err != nil {
		return Range{}, err
	}
	return Range{Start: r.Start + s.Start, End: r.Start + s.End}, nil
}

// NewPartitionerWithin is NewPartitioner for p subtasks that share the key
// groups of r (see RangeWithin). A key group outside r goes to the first
// or last subtask, whose state then refuses it, naming the key group.
func NewPartitionerWithin(r Range, parallelism, maxParallelism int) (*Partitioner, error) {
	p, err := NewPartitioner(1, maxParallelism)
	if err != nil {
		return nil, err
	}
	if r.Start < 0 || r.End > maxParallelism || parallelism < 1 || parallelism > r.Len() {
		return nil, fmt.Errorf("%w: parallelism %d over the key groups %v of %d", ErrParallelism, parallelism, r, maxParallelism)
	}
	for kg := range p.subtask {
		switch {
		case kg < r.Start:
			p.subtask[kg] = 0
		case kg >= r.End:
			p.subtask[kg] = uint16(parallelism - 1)
		default:
			p.subtask[kg] = uint16(SubtaskOf(kg-r.Start, parallelism, r.Len()))
		}
	}
	return p, nil
}
