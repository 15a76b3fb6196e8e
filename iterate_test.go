package ringflow_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// hop is a record of the counting loop: it goes round Rounds times.
type hop struct {
	ID    uint64
	Round uint32
	Seen  uint32 // the record's visits as its key's state counted them
}

const hopRounds = 8

// hopJob is the counting loop: every record goes round hopRounds times,
// through a failing map, a keyed operator that counts each record's
// visits in its state, and, if slow, a slow map in front of the head's
// output so that the head is backpressured while records come back. A
// record leaves after its last round, as "id visits", into a
// transactional file sink: exactly once means every id once, with
// hopRounds visits.
func hopJob(dir string, n int, mode checkpointMode, failAt []int64, failures, seen *atomic.Int64, slow bool) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Logger: quietLogger(), Parallelism: 2, Workers: 2, BatchSize: 64, RingCapacity: 16 << 10,
		FrameBytes: 1 << 10, Debloat: mode.debloat, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	recs := make([]hop, n)
	for i := range recs {
		recs[i] = hop{ID: uint64(i)}
	}
	src := ringflow.Source(job, "src", ringflow.FromSlice(recs))
	out := ringflow.Iterate(src, "loop", func(in ringflow.Stream[hop]) (ringflow.Stream[hop], ringflow.Stream[string]) {
		if slow {
			in = ringflow.Map(in, "slow", func(h hop) hop { spin(2 * time.Microsecond); return h })
		}
		failing := ringflow.Map(in, "failing", func(h hop) hop {
			k := seen.Add(1)
			if f := failures.Load(); int(f) < len(failAt) && k >= failAt[f] && int(f) == job.Restarts() &&
				failures.CompareAndSwap(f, f+1) {
				panic(fmt.Sprintf("injected failure %d at record %d", f+1, k))
			}
			return h
		})
		counted := ringflow.MapWithState(ringflow.KeyBy(failing, func(h hop) uint64 { return h.ID }), "count",
			func(visits *uint32, h hop) hop {
				*visits++
				h.Round++
				h.Seen = *visits
				return h
			})
		back := ringflow.Filter(counted, "again", func(h hop) bool { return h.Round < hopRounds })
		done := ringflow.Filter(counted, "done", func(h hop) bool { return h.Round == hopRounds })
		return back, ringflow.Map(done, "fmt", func(h hop) string { return fmt.Sprintf("%d %d", h.ID, h.Seen) })
	})
	ringflow.TxnSink(out, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// TestIterateCountingWithFailures runs the counting loop under injected
// failures, in every checkpoint mode, with and without a backpressured
// head: after it, each record left the loop exactly once, having been
// counted exactly hopRounds times. With -loop.noreplay (restored loop logs
// dropped) it fails: records in transit on the back edge at a restored
// checkpoint are lost.
func TestIterateCountingWithFailures(t *testing.T) {
	ringflow.LoopReplayOff()
	base := seeds.Seed(t)
	restoredSome := false
	defer func() {
		if !t.Failed() && !restoredSome {
			t.Error("no run restored a checkpoint: the test did not exercise recovery")
		}
	}()
	modes := []checkpointMode{checkpointModes[0], checkpointModes[1], checkpointModes[2]}
	for i := range 2 * len(modes) {
		seed := base + uint64(i)
		mode := modes[i%len(modes)]
		slow := i/len(modes)%2 == 1
		t.Run(fmt.Sprintf("%s/slow=%v/%d", mode.name, slow, seed), func(t *testing.T) {
			const n = 20000
			rnd := rand.New(rand.NewPCG(seed, 7))
			var failAt []int64
			at := int64(0)
			for range 1 + rnd.IntN(3) {
				at += 1 + rnd.Int64N(n*hopRounds/2)
				failAt = append(failAt, at)
			}
			dir := t.TempDir()
			var failures, seen atomic.Int64
			job := hopJob(dir, n, mode, failAt, &failures, &seen, slow)
			run(t, job)
			want := make([]string, n)
			for i := range want {
				want[i] = fmt.Sprintf("%d %d", i, hopRounds)
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
			if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
				t.Fatalf("%d restarts, %d failures injected (of %d planned)", job.Restarts(), failures.Load(), len(failAt))
			}
			logged := 0
			for _, cp := range job.Checkpoints() {
				for _, st := range cp.Subtasks {
					logged += st.LoopRecords
				}
			}
			t.Logf("failures at %v; %d checkpoints logged %d records in transit; last restore from checkpoint %d",
				failAt, len(job.Checkpoints()), logged, job.RestoredFrom())
			if job.RestoredFrom() > 0 {
				restoredSome = true
			}
		})
	}
}

// quietLogger discards the job's log: the failures the tests inject are
// logged with their stacks.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
