package kafka

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// partPos is where a source subtask stands in one partition.
type partPos struct {
	topic string
	part  int32
	// next is the offset of the next record to read.
	next int64
	// stop is the offset a bounded source stops before; noStop for an
	// unbounded one.
	stop int64
}

const noStop = -1

// done reports whether a bounded source has read the partition to its stop.
func (p partPos) done() bool { return p.stop != noStop && p.next >= p.stop }

// positionVersion is the first byte of every encoded position.
const positionVersion = 1

var errBadPosition = errors.New("kafka source: corrupt position")

// encodePosition encodes a subtask's partitions, sorted, as:
//
//	version byte (1)
//	uvarint count
//	count × { uvarint len(topic), topic, varint partition, varint next, varint stop }
//
// A subtask that owns no partition still has a position (a count of 0):
// only a nil position means "never opened".
func encodePosition(ps []partPos) []byte {
	b := []byte{positionVersion}
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p.topic)))
		b = append(b, p.topic...)
		b = binary.AppendVarint(b, int64(p.part))
		b = binary.AppendVarint(b, p.next)
		b = binary.AppendVarint(b, p.stop)
	}
	return b
}

func decodePosition(b []byte) ([]partPos, error) {
	if len(b) == 0 || b[0] != positionVersion {
		return nil, fmt.Errorf("%w: version byte %v, want %d", errBadPosition, b[:min(len(b), 1)], positionVersion)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errBadPosition
	}
	b = b[k:]
	out := make([]partPos, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errBadPosition
		}
		p := partPos{topic: string(b[k : k+int(l)])}
		b = b[k+int(l):]
		var vs [3]int64
		for i := range vs {
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, errBadPosition
			}
			vs[i], b = v, b[k:]
		}
		p.part, p.next, p.stop = int32(vs[0]), vs[1], vs[2]
		out = append(out, p)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last partition", errBadPosition, len(b))
	}
	return out, nil
}

func comparePart(a, b partPos) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
}

// assign returns the partitions of all that subtask of parallelism owns:
// with all sorted by topic and partition, the k-th goes to subtask
// k mod parallelism. Both a fresh start and a rescale share partitions
// out this way, so that a restore at the same parallelism gives each
// subtask the partitions it had.
func assign(all []partPos, subtask, parallelism int) []partPos {
	all = slices.Clone(all)
	slices.SortFunc(all, comparePart)
	var mine []partPos
	for k, p := range all {
		if k%parallelism == subtask {
			mine = append(mine, p)
		}
	}
	return mine
}

// rescale merges the positions of every subtask of an old parallelism and
// returns the position of subtask of the new one, of the partitions keep
// selects (all if it is nil). Every partition keeps its offsets. All nil
// means no subtask ever opened: a fresh start (nil).
func rescale(subtask, parallelism int, old [][]byte, keep func(topic string, partition int32) bool) ([]byte, error) {
	var all []partPos
	opened := 0
	for i, b := range old {
		if b == nil {
			continue
		}
		opened++
		ps, err := decodePosition(b)
		if err != nil {
			return nil, fmt.Errorf("position of old subtask %d: %w", i, err)
		}
		all = append(all, ps...)
	}
	switch {
	case opened == 0:
		return nil, nil
	case opened < len(old):
		return nil, fmt.Errorf("kafka source: %d of %d old subtasks have no position, so their partitions are unknown", len(old)-opened, len(old))
	}
	slices.SortFunc(all, comparePart)
	for i := 1; i < len(all); i++ {
		if comparePart(all[i-1], all[i]) == 0 {
			return nil, fmt.Errorf("kafka source: partition %s/%d is in two old subtasks' positions", all[i].topic, all[i].part)
		}
	}
	if keep != nil {
		all = slices.DeleteFunc(all, func(p partPos) bool { return !keep(p.topic, p.part) })
	}
	return encodePosition(assign(all, subtask, parallelism)), nil
}
