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

// tick is a record of the timer loop: each round it waits in a keyed
// timer, which sends it on.
type tick struct {
	ID    uint64
	TS    int64
	Round uint32
	Outer uint32 // rounds of the outer loop, in nested loops
	Seen  uint32 // the record's visits as its key's state counted them
}

const tickRounds = 5

// tickDelay is how long a record waits in a processing-time timer: long
// enough that the records go round in waves, with nothing in transit on
// the loop between them, so that a final checkpoint that did not wait
// for timers would find the loop empty while every record waits in one.
const tickDelay = 20 * time.Millisecond

// delay holds each record in keyed state until a timer of its key fires,
// and then sends it on, a round later: every round of the loop goes
// through a timer. It counts each key's visits in its state.
type delay struct {
	domain ringflow.TimeDomain
	held   *ringflow.ValueState[uint64, tick]
	visits *ringflow.ValueState[uint64, uint32]
}

func (d *delay) Open(s *ringflow.KeyedScope[uint64]) error {
	d.held = ringflow.NewValueState[uint64, tick](s, "held")
	d.visits = ringflow.NewValueState[uint64, uint32](s, "visits")
	return nil
}

func (d *delay) Process(ctx *ringflow.KeyedContext[uint64], r tick, _ *ringflow.Collector[tick]) error {
	if _, ok := d.held.Value(); ok {
		return fmt.Errorf("record %d: a second record of the key while one waits", r.ID)
	}
	v, _ := d.visits.Value()
	v++
	d.visits.Update(v)
	r.Seen = v
	d.held.Update(r)
	if d.domain == ringflow.EventTime {
		ctx.RegisterEventTimer(ctx.Timestamp())
	} else {
		ctx.RegisterProcessingTimer(time.Now().Add(tickDelay))
	}
	return nil
}

func (d *delay) OnTimer(_ *ringflow.KeyedContext[uint64], _ int64, _ ringflow.TimeDomain, out *ringflow.Collector[tick]) error {
	r, ok := d.held.Value()
	if !ok {
		return nil
	}
	d.held.Clear()
	r.Round++
	out.Emit(r)
	return nil
}

// timerLoopJob is the timer loop: every record goes round tickRounds
// times, each round through a failing map and a keyed timer of the
// domain, and leaves as "id visits" into a transactional file sink.
func timerLoopJob(dir string, n int, domain ringflow.TimeDomain, mode checkpointMode, failAt []int64,
	afterCheckpoint bool, failures, seen *atomic.Int64) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Logger: quietLogger(), Parallelism: 2, Workers: 2, BatchSize: 64,
		RingCapacity: 16 << 10, FrameBytes: 1 << 10, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	src := ringflow.SourceWithEventTime(job, "src", heldSource(ringflow.Generate(func(i uint64) tick { return tick{ID: i, TS: int64(i)} },
		ringflow.GenOptions{Count: uint64(n)}), n/4, hasCheckpoint(job, afterCheckpoint)), ringflow.WatermarkStrategy[tick]{Timestamp: func(r tick) int64 { return r.TS }},
		ringflow.Parallelism(2))
	out := ringflow.Iterate(src, "loop", func(in ringflow.Stream[tick]) (ringflow.Stream[tick], ringflow.Stream[string]) {
		failing := ringflow.Map(in, "failing", failingOnce[tick](job, failAt, failures, seen, hasCheckpoint(job, afterCheckpoint)))
		next := ringflow.Process(ringflow.KeyBy(failing, func(r tick) uint64 { return r.ID }), "delay",
			func() ringflow.ProcessFunc[uint64, tick, tick] { return &delay{domain: domain} })
		back := ringflow.Filter(next, "again", func(r tick) bool { return r.Round < tickRounds })
		done := ringflow.Filter(next, "done", func(r tick) bool { return r.Round == tickRounds })
		return back, ringflow.Map(done, "fmt", func(r tick) string { return fmt.Sprintf("%d %d", r.ID, r.Seen) })
	})
	ringflow.TxnSink(out, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// TestIterateWaitsForTimers runs a loop whose every round waits in a
// keyed timer of the body, event time and processing time, under a
// seeded failure, in the checkpoint modes: after it, each record left the
// loop exactly once, having visited the timer's operator exactly
// tickRounds times. The job ends on its own, so its end waited for the
// timers: with -loop.notimerwait it fails, a record waiting in a timer at
// the end is lost.
func TestIterateWaitsForTimers(t *testing.T) {
	ringflow.LoopTimerWaitOff()
	runTimerLoops(t, 3000, tickRounds, tickRounds, 17, timerLoopJob, nil)
}

const innerRounds, outerRounds = 3, 4

// nestedLoopJob is a loop inside another's body: each round of the outer
// loop, a record goes innerRounds times round the inner one, waiting each
// time in a keyed timer of the domain, and leaves the outer loop after
// outerRounds rounds as "id visits" into a transactional file sink.
func nestedLoopJob(dir string, n int, domain ringflow.TimeDomain, mode checkpointMode, failAt []int64,
	afterCheckpoint bool, failures, seen *atomic.Int64) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Logger: quietLogger(), Parallelism: 2, Workers: 2, BatchSize: 64,
		RingCapacity: 16 << 10, FrameBytes: 1 << 10, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	src := ringflow.SourceWithEventTime(job, "src", heldSource(ringflow.Generate(func(i uint64) tick { return tick{ID: i, TS: int64(i)} },
		ringflow.GenOptions{Count: uint64(n)}), n/4, hasCheckpoint(job, afterCheckpoint)), ringflow.WatermarkStrategy[tick]{Timestamp: func(r tick) int64 { return r.TS }},
		ringflow.Parallelism(2))
	out := ringflow.Iterate(src, "outer", func(in ringflow.Stream[tick]) (ringflow.Stream[tick], ringflow.Stream[string]) {
		in = ringflow.Map(in, "failing", failingOnce[tick](job, failAt, failures, seen, hasCheckpoint(job, afterCheckpoint)))
		inner := ringflow.Iterate(in, "inner", func(in ringflow.Stream[tick]) (ringflow.Stream[tick], ringflow.Stream[tick]) {
			next := ringflow.Process(ringflow.KeyBy(in, func(r tick) uint64 { return r.ID }), "delay",
				func() ringflow.ProcessFunc[uint64, tick, tick] { return &delay{domain: domain} })
			return ringflow.Filter(next, "inner again", func(r tick) bool { return r.Round%innerRounds != 0 }),
				ringflow.Filter(next, "inner done", func(r tick) bool { return r.Round%innerRounds == 0 })
		}, ringflow.Parallelism(3))
		next := ringflow.Map(inner, "outer step", func(r tick) tick { r.Outer++; return r })
		back := ringflow.Filter(next, "outer again", func(r tick) bool { return r.Outer < outerRounds })
		done := ringflow.Filter(next, "outer done", func(r tick) bool { return r.Outer == outerRounds })
		return back, ringflow.Map(done, "fmt", func(r tick) string { return fmt.Sprintf("%d %d", r.ID, r.Seen) })
	})
	ringflow.TxnSink(out, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// TestIterateNested runs a loop inside another's body, whose inner rounds
// wait in keyed timers, under a seeded failure, in the checkpoint modes:
// after it, each record left the outer loop exactly once, having visited
// the inner body exactly outerRounds*innerRounds times, and the job ended
// on a final checkpoint that found both loops quiescent.
func TestIterateNested(t *testing.T) {
	ringflow.LoopReplayOff()
	ringflow.LoopTimerWaitOff()
	runTimerLoops(t, 2000, outerRounds, outerRounds*innerRounds, 19, nestedLoopJob, func(t *testing.T, last ringflow.CheckpointStats) {
		heads := map[string]int{}
		for _, st := range last.Subtasks {
			if st.Operator == "outer" || st.Operator == "inner" {
				heads[st.Operator]++
			}
		}
		if heads["outer"] != 2 || heads["inner"] != 3 {
			t.Fatalf("final checkpoint %d: parts of the heads %v, want outer 2, inner 3", last.ID, heads)
		}
	})
}

// loopJob builds a job of the timer loop tests: n records through a loop,
// in the given time domain and checkpoint mode, failing when the failing
// operator has seen the numbers of records in failAt and, if
// afterCheckpoint, a checkpoint has completed (the source holding half
// its records back until then).
type loopJob func(dir string, n int, domain ringflow.TimeDomain, mode checkpointMode, failAt []int64,
	afterCheckpoint bool, failures, seen *atomic.Int64) *ringflow.Job

// heldSource wraps a source: after at records, each subtask reads nothing
// more until release reports true. With release nil it is src.
func heldSource[T any](src ringflow.NewSource[T], at int, release func() bool) ringflow.NewSource[T] {
	if release == nil {
		return src
	}
	return func() ringflow.SourceFunc[T] { return &held[T]{SourceFunc: src(), at: at, release: release} }
}

type held[T any] struct {
	ringflow.SourceFunc[T]
	at, read int // read: records read since Open
	release  func() bool
}

func (h *held[T]) Read(buf []T) (int, error) {
	if h.read < h.at {
		buf = buf[:min(len(buf), h.at-h.read)]
	} else if !h.release() {
		return 0, nil
	}
	n, err := h.SourceFunc.Read(buf)
	h.read += n
	return n, err
}

// hasCheckpoint returns, if on, a function that reports whether job has
// completed a checkpoint; else nil.
func hasCheckpoint(job *ringflow.Job, on bool) func() bool {
	if !on {
		return nil
	}
	return func() bool { return len(job.Checkpoints()) > 0 }
}

// runTimerLoops runs the job of build for n records in three checkpoint
// modes and both time domains, each with one seeded failure among the
// first n*rounds records its failing operator sees (salt tells the tests'
// draws apart): every record leaves the loop once, having made visits
// visits; the job ends on a final checkpoint that found no record in
// transit and no timer pending, and check, if set, looks at it further.
// Every other run puts its failure off until a checkpoint has completed,
// so that its restart restores one, and holds its sources halfway until
// then, so that records still pass the failing operator after it; the
// others may fail before any checkpoint.
func runTimerLoops(t *testing.T, n, rounds, visits int, salt uint64, build loopJob,
	check func(t *testing.T, last ringflow.CheckpointStats)) {
	base := seeds.Seed(t)
	modes := []checkpointMode{checkpointModes[0], checkpointModes[1], checkpointModes[2]}
	domains := []ringflow.TimeDomain{ringflow.EventTime, ringflow.ProcessingTime}
	for i := range 2 * len(modes) {
		seed := base + uint64(i)
		mode, domain := modes[i%len(modes)], domains[i/len(modes)]
		afterCheckpoint := i%2 == 1
		name := map[ringflow.TimeDomain]string{ringflow.EventTime: "event", ringflow.ProcessingTime: "processing"}[domain]
		when := map[bool]string{false: "any", true: "checkpointed"}[afterCheckpoint]
		t.Run(fmt.Sprintf("%s/%s/%s/%d", name, mode.name, when, seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, salt))
			failAt := []int64{1 + rnd.Int64N(int64(n*rounds))}
			dir := t.TempDir()
			var failures, seen atomic.Int64
			job := build(dir, n, domain, mode, failAt, afterCheckpoint, &failures, &seen)
			run(t, job)
			want := make([]string, n)
			for i := range want {
				want[i] = fmt.Sprintf("%d %d", i, visits)
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
			if job.Restarts() != int(failures.Load()) || failures.Load() != 1 {
				t.Fatalf("%d restarts, %d failures injected (of %d planned)", job.Restarts(), failures.Load(), len(failAt))
			}
			cps := job.Checkpoints()
			last := cps[len(cps)-1]
			if !last.Final {
				t.Fatalf("the last of %d checkpoints is not final", len(cps))
			}
			timers, logged := 0, 0
			for _, cp := range cps {
				for _, st := range cp.Subtasks {
					timers += st.LoopTimers
					logged += st.LoopRecords
				}
			}
			for _, st := range last.Subtasks {
				if st.LoopRecords != 0 || st.LoopTimers != 0 {
					t.Fatalf("final checkpoint %d: %s#%d logged %d records, found %d timers pending",
						last.ID, st.Operator, st.Subtask, st.LoopRecords, st.LoopTimers)
				}
			}
			if check != nil {
				check(t, last)
			}
			t.Logf("failure at %v; %d checkpoints logged %d records in transit and counted %d pending timers at their heads; restored from checkpoint %d",
				failAt, len(cps), logged, timers, job.RestoredFrom())
			if afterCheckpoint && job.RestoredFrom() == 0 {
				t.Fatalf("the failure came after a checkpoint completed, but the restart restored none")
			}
		})
	}
}
