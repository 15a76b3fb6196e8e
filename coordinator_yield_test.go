package ringflow

import (
	"testing"
	"time"

	"github.com/ringflow/ringflow/sched"
)

// TestCPUYielder: the writer yields its CPU once it has run sched.HelperYield
// since it last did, and not before (a yield costs it the rest of the
// scheduler tick; yielding after every small blob would stretch
// checkpoints for nothing).
func TestCPUYielder(t *testing.T) {
	clock := time.Unix(1, 0)
	yields := 0
	y := newCPUYielder()
	y.Now, y.Yield = func() time.Time { return clock }, func() { yields++ }
	y.MaybeYield() // the first call finds the writer has run since forever
	if yields != 1 {
		t.Fatalf("first call: %d yields, want 1", yields)
	}
	for step, want := range []int{1, 1, 1, 2, 2, 2, 2, 3} {
		clock = clock.Add(sched.HelperYield / 4)
		y.MaybeYield()
		if yields != want {
			t.Fatalf("after %d quarters of a slice: %d yields, want %d", step+1, yields, want)
		}
	}
}
