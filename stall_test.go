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

// TestSyncPartCause: with a stall bound every synchronous part exceeds
// (1ns), each subtask's part of each checkpoint carries where its time
// went.
func TestSyncPartCause(t *testing.T) {
	dir := t.TempDir()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, StallBound: time.Nanosecond,
		Checkpoint: checkpointed(dir, 5*time.Millisecond)})
	s := ringflow.Source(job, "src", ringflow.FromSlice(makeEvents(seeds.Seed(t), 50_000, 300, 0)))
	counts := ringflow.Aggregate(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "count", keyCount{})
	ringflow.Sink(counts, "sink", func(context.Context, [2]uint64) error { return nil })
	run(t, job)
	parts := 0
	for _, cp := range job.Checkpoints() {
		if cp.Status != "completed" {
			continue
		}
		for _, st := range cp.Subtasks {
			if st.SyncCause == "" {
				t.Fatalf("checkpoint %d: %s#%d's part of %v has no cause", cp.ID, st.Operator, st.Subtask, st.Sync)
			}
			parts++
		}
	}
	if parts == 0 {
		t.Fatal("no completed checkpoint")
	}
}
