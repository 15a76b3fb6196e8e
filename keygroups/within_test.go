package keygroups

import (
	"errors"
	"testing"
)

// TestWithin checks RangeWithin and NewPartitionerWithin against each
// other and against brute force: the subtasks' ranges tile r in order,
// and the partitioner sends each key group of r to the subtask whose
// range holds it.
func TestWithin(t *testing.T) {
	for _, c := range []struct {
		r    Range
		p, m int
	}{{Range{0, 43}, 2, 128}, {Range{43, 86}, 3, 128}, {Range{86, 128}, 1, 128}, {Range{5, 9}, 4, 16}} {
		part, err := NewPartitionerWithin(c.r, c.p, c.m)
		if err != nil {
			t.Fatal(err)
		}
		next := c.r.Start
		for i := range c.p {
			got, err := RangeWithin(c.r, i, c.p)
			if err != nil {
				t.Fatal(err)
			}
			if got.Start != next || got.Len() == 0 {
				t.Fatalf("%+v: subtask %d owns %v, want a range from %d", c, i, got, next)
			}
			next = got.End
			for kg := got.Start; kg < got.End; kg++ {
				if s := part.SubtaskOfKeyGroup(kg); s != i {
					t.Fatalf("%+v: key group %d goes to subtask %d, owned by %d", c, kg, s, i)
				}
			}
		}
		if next != c.r.End {
			t.Fatalf("%+v: the ranges end at %d, want %d", c, next, c.r.End)
		}
	}
	if _, err := RangeWithin(Range{0, 2}, 0, 3); !errors.Is(err, ErrParallelism) {
		t.Fatalf("3 subtasks over 2 key groups: got %v", err)
	}
}
