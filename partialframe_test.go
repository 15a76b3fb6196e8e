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

// tagged is event with a field that makes its codec variable-size.
type tagged struct {
	Key, Seq uint64
	Tag      string
}

// taggedCheck is seqCheck over tagged records.
type taggedCheck struct{ seqCheck }

func (p *taggedCheck) Process(ctx *ringflow.KeyedContext[uint64], e tagged, out *ringflow.Collector[string]) error {
	return p.seqCheck.Process(ctx, event{Key: e.Key, Seq: e.Seq}, out)
}

// TestUnalignedPartialFrames: a task whose records take 20µs each stops
// its steps part-way through a frame of 1,024 of them, so that barriers and
// unaligned snapshots need not wait 20ms for the frame's end. A snapshot
// taken while a frame is half pushed has the pushed records in its state
// and the rest in its channel state. With failures injected and unaligned
// checkpoints every 5ms, over frames of fixed- and variable-size records,
// with and without timestamps, the keyed check sees every sequence number
// once and in order and the committed output holds every record exactly
// once; the test fails unless steps were cut and in-flight data recorded.
func TestUnalignedPartialFrames(t *testing.T) {
	base := seeds.Seed(t)
	for i, v := range []struct{ varSize, timed bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("var=%v/timed=%v/%d", v.varSize, v.timed, seed), func(t *testing.T) {
			// 24,000 records at 20µs: ~0.25 s a run, long enough for
			// checkpoints every 5ms to complete before the failures.
			const keys, perKey = 16, 1500
			rnd := rand.New(rand.NewPCG(seed, 9))
			// After the first checkpoints: a restore from nothing would
			// not exercise channel state.
			failAt := []int64{keys*perKey/8 + rnd.Int64N(keys*perKey/4)}
			failAt = append(failAt, failAt[0]+1+rnd.Int64N(keys*perKey/4))
			dir := t.TempDir()
			ck := ringflow.CheckpointConfig{Unaligned: true, Interval: 5 * time.Millisecond,
				StateDir: filepath.Join(dir, "state")}
			job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 1024, RingCapacity: 128 << 10,
				FrameBytes: 32 << 10, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
			evs := make([]event, keys*perKey)
			for i := range evs {
				evs[i] = event{Key: uint64(i) % keys, Seq: uint64(i) / keys, TS: int64(i)}
			}
			var src ringflow.Stream[event]
			if v.timed {
				src = ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
			} else {
				src = ringflow.Source(job, "src", ringflow.FromSlice(evs))
			}
			var checked ringflow.Stream[string]
			if v.varSize {
				tg := ringflow.Map(src, "tag", func(e event) tagged { return tagged{e.Key, e.Seq, "t"} })
				checked = ringflow.Process(ringflow.KeyBy(tg, func(e tagged) uint64 { return e.Key }), "check",
					func() ringflow.ProcessFunc[uint64, tagged, string] { return &taggedCheck{} })
			} else {
				checked = ringflow.Process(ringflow.KeyBy(src, func(e event) uint64 { return e.Key }), "check",
					func() ringflow.ProcessFunc[uint64, event, string] { return &seqCheck{} })
			}
			// The slow map is chained into the check's task, and fails
			// there: a restore then needs the check's state and the
			// channel state of its inputs. It fails only once more
			// checkpoints have completed than the job has restarted, so
			// that every restore has one to restore.
			var failures, seen atomic.Int64
			fail := failAfter(job, failAt, &failures, &seen)
			slow := ringflow.Map(checked, "slow", func(s string) string {
				spin(20 * time.Microsecond)
				if completed(job) > job.Restarts() {
					fail(event{})
				}
				return s
			})
			ringflow.TxnSink(slow, "out", ringflow.FileSink(filepath.Join(dir, "out")))
			run(t, job)

			var want []string
			for _, e := range evs {
				want = append(want, fmt.Sprintf("%d:%d", e.Key, e.Seq))
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
			if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
				t.Fatalf("%d restarts, %d failures injected", job.Restarts(), failures.Load())
			}
			var inflight uint64
			for _, cp := range job.Checkpoints() {
				for _, st := range cp.Subtasks {
					inflight += st.InflightBytes
				}
			}
			cut := operatorMetrics(t, job, "check").StepsCut
			t.Logf("failures at %v; %d checkpoints, %d in-flight bytes, %d steps cut, restored from %d",
				failAt, len(job.Checkpoints()), inflight, cut, job.RestoredFrom())
			if cut == 0 || inflight == 0 || job.RestoredFrom() == 0 {
				t.Fatalf("%d steps cut part-way through a frame, %d in-flight bytes recorded, restored from checkpoint %d: the test did not exercise them",
					cut, inflight, job.RestoredFrom())
			}
		})
	}
}

// completed counts the job's completed checkpoints.
func completed(job *ringflow.Job) int {
	n := 0
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			n++
		}
	}
	return n
}
