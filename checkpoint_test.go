package ringflow_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// readParts returns the committed lines of a file sink directory, sorted.
func readParts(t *testing.T, dir string) []string {
	t.Helper()
	lines, err := ringflow.ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}

func checkpointed(dir string, interval time.Duration) ringflow.CheckpointConfig {
	return ringflow.CheckpointConfig{Interval: interval, StateDir: filepath.Join(dir, "state")}
}

// TestCheckpointedFileSink runs a bounded keyed job with checkpoints and a
// transactional file sink: the committed output is the full result, and
// the final checkpoint completed.
func TestCheckpointedFileSink(t *testing.T) {
	dir := t.TempDir()
	evs := makeEvents(seeds.Seed(t), 50_000, 300, 0)
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 64,
		Checkpoint: checkpointed(dir, 5*time.Millisecond)})
	s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
	k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
	counts := ringflow.Aggregate(k, "count", keyCount{})
	lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) })
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	run(t, job)
	diffRows(t, readParts(t, filepath.Join(dir, "out")), rollingCounts(evs))
	cps := job.Checkpoints()
	if len(cps) == 0 || !cps[len(cps)-1].Final || cps[len(cps)-1].Status != "completed" {
		t.Fatalf("checkpoints %+v: want the last to be a completed final one", cps)
	}
	t.Logf("%d checkpoints", len(cps))
}

// seqCheck is the keyed check of the sequence test: each key's records
// must come with sequence numbers 0, 1, 2, ... exactly; a gap or a repeat
// fails the job.
type seqCheck struct {
	last *ringflow.ValueState[uint64, uint64]
}

func (p *seqCheck) Open(s *ringflow.KeyedScope[uint64]) error {
	p.last = ringflow.NewValueState[uint64, uint64](s, "last")
	return nil
}

func (p *seqCheck) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	last, ok := p.last.Value()
	want := uint64(0)
	if ok {
		want = last + 1
	}
	if e.Seq != want {
		panic(fmt.Sprintf("key %d: sequence number %d, want %d (lost or duplicated)", ctx.Key(), e.Seq, want))
	}
	p.last.Update(e.Seq)
	out.Emit(fmt.Sprintf("%d:%d", ctx.Key(), e.Seq))
	return nil
}

func (p *seqCheck) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[string]) error {
	return nil
}

// failAfter is the function of a map that panics when the records it has
// seen (over all its subtasks, counted in seen) reach failAt[0], then
// failAt[1], ...; failures counts the panics. A failure is injected only
// once the job has restarted from the previous one: the other subtask goes
// on for a moment after a panic, and a second panic in the same attempt
// would cause no restart of its own.
func failAfter(job *ringflow.Job, failAt []int64, failures, seen *atomic.Int64) func(event) event {
	return func(e event) event {
		n := seen.Add(1)
		if f := failures.Load(); int(f) < len(failAt) && n >= failAt[f] && int(f) == job.Restarts() &&
			failures.CompareAndSwap(f, f+1) {
			panic(fmt.Sprintf("injected failure %d at record %d", f+1, n))
		}
		return e
	}
}

// sequenceJob is the sequence test's job: per-key sequence numbers, a
// failing map, a shuffle, the keyed check, and a transactional file sink.
func sequenceJob(dir string, keys, perKey uint64, par int, mode checkpointMode,
	failAt []int64, failures *atomic.Int64, seen *atomic.Int64, slowSink time.Duration, skew bool) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Parallelism: par, Workers: 2, BatchSize: 50, RingCapacity: 32 << 10,
		FrameBytes: 2 << 10, Debloat: mode.debloat, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	gen := func(i uint64) event { return event{Key: i % keys, Seq: i / keys} }
	if skew {
		// Half the records carry key 0 (all from source subtask 0, in
		// order); the rest spread over the other keys.
		gen = func(i uint64) event {
			if i%2 == 0 {
				return event{Key: 0, Seq: i / 2}
			}
			j := i / 2
			return event{Key: 1 + j%(keys-1), Seq: j / (keys - 1)}
		}
	}
	src := ringflow.Source(job, "seq", ringflow.Generate(gen, ringflow.GenOptions{Count: keys * perKey}))
	failing := ringflow.Map(src, "failing", failAfter(job, failAt, failures, seen))
	checked := ringflow.Process(ringflow.KeyBy(failing, func(e event) uint64 { return e.Key }), "check",
		func() ringflow.ProcessFunc[uint64, event, string] { return &seqCheck{} })
	if slowSink > 0 {
		checked = ringflow.Map(ringflow.Rebalance(checked), "slow", func(s string) string {
			// With skew, only the hot key's records are slow: one slow
			// channel rather than a slow sink.
			if !skew || strings.HasPrefix(s, "0:") {
				spin(slowSink)
			}
			return s
		})
	}
	ringflow.TxnSink(ringflow.Rebalance(checked), "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// checkpointMode is a way the failure tests take checkpoints.
type checkpointMode struct {
	name    string
	ck      ringflow.CheckpointConfig
	debloat time.Duration // ringflow.Config.Debloat: negative is off
}

// unaligned says whether the mode takes every checkpoint unaligned.
func (m checkpointMode) unaligned() bool { return m.ck.Unaligned }

// timeout says whether the mode switches to unaligned after a timeout.
func (m checkpointMode) timeout() bool { return m.ck.AlignmentTimeout > 0 }

// checkpointModes are the ways the failure tests take checkpoints: aligned,
// unaligned from the start, and aligned switching after a timeout; each
// with buffer debloating off (rings fill to their capacity) and with a
// 1 ms target, which bounds the tests' rings far below their capacity and
// shrinks their frames.
var checkpointModes = []checkpointMode{
	{"aligned", ringflow.CheckpointConfig{}, -1},
	{"unaligned", ringflow.CheckpointConfig{Unaligned: true}, -1},
	{"timeout", ringflow.CheckpointConfig{AlignmentTimeout: time.Millisecond}, -1},
	{"aligned+debloat", ringflow.CheckpointConfig{}, time.Millisecond},
	{"unaligned+debloat", ringflow.CheckpointConfig{Unaligned: true}, time.Millisecond},
	{"timeout+debloat", ringflow.CheckpointConfig{AlignmentTimeout: time.Millisecond}, time.Millisecond},
}

// TestSequenceWithFailures is the sequence test in the style of Flink's
// allround test: failures injected at seeded random points; afterwards the
// committed output holds every (key, seq) exactly once, the keyed check saw
// no gap or repeat, and the job restored once per failure.
func TestSequenceWithFailures(t *testing.T) {
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	base := seeds.Seed(t)
	restoredSome := false
	defer func() {
		if !t.Failed() && !restoredSome {
			t.Error("no run restored a checkpoint: the test did not exercise recovery from state")
		}
	}()
	for i := range rounds * len(checkpointModes) {
		seed := base + uint64(i)
		mode := checkpointModes[i%len(checkpointModes)]
		// Every other run has a slow sink, so that rings fill up and
		// barriers queue behind data.
		// Runs cycle through: no backpressure; a slow sink; a hot key
		// whose records are slow (skew and one slow channel).
		var slow time.Duration
		variant := i / len(checkpointModes) % 3
		if variant > 0 {
			slow = 2 * time.Microsecond
		}
		skew := variant == 2
		t.Run(fmt.Sprintf("%s/slow=%v/skew=%v/%d", mode.name, slow, skew, seed), func(t *testing.T) {
			const keys, perKey = 64, 2000
			rnd := rand.New(rand.NewPCG(seed, 5))
			nFail := 1 + rnd.IntN(3)
			var failAt []int64
			at := int64(0)
			for range nFail {
				at += 1 + rnd.Int64N(keys*perKey)
				failAt = append(failAt, at)
			}
			dir := t.TempDir()
			var failures, seen atomic.Int64
			job := sequenceJob(dir, keys, perKey, 2, mode, failAt, &failures, &seen, slow, skew)
			run(t, job)
			var want []string
			next := map[uint64]uint64{}
			gen := func(i uint64) (uint64, uint64) { return i % keys, i / keys }
			if skew {
				gen = func(i uint64) (uint64, uint64) {
					if i%2 == 0 {
						return 0, i / 2
					}
					j := i / 2
					return 1 + j%(keys-1), j / (keys - 1)
				}
			}
			for i := range uint64(keys * perKey) {
				k, s := gen(i)
				if s != next[k] {
					t.Fatalf("test generator: key %d seq %d, want %d", k, s, next[k])
				}
				next[k]++
				want = append(want, fmt.Sprintf("%d:%d", k, s))
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
			// A later failure point may lie beyond what the run processes
			// once it has restored; every failure that was injected must
			// have caused exactly one restart.
			if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
				t.Fatalf("%d restarts, %d failures injected (of %d planned)", job.Restarts(), failures.Load(), nFail)
			}
			// Each synchronous part's time on CPU lies within its wall
			// time. One part alone may read 0: under a hypervisor the
			// thread's clock leaves out the time the host took the vCPU
			// (steal), and a part of a few microseconds can fall wholly
			// in such a gap. Over the run the clock must have advanced.
			var unaligned, inflight uint64
			var syncCPU time.Duration
			for _, cp := range job.Checkpoints() {
				for _, st := range cp.Subtasks {
					if st.Unaligned {
						unaligned++
					}
					inflight += st.InflightBytes
					if st.SyncCPU < 0 || st.SyncCPU > st.Sync {
						t.Fatalf("checkpoint %d, %s#%d: synchronous part %v, of it on CPU %v: want from 0 to all of it",
							cp.ID, st.Operator, st.Subtask, st.Sync, st.SyncCPU)
					}
					syncCPU += st.SyncCPU
				}
			}
			if syncCPU <= 0 {
				t.Fatalf("%d checkpoints: their synchronous parts spent %v on CPU in all, want more than 0",
					len(job.Checkpoints()), syncCPU)
			}
			t.Logf("failures at %v; %d checkpoints (%d unaligned subtask snapshots, %d in-flight bytes); last restore from checkpoint %d",
				failAt, len(job.Checkpoints()), unaligned, inflight, job.RestoredFrom())
			if mode.unaligned() != (unaligned > 0) && !mode.timeout() {
				t.Fatalf("mode %s took %d unaligned subtask snapshots", mode.name, unaligned)
			}
			if job.RestoredFrom() > 0 {
				restoredSome = true
			}
		})
	}
}

// windowSums is a window job over event-time records: sums per key and
// 100 ms tumbling window, through a failing map, into a file sink.
func windowJob(dir string, evs []event, par int, mode checkpointMode, failAt []int64, failures, seen *atomic.Int64,
	slow time.Duration) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Parallelism: par, Workers: 2, BatchSize: 50, RingCapacity: 32 << 10,
		FrameBytes: 2 << 10, Debloat: mode.debloat, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
	src := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
	failing := ringflow.Map(src, "failing", failAfter(job, failAt, failures, seen))
	k := ringflow.KeyBy(failing, func(e event) uint64 { return e.Key })
	w := ringflow.Window(k, "sum", ringflow.TumblingWindows(100*time.Millisecond), valueSum{})
	lines := ringflow.Map(w, "fmt", func(r ringflow.WindowResult[uint64, int64]) string {
		return fmt.Sprintf("%d [%d,%d) %d", r.Key, r.Start, r.End, r.Value)
	})
	if slow > 0 {
		// A slow consumer behind a rebalance: its rings fill, and the
		// window task and the source behind it are backpressured.
		lines = ringflow.Map(ringflow.Rebalance(lines), "slow", func(s string) string { spin(slow); return s })
	}
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// TestWindowsWithFailures checks that window sums after injected failures
// equal the closed-form result, each window emitted exactly once.
func TestWindowsWithFailures(t *testing.T) {
	const rounds = 2
	base := seeds.Seed(t)
	for i := range rounds * len(checkpointModes) {
		seed := base + uint64(i)
		mode := checkpointModes[i%len(checkpointModes)]
		var slow time.Duration
		if i/len(checkpointModes)%2 == 1 {
			slow = 20 * time.Microsecond
		}
		t.Run(fmt.Sprintf("%s/slow+skew=%v/%d", mode.name, slow, seed), func(t *testing.T) {
			evs := makeEvents(seed, 60_000, 40, 20)
			if slow > 0 {
				for i := range evs { // skew: half the records carry one hot key
					if i%2 == 0 {
						evs[i].Key = 0
					}
				}
			}
			want := bruteWindows(evs, ringflow.TumblingWindows(100*time.Millisecond))
			rnd := rand.New(rand.NewPCG(seed, 9))
			failAt := []int64{1 + rnd.Int64N(60_000), 60_000 + rnd.Int64N(30_000)}
			dir := t.TempDir()
			var failures, seen atomic.Int64
			job := windowJob(dir, evs, 2, mode, failAt, &failures, &seen, slow)
			run(t, job)
			diffRows(t, readParts(t, filepath.Join(dir, "out")), want)
			if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
				t.Fatalf("%d restarts, %d failures injected", job.Restarts(), failures.Load())
			}
		})
	}
}

// TestRescale takes checkpoints at parallelism 2, stops the job, and resumes
// it from its state dir at parallelism 1 and at 4: the committed output
// equals that of a run without rescaling. (The count is a MapWithState;
// TestRescaleUnaligned rescales an Aggregate.)
func TestRescale(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 80_000, 500, 0)
	want := rollingCounts(evs)
	build := func(dir string, par int, rate float64, debloat time.Duration) *ringflow.Job {
		job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, Debloat: debloat,
			Checkpoint: checkpointed(dir, 2*time.Millisecond)})
		s := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event { return evs[i] },
			ringflow.GenOptions{Count: uint64(len(evs)), Rate: rate}))
		k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
		counts := ringflow.MapWithState(k, "count", func(n *uint64, e event) [2]uint64 {
			*n++
			return [2]uint64{e.Key, *n}
		}, ringflow.Parallelism(par))
		lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) },
			ringflow.Parallelism(par))
		ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")), ringflow.Parallelism(par))
		return job
	}
	for _, to := range rescaleTargets {
		t.Run(to.String(), func(t *testing.T) {
			dir := t.TempDir()
			first := build(dir, 2, 50_000, to.debloat) // 1.6 s of input
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for len(first.Checkpoints()) < 2 {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			if err := first.Run(ctx); err != context.Canceled {
				t.Fatalf("first run: %v, want it cancelled after 2 checkpoints", err)
			}
			second := build(dir, to.par, 0, to.debloat)
			run(t, second)
			if second.RestoredFrom() == 0 {
				t.Fatal("the second run did not restore a checkpoint")
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), want)
		})
	}
}

// rescaleTargets are the rescaling tests' cases: the parallelism the job
// resumes at, from 2, without and with buffer debloating.
var rescaleTargets = []rescaleTarget{{1, -1}, {4, -1}, {1, time.Millisecond}, {4, time.Millisecond}}

type rescaleTarget struct {
	par     int
	debloat time.Duration
}

func (r rescaleTarget) String() string {
	if r.debloat > 0 {
		return fmt.Sprintf("%d+debloat", r.par)
	}
	return fmt.Sprint(r.par)
}

// listCheck keeps each key's records in a list state and, at the end of
// event time, emits the list's length and sum; across failures and
// restores the list must hold every record of its key exactly once.
type listCheck struct {
	list *ringflow.ListState[uint64, uint64]
}

func (p *listCheck) Open(s *ringflow.KeyedScope[uint64]) error {
	p.list = ringflow.NewListState[uint64, uint64](s, "list")
	return nil
}

func (p *listCheck) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	if len(p.list.Get()) == 0 {
		ctx.RegisterEventTimer(1 << 40)
	}
	p.list.Add(e.Seq)
	return nil
}

func (p *listCheck) OnTimer(ctx *ringflow.KeyedContext[uint64], _ int64, _ ringflow.TimeDomain, out *ringflow.Collector[string]) error {
	var sum uint64
	for _, v := range p.list.Get() {
		sum += v
	}
	out.Emit(fmt.Sprintf("%d:%d:%d", ctx.Key(), len(p.list.Get()), sum))
	p.list.Clear()
	return nil
}

// TestListStateWithFailures restores list state through failures: each
// key's final list has every record once.
func TestListStateWithFailures(t *testing.T) {
	seed := seeds.Seed(t)
	rnd := rand.New(rand.NewPCG(seed, 21))
	const keys, perKey = 50, 1000
	failAt := []int64{1 + rnd.Int64N(keys*perKey), keys*perKey + rnd.Int64N(keys*perKey/2)}
	var failures, seen atomic.Int64
	dir := t.TempDir()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50,
		Checkpoint: checkpointed(dir, 2*time.Millisecond), Restart: ringflow.RestartStrategy{Attempts: 2}})
	src := ringflow.SourceWithEventTime(job, "src", ringflow.Generate(func(i uint64) event {
		return event{Key: i % keys, Seq: i / keys, TS: int64(i / 100)}
	}, ringflow.GenOptions{Count: keys * perKey}), eventTime())
	failing := ringflow.Map(src, "failing", failAfter(job, failAt, &failures, &seen))
	out := ringflow.Process(ringflow.KeyBy(failing, func(e event) uint64 { return e.Key }), "lists",
		func() ringflow.ProcessFunc[uint64, event, string] { return &listCheck{} })
	ringflow.TxnSink(out, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	run(t, job)
	var want []string
	for k := range keys {
		want = append(want, fmt.Sprintf("%d:%d:%d", k, perKey, perKey*(perKey-1)/2))
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
	if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
		t.Fatalf("%d restarts, %d failures injected", job.Restarts(), failures.Load())
	}
}

// TestRescaleUnaligned takes unaligned checkpoints of a backpressured keyed
// job at parallelism 2, with in-flight data recorded, stops it, and resumes
// it at parallelism 1 and 4: the recorded records are redistributed by key
// group, and the committed output equals an uninterrupted run's.
func TestRescaleUnaligned(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 60_000, 300, 0)
	want := rollingCounts(evs)
	build := func(dir string, par int, slow, debloat time.Duration) *ringflow.Job {
		ck := checkpointed(dir, 5*time.Millisecond)
		ck.Unaligned = true
		job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, RingCapacity: 16 << 10,
			FrameBytes: 1 << 10, Debloat: debloat, Checkpoint: ck})
		s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
		k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
		counts := ringflow.Aggregate(k, "count", keyCount{}, ringflow.Parallelism(par))
		lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string {
			spin(slow)
			return fmt.Sprintf("%d:%d", kc[0], kc[1])
		}, ringflow.Parallelism(par))
		ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")), ringflow.Parallelism(par))
		return job
	}
	inflight := func(cps []ringflow.CheckpointStats) (n uint64) {
		for _, c := range cps {
			if c.Status != "completed" {
				continue
			}
			n = 0
			for _, s := range c.Subtasks {
				n += s.InflightBytes
			}
		}
		return n
	}
	for _, to := range rescaleTargets {
		t.Run(to.String(), func(t *testing.T) {
			dir := t.TempDir()
			first := build(dir, 2, 20*time.Microsecond, to.debloat)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for inflight(first.Checkpoints()) == 0 {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			if err := first.Run(ctx); err != context.Canceled {
				t.Fatalf("first run: %v, want it cancelled once a checkpoint recorded in-flight data", err)
			}
			t.Logf("stopped with %d in-flight bytes in the last checkpoint", inflight(first.Checkpoints()))
			second := build(dir, to.par, 0, to.debloat)
			run(t, second)
			if second.RestoredFrom() == 0 {
				t.Fatal("the second run did not restore a checkpoint")
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), want)
		})
	}
}

// rollingCounts is the output of a rolling count per key over evs, as
// "key:count" lines, sorted.
func rollingCounts(evs []event) []string {
	var want []string
	n := map[uint64]uint64{}
	for _, e := range evs {
		n[e.Key]++
		want = append(want, fmt.Sprintf("%d:%d", e.Key, n[e.Key]))
	}
	return sortedCopy(want)
}
