package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

var (
	oddTag = ringflow.NewOutputTag[event]("odd")
	bigTag = ringflow.NewOutputTag[int64]("big")
)

// splitter emits each record's key and sequence number to its main output
// when its value is even, and the record itself to the side output "odd"
// when it is odd; values over 800 go to the side output "big" too.
type splitter struct{}

func (splitter) Open(*ringflow.KeyedScope[uint64]) error { return nil }

func (splitter) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	if e.Value%2 == 0 {
		out.Emit(fmt.Sprintf("%d:%d", e.Key, e.Seq))
	} else {
		oddTag.Emit(ctx, e)
	}
	if e.Value > 800 {
		bigTag.Emit(ctx, e.Value)
	}
	return nil
}

func (splitter) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[string]) error {
	return nil
}

// stamp is a process function that emits each record with the timestamp
// it carries.
type stamp[T any] struct{}

func (stamp[T]) Open(*ringflow.KeyedScope[uint64]) error { return nil }

func (stamp[T]) Process(ctx *ringflow.KeyedContext[uint64], v T, out *ringflow.Collector[string]) error {
	out.Emit(fmt.Sprintf("%v@%d", v, ctx.Timestamp()))
	return nil
}

func (stamp[T]) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[string]) error {
	return nil
}

// TestSideOutputs splits a stream with a process function into its main
// output and two side outputs of other types, one of them read twice, in
// every shape: each gets exactly its records, with their timestamps.
func TestSideOutputs(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 20_000, 50, 20)
	var wantMain, wantOdd, wantBig []string
	for _, e := range evs {
		if e.Value%2 == 0 {
			wantMain = append(wantMain, fmt.Sprintf("%d:%d", e.Key, e.Seq))
		} else {
			wantOdd = append(wantOdd, fmt.Sprintf("%d@%d", e.Seq, e.TS))
		}
		if e.Value > 800 {
			wantBig = append(wantBig, fmt.Sprintf("%d@%d", e.Value, e.TS))
		}
	}
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
		split := ringflow.Process(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "split",
			func() ringflow.ProcessFunc[uint64, event, string] { return splitter{} })
		var main, odd, big, big2 collect
		ringflow.Sink(split, "main", sinkTo(&main, func(s string) string { return s }))
		odds := ringflow.Map(ringflow.SideOutput(split, oddTag), "seq", func(e event) uint64 { return e.Seq })
		ringflow.Sink(ringflow.Process(ringflow.KeyBy(odds, func(s uint64) uint64 { return s % 7 }), "odd-stamp",
			func() ringflow.ProcessFunc[uint64, uint64, string] { return stamp[uint64]{} }), "odd",
			sinkTo(&odd, func(s string) string { return s }))
		bigs := ringflow.SideOutput(split, bigTag)
		ringflow.Sink(ringflow.Process(ringflow.KeyBy(bigs, func(v int64) uint64 { return uint64(v) }), "big-stamp",
			func() ringflow.ProcessFunc[uint64, int64, string] { return stamp[int64]{} }), "big",
			sinkTo(&big, func(s string) string { return s }))
		ringflow.Sink(ringflow.SideOutput(split, bigTag), "big2", sinkTo(&big2, func(v int64) string { return fmt.Sprint(v) }),
			ringflow.Parallelism(1))
		run(t, job)
		diffRows(t, main.sorted(), sortedCopy(wantMain))
		diffRows(t, odd.sorted(), sortedCopy(wantOdd))
		diffRows(t, big.sorted(), sortedCopy(wantBig))
		if got := len(big2.sorted()); got != len(wantBig) {
			t.Fatalf("the second reader of big got %d records, want %d", got, len(wantBig))
		}
		sides := map[string]string{}
		for _, e := range job.Graph().Edges {
			if e.From == "split" {
				sides[e.To] = e.Side
				if e.Chained {
					t.Errorf("edge %+v is chained: split has side outputs", e)
				}
			}
		}
		if want := map[string]string{"main": "", "seq": "odd", "big-stamp": "big", "big2": "big"}; fmt.Sprint(sides) != fmt.Sprint(want) {
			t.Fatalf("edges out of split by side output: %v, want %v", sides, want)
		}
	})
}

// TestLateOutput sends records far behind the watermark: they go to the
// window's late side output once each, with their timestamps, are counted,
// and do not change the windows they missed.
func TestLateOutput(t *testing.T) {
	var evs []event
	var wantLate []string
	for i := range 1000 {
		evs = append(evs, event{Seq: uint64(i), Key: 1, Value: 1, TS: int64(i * 10)})
		if i%100 == 99 {
			e := event{Seq: uint64(100000 + i), Key: 1, Value: 1000, TS: int64(i*10 - 500)}
			evs = append(evs, e)
			wantLate = append(wantLate, fmt.Sprintf("%d@%d", e.Seq, e.TS))
		}
	}
	late := ringflow.NewOutputTag[event]("late")
	for i, w := range []ringflow.Windows{ringflow.TumblingWindows(100 * time.Millisecond),
		ringflow.SlidingWindows(200*time.Millisecond, 100*time.Millisecond)} {
		t.Run([]string{"tumbling", "sliding"}[i], func(t *testing.T) {
			job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 10})
			s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime(), ringflow.Parallelism(1))
			k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
			win := ringflow.Window(k, "win", w, valueSum{}, ringflow.LateOutput(late))
			var c, l collect
			ringflow.Sink(win, "sink", sinkTo(&c, func(r ringflow.WindowResult[uint64, int64]) string {
				return fmt.Sprintf("[%d,%d) %d", r.Start, r.End, r.Value)
			}))
			seqs := ringflow.Map(ringflow.SideOutput(win, late), "seq", func(e event) uint64 { return e.Seq })
			ringflow.Sink(ringflow.Process(ringflow.KeyBy(seqs, func(s uint64) uint64 { return s }), "stamp",
				func() ringflow.ProcessFunc[uint64, uint64, string] { return stamp[uint64]{} }), "late",
				sinkTo(&l, func(s string) string { return s }))
			run(t, job)
			diffRows(t, l.sorted(), sortedCopy(wantLate))
			if n := operatorMetrics(t, job, "win").LateDropped; n != 10 {
				t.Fatalf("late: counted %d, want 10", n)
			}
			for _, row := range c.sorted() {
				if !strings.HasSuffix(row, " 10") && !strings.HasSuffix(row, " 20") {
					t.Fatalf("window %s: a late record changed it", row)
				}
			}
		})
	}
}

// TestSideOutputErrors checks the mistakes Run refuses: a side output of
// an operator that has none, a name read as two types, a window asked for
// a side output it does not have or given a tag of the wrong type, and an
// empty name; and that a type mismatch between the tag a function emits
// to and the one the job reads fails the job, naming the operator.
func TestSideOutputErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(job *ringflow.Job)
		want  string
	}{
		{"map", func(job *ringflow.Job) {
			m := ringflow.Map(ringflow.Source(job, "src", ringflow.FromSlice([]event{{}})), "m", func(e event) event { return e })
			ringflow.Sink(m, "sink", func(context.Context, event) error { return nil })
			ringflow.Sink(ringflow.SideOutput(m, oddTag), "odd", func(context.Context, event) error { return nil })
		}, `operator "m" has no side outputs`},
		{"two types", func(job *ringflow.Job) {
			p := splitJob(job)
			ringflow.Sink(ringflow.SideOutput(p, oddTag), "odd", func(context.Context, event) error { return nil })
			ringflow.Sink(ringflow.SideOutput(p, ringflow.NewOutputTag[string]("odd")), "odd2",
				func(context.Context, string) error { return nil })
		}, `read as ringflow_test.event already, not string`},
		{"empty name", func(job *ringflow.Job) {
			p := splitJob(job)
			ringflow.Sink(ringflow.SideOutput(p, ringflow.NewOutputTag[string]("")), "odd",
				func(context.Context, string) error { return nil })
		}, `bad side output name ""`},
		{"window without", func(job *ringflow.Job) {
			w := windowOf(job)
			ringflow.Sink(ringflow.SideOutput(w, oddTag), "odd", func(context.Context, event) error { return nil })
		}, `operator "win" has no side outputs`},
		{"window other name", func(job *ringflow.Job) {
			w := windowOf(job, ringflow.LateOutput(ringflow.NewOutputTag[event]("late")))
			ringflow.Sink(ringflow.SideOutput(w, oddTag), "odd", func(context.Context, event) error { return nil })
		}, `operator "win" has no side output of that name (it has "late")`},
		{"main nowhere", func(job *ringflow.Job) {
			p := splitJob(job, true)
			ringflow.Sink(ringflow.SideOutput(p, oddTag), "odd", func(context.Context, event) error { return nil })
		}, `operator "split": its output goes nowhere`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := ringflow.NewJob(ringflow.Config{Workers: 1})
			tc.build(job)
			err := job.Run(context.Background())
			if !errors.Is(err, ringflow.ErrGraph) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run returned %v; want ErrGraph with %q", err, tc.want)
			}
		})
	}

	t.Run("late tag type", func(t *testing.T) {
		job := ringflow.NewJob(ringflow.Config{Workers: 1})
		windowOf(job, ringflow.LateOutput(ringflow.NewOutputTag[string]("late")))
		errs := ringflow.ConfigErrors(job.Run(context.Background()))
		if len(errs) != 1 || errs[0].Operator != "win" || errs[0].Field != "LateOutput" ||
			!strings.Contains(errs[0].Problem, "OutputTag[ringflow_test.event]") {
			t.Fatalf("config errors %v; want one for win's LateOutput", errs)
		}
	})

	t.Run("emit type", func(t *testing.T) {
		job := ringflow.NewJob(ringflow.Config{Workers: 1})
		p := splitJob(job)
		// splitter emits int64 to "big"; the job reads it as strings.
		ringflow.Sink(ringflow.SideOutput(p, ringflow.NewOutputTag[string]("big")), "big",
			func(context.Context, string) error { return nil })
		err := job.Run(context.Background())
		var oe *ringflow.OperatorError
		if !errors.As(err, &oe) || oe.Operator != "split" ||
			!strings.Contains(err.Error(), `side output "big": emitted a int64, but the job reads it as string`) {
			t.Fatalf("Run returned %v; want split's failure to emit an int64 as a string", err)
		}
	})
}

// splitJob adds a source of events with large odd values and the splitter
// to job, with a sink on its main output unless noMain.
func splitJob(job *ringflow.Job, noMain ...bool) ringflow.Stream[string] {
	s := ringflow.Source(job, "src", ringflow.FromSlice([]event{{Value: 901}, {Value: 2}}))
	p := ringflow.Process(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "split",
		func() ringflow.ProcessFunc[uint64, event, string] { return splitter{} })
	if len(noMain) == 0 {
		ringflow.Sink(p, "main", func(context.Context, string) error { return nil })
	}
	return p
}

// windowOf adds a source and a window, with a sink, to job.
func windowOf(job *ringflow.Job, opts ...ringflow.WindowOption) ringflow.Stream[ringflow.WindowResult[uint64, int64]] {
	s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice([]event{{}}), eventTime())
	w := ringflow.Window(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "win",
		ringflow.TumblingWindows(time.Second), valueSum{}, opts...)
	ringflow.Sink(w, "sink", func(context.Context, ringflow.WindowResult[uint64, int64]) error { return nil })
	return w
}

// sideCheck is seqCheck that also sends every third record to a side
// output.
type sideCheck struct{ seqCheck }

var thirdTag = ringflow.NewOutputTag[event]("third")

func (p *sideCheck) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	if e.Seq%3 == 0 {
		thirdTag.Emit(ctx, e)
	}
	return p.seqCheck.Process(ctx, e, out)
}

// TestSideOutputsWithFailures runs a keyed check with a side output through
// failures, in every checkpoint mode, with a slow reader of the side
// output so that its rings fill and unaligned checkpoints record the
// side output's in-flight records: the committed output of the main
// output and of the side output each hold every record exactly once.
func TestSideOutputsWithFailures(t *testing.T) {
	const keys, perKey = 32, 1500
	var wantMain, wantSide []string
	for i := range uint64(keys * perKey) {
		k, s := i%keys, i/keys
		wantMain = append(wantMain, fmt.Sprintf("%d:%d", k, s))
		if s%3 == 0 {
			wantSide = append(wantSide, fmt.Sprintf("third %d:%d", k, s))
		}
	}
	base := seeds.Seed(t)
	for i, mode := range checkpointModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			ck := mode.ck
			ck.Interval, ck.StateDir = 2*time.Millisecond, filepath.Join(dir, "state")
			job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, RingCapacity: 32 << 10,
				FrameBytes: 2 << 10, Debloat: mode.debloat, Checkpoint: ck, Restart: ringflow.RestartStrategy{Attempts: 2},
				Logger: newLogRecorder().logger()})
			src := ringflow.Source(job, "seq", ringflow.Generate(func(i uint64) event { return event{Key: i % keys, Seq: i / keys} },
				ringflow.GenOptions{Count: keys * perKey}))
			var failures, seen atomic.Int64
			at := int64(keys*perKey/4) + int64((base+uint64(i))%(keys*perKey/2))
			failing := ringflow.Map(src, "failing", failAfter(job, []int64{at, at + keys*perKey/4}, &failures, &seen))
			checked := ringflow.Process(ringflow.KeyBy(failing, func(e event) uint64 { return e.Key }), "check",
				func() ringflow.ProcessFunc[uint64, event, string] { return &sideCheck{} })
			ringflow.TxnSink(ringflow.Rebalance(checked), "out", ringflow.FileSink(filepath.Join(dir, "out")))
			thirds := ringflow.Map(ringflow.SideOutput(checked, thirdTag), "slow", func(e event) string {
				spin(2 * time.Microsecond)
				return fmt.Sprintf("third %d:%d", e.Key, e.Seq)
			})
			ringflow.TxnSink(thirds, "side-out", ringflow.FileSink(filepath.Join(dir, "side")))
			run(t, job)
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(wantMain))
			diffRows(t, readParts(t, filepath.Join(dir, "side")), sortedCopy(wantSide))
			if job.Restarts() != int(failures.Load()) || failures.Load() == 0 {
				t.Fatalf("%d restarts, %d failures injected", job.Restarts(), failures.Load())
			}
			var inflight uint64
			for _, cp := range job.Checkpoints() {
				for _, st := range cp.Subtasks {
					inflight += st.InflightBytes
				}
			}
			t.Logf("%d failures; %d checkpoints, %d in-flight bytes; restored from %d",
				failures.Load(), len(job.Checkpoints()), inflight, job.RestoredFrom())
		})
	}
}
