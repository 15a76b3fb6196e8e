package ringflow_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestJSONLinesSinkExactlyOnce runs a checkpointed job whose map fails
// twice, at points the seed picks (paced, so that checkpoints complete
// in between), into a file sink of typed records
// encoded as JSON lines: after the restores, the committed output holds
// every record exactly once.
func TestJSONLinesSinkExactlyOnce(t *testing.T) {
	const n = 20_000
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	first := 2_000 + rng.Int64N(n/2)
	failAt := []int64{first, first + 1_000 + rng.Int64N(n/4)}
	t.Logf("failures at records %v", failAt)

	dir := t.TempDir()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, Logger: newLogRecorder().logger(),
		Checkpoint: checkpointed(dir, 2*time.Millisecond), Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	var failures, seen atomic.Int64
	src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event {
		return event{Seq: i, Key: i % 7, Value: int64(i) * 3}
	}, ringflow.GenOptions{Count: n, Rate: 100_000}))
	inject := failAfter(job, failAt, &failures, &seen)
	failing := ringflow.Map(src, "failing", func(e event) event {
		// NB: the last failure waits for a completed checkpoint, so that
		// the last restart restores one however slowly the first
		// checkpoints went on a loaded machine.
		if int(failures.Load()) == len(failAt)-1 && !anyCompleted(job) {
			seen.Add(1)
			return e
		}
		return inject(e)
	})
	out := filepath.Join(dir, "out")
	ringflow.TxnSink(ringflow.Rebalance(failing), "out",
		ringflow.FileSinkEncoded(out, ringflow.FileSinkOptions{}, ringflow.JSONLines[event]()))
	run(t, job)
	if got := failures.Load(); got != int64(len(failAt)) || job.Restarts() != len(failAt) {
		t.Fatalf("%d failures injected and %d restarts; want %d of each", got, job.Restarts(), len(failAt))
	}
	if job.RestoredFrom() == 0 {
		t.Fatalf("the last restart restored no checkpoint: the test checked nothing across a restore")
	}

	recs, err := ringflow.ReadFileSinkJSON[event](out)
	if err != nil {
		t.Fatal(err)
	}
	count := make([]int, n)
	for _, r := range recs {
		if r.Seq >= n || r.Value != int64(r.Seq)*3 || r.Key != r.Seq%7 {
			t.Fatalf("committed record %+v was never generated", r)
		}
		count[r.Seq]++
	}
	var wrong []string
	for seq, c := range count {
		if c != 1 {
			wrong = append(wrong, fmt.Sprintf("record %d committed %d times", seq, c))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d records not committed exactly once: %v", len(wrong), n, wrong[:min(len(wrong), 10)])
	}
}

// anyCompleted reports whether a checkpoint of job has completed.
func anyCompleted(job *ringflow.Job) bool {
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			return true
		}
	}
	return false
}
