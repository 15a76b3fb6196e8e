package ringflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestJobStalls: a user function that sleeps past the stall bound shows in
// Job.Stalls as a stall of its task, blocked (the thread slept), and in the
// metrics' count by cause.
func TestJobStalls(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 1, StallBound: 5 * time.Millisecond})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: 200_000}))
	slow := ringflow.Map(ringflow.Rebalance(src), "slow", func(v uint64) uint64 {
		if v == 10 || v == 150_000 {
			time.Sleep(20 * time.Millisecond)
		}
		return v
	})
	ringflow.Sink(slow, "sink", func(context.Context, uint64) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	stalls, counts := job.Stalls()
	var slept int
	for _, s := range stalls {
		t.Logf("%v", s)
		if s.Task == "slow#0" && s.Cause == "blocked" && s.Duration >= 20*time.Millisecond {
			slept++
		}
	}
	if slept != 2 || counts["blocked"] < 2 {
		t.Fatalf("%d stalls of slow#0 blocked for 20ms, counts %v; want 2", slept, counts)
	}
	if m := job.Metrics(); m.Stalls["blocked"] != counts["blocked"] {
		t.Errorf("Metrics counts %v, Stalls %v", m.Stalls, counts)
	}
}
