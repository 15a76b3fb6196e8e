package ringflow

import (
	"context"
	"errors"
	"testing"
)

// TestCycleError checks that a graph with a cycle, which the package's
// functions cannot build, is refused with an error of kind ErrCycle
// naming an operator on it.
func TestCycleError(t *testing.T) {
	job := NewJob(Config{Workers: 1})
	a := Map(Source(job, "src", FromSlice([]int64{1})), "a", func(v int64) int64 { return v })
	b := Map(a, "b", func(v int64) int64 { return v })
	Sink(b, "sink", func(_ context.Context, _ int64) error { return nil })
	// b feeds a back.
	na, nb := job.byName["a"], job.byName["b"]
	e := &edge{from: nb, to: na}
	nb.outputs, na.inputs = append(nb.outputs, e), append(na.inputs, e)

	err := job.validate()
	if !errors.Is(err, ErrCycle) || !errors.Is(err, ErrGraph) {
		t.Fatalf("validate returned %v; want ErrCycle", err)
	}
	ges := GraphErrors(err)
	if len(ges) != 1 || ges[0].Kind != ErrCycle || (ges[0].Operator != "a" && ges[0].Operator != "b") {
		t.Errorf("graph errors %v; want one cycle through a or b", ges)
	}
}
