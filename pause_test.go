package ringflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestPauseCheckpoints: a job whose checkpoints are paused from the start
// triggers none, whatever the interval; let go on again, it completes some.
func TestPauseCheckpoints(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Checkpoint: checkpointed(t.TempDir(), 5*time.Millisecond)})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(seq uint64) uint64 { return seq }, ringflow.GenOptions{Rate: 100_000}))
	counts := ringflow.Reduce(ringflow.KeyBy(src, func(v uint64) uint64 { return v % 100 }), "sum",
		func(acc, v uint64) uint64 { return acc + v })
	ringflow.Sink(counts, "drop", func(context.Context, uint64) error { return nil })
	job.PauseCheckpoints(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	time.Sleep(300 * time.Millisecond) // sixty intervals
	if n := len(job.Checkpoints()); n != 0 {
		t.Fatalf("%d checkpoints while paused: %+v", n, job.Checkpoints())
	}
	job.PauseCheckpoints(false)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		cks := job.Checkpoints()
		if len(cks) > 0 && cks[0].Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint completed within 30s of resuming: %+v", cks)
		}
	}
}
