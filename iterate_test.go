package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
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
func hopJob(dir string, n int, mode checkpointMode, failAt []int64, failures, seen *atomic.Int64, slow bool,
	tweaks ...func(*ringflow.Config)) *ringflow.Job {
	return hopJobPaced(dir, n, 0, mode, failAt, failures, seen, slow, tweaks...)
}

// hopJobPaced is hopJob with a source of rate records a second (0: as fast
// as the loop takes them).
func hopJobPaced(dir string, n int, rate float64, mode checkpointMode, failAt []int64, failures, seen *atomic.Int64, slow bool,
	tweaks ...func(*ringflow.Config)) *ringflow.Job {
	ck := mode.ck
	ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
	cfg := ringflow.Config{Logger: quietLogger(), Parallelism: 2, Workers: 2, BatchSize: 64, RingCapacity: 16 << 10,
		FrameBytes: 1 << 10, Debloat: mode.debloat, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: len(failAt)}}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	job := ringflow.NewJob(cfg)
	src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) hop { return hop{ID: i} },
		ringflow.GenOptions{Count: uint64(n), Rate: rate}), ringflow.Parallelism(2)) // NB: Generate cannot rescale
	out := ringflow.Iterate(src, "loop", func(in ringflow.Stream[hop]) (ringflow.Stream[hop], ringflow.Stream[string]) {
		if slow {
			in = ringflow.Map(in, "slow", func(h hop) hop { spin(2 * time.Microsecond); return h })
		}
		failing := ringflow.Map(in, "failing", failing[hop](job, failAt, failures, seen))
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

// failing returns a function that passes records through and panics at
// the records failAt counts (in seen), once each, in order.
func failing[T any](job *ringflow.Job, failAt []int64, failures, seen *atomic.Int64) func(T) T {
	return failingOnce[T](job, failAt, failures, seen, nil)
}

// failingOnce is failing, each failure put off until ready (if not nil)
// reports true.
func failingOnce[T any](job *ringflow.Job, failAt []int64, failures, seen *atomic.Int64, ready func() bool) func(T) T {
	return func(r T) T {
		k := seen.Add(1)
		if f := failures.Load(); int(f) < len(failAt) && k >= failAt[f] && int(f) == job.Restarts() &&
			(ready == nil || ready()) && failures.CompareAndSwap(f, f+1) {
			panic(fmt.Sprintf("injected failure %d at record %d", f+1, k))
		}
		return r
	}
}

// ccMsg is a message of the connected-components loop: an edge from V to
// W (entering), a label W offered to V (fed back), or V's label lowered to
// W (leaving).
type ccMsg struct {
	Kind uint8
	V, W uint64
}

const (
	ccEdge uint8 = iota
	ccOffer
	ccLabel
)

// relax is the keyed step of label propagation: each vertex keeps its
// neighbours and the lowest label it has seen, and offers a lower label
// to every neighbour.
type relax struct {
	label *ringflow.ValueState[uint64, uint64]
	adj   *ringflow.ListState[uint64, uint64]
}

func (r *relax) Open(s *ringflow.KeyedScope[uint64]) error {
	r.label = ringflow.NewValueState[uint64, uint64](s, "label")
	r.adj = ringflow.NewListState[uint64, uint64](s, "adj")
	return nil
}

func (r *relax) Process(_ *ringflow.KeyedContext[uint64], m ccMsg, out *ringflow.Collector[ccMsg]) error {
	l, ok := r.label.Value()
	if !ok {
		l = m.V
		r.label.Update(l)
		out.Emit(ccMsg{Kind: ccLabel, V: m.V, W: l})
	}
	switch m.Kind {
	case ccEdge:
		r.adj.Add(m.W)
		out.Emit(ccMsg{Kind: ccOffer, V: m.W, W: l})
	case ccOffer:
		if m.W >= l {
			return nil
		}
		r.label.Update(m.W)
		out.Emit(ccMsg{Kind: ccLabel, V: m.V, W: m.W})
		for _, w := range r.adj.Get() {
			out.Emit(ccMsg{Kind: ccOffer, V: w, W: m.W})
		}
	}
	return nil
}

func (r *relax) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[ccMsg]) error {
	return nil
}

// randomGraph returns m random edges among n vertices, both ways, and the
// component of each vertex as a union-find finds it: its lowest vertex.
func randomGraph(seed uint64, n, m int) ([]ccMsg, map[uint64]uint64) {
	rnd := rand.New(rand.NewPCG(seed, 11))
	parent := make([]uint64, n)
	for i := range parent {
		parent[i] = uint64(i)
	}
	var find func(x uint64) uint64
	find = func(x uint64) uint64 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	var msgs []ccMsg
	touched := map[uint64]bool{}
	for range m {
		u, v := rnd.Uint64N(uint64(n)), rnd.Uint64N(uint64(n))
		msgs = append(msgs, ccMsg{Kind: ccEdge, V: u, W: v}, ccMsg{Kind: ccEdge, V: v, W: u})
		touched[u], touched[v] = true, true
		a, b := find(u), find(v)
		if a > b {
			a, b = b, a
		}
		parent[b] = a // the root of a component is its lowest vertex
	}
	comp := map[uint64]uint64{}
	for v := range touched {
		comp[v] = find(v)
	}
	return msgs, comp
}

// TestIterateConnectedComponents finds the connected components of a
// seeded random graph by label propagation in a loop, under injected
// failures, and compares each vertex's lowest label with a union-find's
// component. With -loop.noreplay it fails: a label offer in transit on
// the back edge at a restored checkpoint is lost, and a vertex keeps too
// high a label.
func TestIterateConnectedComponents(t *testing.T) {
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
		t.Run(fmt.Sprintf("%s/%d", mode.name, seed), func(t *testing.T) {
			const vertices, edges = 4000, 4000
			msgs, comp := randomGraph(seed, vertices, edges)
			rnd := rand.New(rand.NewPCG(seed, 13))
			var failAt []int64
			at := int64(0)
			for range 1 + rnd.IntN(3) {
				at += 1 + rnd.Int64N(int64(2*len(msgs)))
				failAt = append(failAt, at)
			}
			dir := t.TempDir()
			var failures, seen atomic.Int64
			ck := mode.ck
			ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
			job := ringflow.NewJob(ringflow.Config{Logger: quietLogger(), Parallelism: 2, Workers: 2, BatchSize: 64,
				RingCapacity: 16 << 10, FrameBytes: 1 << 10, Checkpoint: ck,
				Restart: ringflow.RestartStrategy{Attempts: len(failAt)}})
			src := ringflow.Source(job, "edges", ringflow.FromSlice(msgs))
			labels := ringflow.Iterate(src, "propagate", func(in ringflow.Stream[ccMsg]) (ringflow.Stream[ccMsg], ringflow.Stream[ccMsg]) {
				fail := failing[ccMsg](job, failAt, &failures, &seen)
				in = ringflow.Map(in, "failing", func(m ccMsg) ccMsg { spin(time.Microsecond); return fail(m) })
				steps := ringflow.Process(ringflow.KeyBy(in, func(m ccMsg) uint64 { return m.V }), "relax",
					func() ringflow.ProcessFunc[uint64, ccMsg, ccMsg] { return &relax{} })
				back := ringflow.Filter(steps, "offers", func(m ccMsg) bool { return m.Kind == ccOffer })
				out := ringflow.Filter(steps, "labels", func(m ccMsg) bool { return m.Kind == ccLabel })
				return back, out
			})
			ringflow.TxnSink(ringflow.Map(labels, "fmt", func(m ccMsg) string { return fmt.Sprintf("%d %d", m.V, m.W) }),
				"out", ringflow.FileSink(filepath.Join(dir, "out")))
			run(t, job)
			got := map[uint64]uint64{}
			for _, line := range readParts(t, filepath.Join(dir, "out")) {
				var v, l uint64
				if _, err := fmt.Sscanf(line, "%d %d", &v, &l); err != nil {
					t.Fatalf("output line %q: %v", line, err)
				}
				if old, ok := got[v]; !ok || l < old {
					got[v] = l
				}
			}
			wrong := 0
			for v, c := range comp {
				if got[v] != c {
					if wrong < 5 {
						t.Errorf("vertex %d: label %d, want component %d", v, got[v], c)
					}
					wrong++
				}
			}
			if wrong > 0 || len(got) != len(comp) {
				t.Fatalf("%d of %d vertices wrong; %d labelled", wrong, len(comp), len(got))
			}
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

// TestIterateEnds runs a bounded loop without failures: the job ends on
// its own, after a final checkpoint that found the loop quiescent, with
// every record out after its last round. Final checkpoints taken while
// records still went round are kept as ordinary ones.
func TestIterateEnds(t *testing.T) {
	dir := t.TempDir()
	var failures, seen, finals atomic.Int64
	events := &ringflow.EventListener{CheckpointTriggered: func(info ringflow.CheckpointTriggeredInfo) {
		if info.Final {
			finals.Add(1)
		}
	}}
	job := hopJob(dir, 5000, checkpointModes[0], nil, &failures, &seen, true, func(c *ringflow.Config) { c.Events = events })
	run(t, job)
	want := make([]string, 5000)
	for i := range want {
		want[i] = fmt.Sprintf("%d %d", i, hopRounds)
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
	cps := job.Checkpoints()
	if len(cps) == 0 || !cps[len(cps)-1].Final {
		t.Fatalf("the last of %d checkpoints is not final", len(cps))
	}
	last := cps[len(cps)-1]
	for _, st := range last.Subtasks {
		if st.LoopRecords != 0 {
			t.Fatalf("final checkpoint %d: %s#%d logged %d records in transit", last.ID, st.Operator, st.Subtask, st.LoopRecords)
		}
	}
	for _, cp := range cps[:len(cps)-1] {
		if cp.Final {
			t.Fatalf("checkpoint %d is final, but checkpoint %d follows", cp.ID, last.ID)
		}
	}
	if got := seen.Load(); got != 5000*hopRounds {
		t.Fatalf("the loop's body saw %d records, want %d", got, 5000*hopRounds)
	}
	t.Logf("%d checkpoints, %d of them triggered as final", len(cps), finals.Load())
}

// TestIterateGraph checks how an iteration shows in the job's graph, and
// the errors of iterations that cannot run.
func TestIterateGraph(t *testing.T) {
	build := func(cfg ringflow.Config) *ringflow.Job {
		cfg.Logger = quietLogger()
		job := ringflow.NewJob(cfg)
		src := ringflow.Source(job, "src", ringflow.FromSlice([]int{1, 2, 3}))
		out := ringflow.Iterate(src, "loop", func(in ringflow.Stream[int]) (ringflow.Stream[int], ringflow.Stream[int]) {
			next := ringflow.Map(in, "inc", func(x int) int { return x + 1 })
			return ringflow.Filter(next, "again", func(x int) bool { return x < 10 }),
				ringflow.Filter(next, "done", func(x int) bool { return x >= 10 })
		})
		ringflow.Sink(out, "sink", func(context.Context, int) error { return nil })
		return job
	}
	dir := t.TempDir()
	g := build(ringflow.Config{Checkpoint: checkpointed(dir, time.Millisecond)}).Graph()
	var back []ringflow.GraphEdge
	for _, e := range g.Edges {
		if e.Back {
			back = append(back, e)
		}
		if e.To == "loop" && e.Chained {
			t.Errorf("edge %s -> loop is chained: a loop's head must start its task", e.From)
		}
	}
	if len(back) != 1 || back[0].From != "loop.back" || back[0].To != "loop" || back[0].Partitioning != "back" {
		t.Fatalf("back edges %+v, want one from loop.back to loop", back)
	}

	err := build(ringflow.Config{}).Run(context.Background())
	var ce *ringflow.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Checkpoint.Interval" || !strings.Contains(err.Error(), `iteration "loop"`) {
		t.Fatalf("without checkpoints: %v, want a ConfigError on Checkpoint.Interval naming the iteration", err)
	}
	cfg := ringflow.Config{Checkpoint: checkpointed(t.TempDir(), time.Millisecond)}
	cfg.Checkpoint.Mode = ringflow.AtLeastOnce
	err = build(cfg).Run(context.Background())
	if !errors.As(err, &ce) || ce.Field != "Checkpoint.Mode" {
		t.Fatalf("at least once: %v, want a ConfigError on Checkpoint.Mode", err)
	}

	job := ringflow.NewJob(ringflow.Config{Logger: quietLogger(), Checkpoint: checkpointed(t.TempDir(), time.Millisecond)})
	src := ringflow.Source(job, "src", ringflow.FromSlice([]int{1}))
	out := ringflow.Iterate(src, "loop", func(in ringflow.Stream[int]) (ringflow.Stream[int], ringflow.Stream[int]) {
		return ringflow.Stream[int]{}, in
	})
	ringflow.Sink(out, "sink", func(context.Context, int) error { return nil })
	err = job.Run(context.Background())
	if !errors.Is(err, ringflow.ErrBadArgument) || !strings.Contains(err.Error(), "no stream to feed back") {
		t.Fatalf("no back stream: %v, want ErrBadArgument saying so", err)
	}
}

const loopKillRecords = 100_000

// killLoopJob is the job TestKillLoopAndResume runs in a child process:
// the counting loop over a paced source, checkpointed every 10 ms.
func killLoopJob(dir, mode string) *ringflow.Job {
	var m checkpointMode
	for _, cm := range checkpointModes {
		if cm.name == mode {
			m = cm
		}
	}
	var failures, seen atomic.Int64
	job := hopJobPaced(dir, loopKillRecords, 100_000, m, nil, &failures, &seen, true)
	return job
}

// TestKillLoopAndResume runs the counting loop in a child process, kills
// it with SIGKILL at random moments several times, then lets it run to the
// end: every record must have left the loop exactly once, counted
// hopRounds times.
func TestKillLoopAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	seed := seeds.Seed(t)
	for i, m := range checkpointModes[:3] {
		t.Run(m.name, func(t *testing.T) {
			dir := killAndResumeChild(t, "loop/"+m.name, seed+uint64(i))
			want := make([]string, loopKillRecords)
			for i := range want {
				want[i] = fmt.Sprintf("%d %d", i, hopRounds)
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
		})
	}
}

// TestIterateSavepointRescale stops the counting loop with a savepoint
// while records go round, and resumes it from the savepoint at another
// parallelism: the heads' logs are shared out among the new heads, and
// every record still leaves exactly once, counted hopRounds times. With
// -loop.noreplay it fails.
func TestIterateSavepointRescale(t *testing.T) {
	ringflow.LoopReplayOff()
	const n = 60_000
	for _, mode := range checkpointModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			spDir := filepath.Join(dir, "savepoints")
			var failures, seen atomic.Int64
			job := hopJobPaced(dir, n, 60_000, mode, nil, &failures, &seen, true,
				func(c *ringflow.Config) { c.Checkpoint.SavepointDir = spDir })
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- job.Run(ctx) }()
			time.Sleep(300 * time.Millisecond)
			sp, err := job.StopWithSavepoint(ctx)
			if err != nil {
				t.Fatalf("StopWithSavepoint: %v", err)
			}
			if err := <-ran; err != nil {
				t.Fatalf("Run after StopWithSavepoint: %v", err)
			}
			stopped := seen.Load()
			resumed := hopJobPaced(dir, n, 0, mode, nil, &failures, &seen, true, func(c *ringflow.Config) {
				c.Parallelism = 3
				c.RestoreFrom = sp
				c.Checkpoint.StateDir = filepath.Join(dir, "state2")
			})
			run(t, resumed)
			want := make([]string, n)
			for i := range want {
				want[i] = fmt.Sprintf("%d %d", i, hopRounds)
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
			if stopped == 0 || stopped >= n*hopRounds {
				t.Fatalf("the loop handled %d records before the savepoint: it should stop part-way", stopped)
			}
			t.Logf("stopped after %d of %d records went round; savepoint %s", stopped, n*hopRounds, sp)
		})
	}
}
