package ringflow

import (
	"context"
	"slices"
	"testing"
)

// TestLoopBodies checks which operators are in which loop's body, with a
// loop nested in another's: an operator is in a body if it is on a path
// from the loop's head to its tail, also one that goes round the nested
// loop (c feeds only the inner back edge), but not one that leaves the
// loop (f), nor one that reaches the inner tail only through the outer
// loop's back edge and the inner head again (d, a, e).
func TestLoopBodies(t *testing.T) {
	job := NewJob(Config{})
	src := Source(job, "src", FromSlice([]int{1}))
	out := Iterate(src, "outer", func(in Stream[int]) (Stream[int], Stream[int]) {
		a := Map(in, "a", func(x int) int { return x })
		inner := Iterate(a, "inner", func(in Stream[int]) (Stream[int], Stream[int]) {
			b := Map(in, "b", func(x int) int { return x + 1 })
			return Map(b, "c", func(x int) int { return x }), Filter(b, "d", func(x int) bool { return x > 3 })
		})
		e := Map(inner, "e", func(x int) int { return x })
		return Filter(e, "e again", func(x int) bool { return x < 9 }), Filter(e, "f", func(x int) bool { return x >= 9 })
	})
	Sink(out, "sink", func(context.Context, int) error { return nil })
	bodies := job.loopBodies()
	got := map[string][]string{}
	for n, ls := range bodies {
		for _, l := range ls {
			for _, jl := range job.loops {
				if jl.probe == l {
					got[jl.name] = append(got[jl.name], n.name)
				}
			}
		}
	}
	want := map[string][]string{
		"outer": {"a", "b", "c", "d", "e", "e again", "inner", "inner.back"},
		"inner": {"b", "c"},
	}
	for name, ns := range want {
		slices.Sort(got[name])
		if !slices.Equal(got[name], ns) {
			t.Errorf("body of %q: %v, want %v", name, got[name], ns)
		}
	}
}
