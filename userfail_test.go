package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

var errRefused = errors.New("refused")

// refuser is a process function that returns errRefused for the record
// whose Seq is refuse (in Process), or from the timer of that record's key
// (in OnTimer, if onTimer); while failures says so (nil: always).
type refuser struct {
	refuse  uint64
	onTimer bool
	failing func() bool
	count   *ringflow.ValueState[uint64, int64]
}

func (p *refuser) Open(s *ringflow.KeyedScope[uint64]) error {
	p.count = ringflow.NewValueState[uint64, int64](s, "count")
	return nil
}

func (p *refuser) fails() bool { return p.failing == nil || p.failing() }

func (p *refuser) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	if ctx.Context().Err() != nil {
		return errors.New("the attempt's context is done while the attempt runs")
	}
	if e.Seq == p.refuse {
		if p.onTimer {
			ctx.RegisterEventTimer(ringflow.MaxWatermark - 1)
		} else if p.fails() {
			return fmt.Errorf("record %d: %w", e.Seq, errRefused)
		}
	}
	n, _ := p.count.Value()
	p.count.Update(n + 1)
	out.Emit(fmt.Sprintf("%d:%d", e.Key, e.Seq))
	return nil
}

func (p *refuser) OnTimer(ctx *ringflow.KeyedContext[uint64], ts int64, d ringflow.TimeDomain, out *ringflow.Collector[string]) error {
	if d != ringflow.EventTime {
		return fmt.Errorf("timer of domain %v", d)
	}
	if p.fails() {
		return fmt.Errorf("key %d: %w", ctx.Key(), errRefused)
	}
	return nil
}

// TestProcessErrorFailsTask checks that an error a process function returns,
// from Process or from OnTimer, fails the job with an *OperatorError that
// names the operator and the subtask and wraps the error.
func TestProcessErrorFailsTask(t *testing.T) {
	for _, onTimer := range []bool{false, true} {
		t.Run(fmt.Sprintf("onTimer=%v", onTimer), func(t *testing.T) {
			evs := makeEvents(seeds.Seed(t), 5000, 20, 0)
			job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2})
			s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
			key := func(e event) uint64 { return e.Key }
			p := ringflow.Process(ringflow.KeyBy(s, key), "refuse",
				func() ringflow.ProcessFunc[uint64, event, string] { return &refuser{refuse: 1234, onTimer: onTimer} })
			ringflow.Sink(p, "sink", func(context.Context, string) error { return nil })
			err := job.Run(context.Background())
			var oe *ringflow.OperatorError
			if !errors.As(err, &oe) || oe.Operator != "refuse" || !errors.Is(err, errRefused) {
				t.Fatalf("Run returned %v; want an *ringflow.OperatorError of refuse wrapping errRefused", err)
			}
			if want := ringflow.KeyBy(s, key); oe.Subtask < 0 || oe.Subtask > 1 {
				t.Fatalf("subtask %d of %v", oe.Subtask, want)
			}
			t.Log(err)
		})
	}
}

// subtaskFailer is a source of 1000 records per subtask whose subtask fail
// fails after 100 of them: it returns errRefused, or panics with it.
type subtaskFailer struct {
	fail, sub int
	panics    bool
	n         uint64
}

func (s *subtaskFailer) Open(subtask, _ int, _ []byte) error { s.sub = subtask; return nil }

func (s *subtaskFailer) Read(buf []uint64) (int, error) {
	switch {
	case s.sub == s.fail && s.n == 100 && s.panics:
		panic(fmt.Errorf("subtask %d: %w", s.sub, errRefused))
	case s.sub == s.fail && s.n == 100:
		return 0, fmt.Errorf("subtask %d: %w", s.sub, errRefused)
	case s.n == 1000:
		return 0, io.EOF
	}
	buf[0] = s.n
	s.n++
	return 1, nil
}

func (s *subtaskFailer) Position() []byte { return nil }
func (s *subtaskFailer) Close() error     { return nil }

// TestOperatorErrorNamesSubtask checks that a failing user function fails
// Run with an *OperatorError, found with errors.As, that names the
// operator and the subtask that failed and wraps the function's error; a
// panic's carries its stack and wraps ErrPanic too.
func TestOperatorErrorNamesSubtask(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			job := ringflow.NewJob(ringflow.Config{Parallelism: 3, Workers: 2})
			src := ringflow.Source(job, "flaky", func() ringflow.SourceFunc[uint64] {
				return &subtaskFailer{fail: 2, panics: panics}
			})
			ringflow.Sink(src, "sink", func(context.Context, uint64) error { return nil })
			err := job.Run(context.Background())
			var oe *ringflow.OperatorError
			if !errors.As(err, &oe) {
				t.Fatalf("Run returned %v (%T); want an *ringflow.OperatorError", err, err)
			}
			if oe.Operator != "flaky" || oe.Subtask != 2 || !errors.Is(oe.Err, errRefused) || !errors.Is(err, errRefused) {
				t.Fatalf("OperatorError{Operator: %q, Subtask: %d, Err: %v}; want flaky, subtask 2, wrapping errRefused",
					oe.Operator, oe.Subtask, oe.Err)
			}
			if want := `ringflow: operator "flaky" subtask 2: `; !strings.HasPrefix(oe.Error(), want) {
				t.Errorf("message %q; want it to start with %q", oe.Error(), want)
			}
			if got := errors.Is(err, ringflow.ErrPanic); got != panics {
				t.Errorf("errors.Is(err, ErrPanic) = %v; want %v", got, panics)
			}
			if hasStack := strings.Contains(string(oe.Stack), "userfail_test.go"); hasStack != panics {
				t.Errorf("Stack holds the failing function: %v; want %v (a panic's stack only)", hasStack, panics)
			}
		})
	}
}

// TestProcessErrorRestarts checks that an error a process function returns
// goes through the restart strategy: the job restores its checkpoint and
// finishes, with its committed output exactly once.
func TestProcessErrorRestarts(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	var attempts atomic.Int64
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, Logger: newLogRecorder().logger(),
		Checkpoint: checkpointed(dir, 2*time.Millisecond), Restart: ringflow.RestartStrategy{Attempts: 1}})
	s := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event { return event{Seq: i, Key: i % 10} },
		ringflow.GenOptions{Count: n}))
	p := ringflow.Process(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "refuse",
		func() ringflow.ProcessFunc[uint64, event, string] {
			// NB: made per subtask and attempt: only the first attempt fails.
			first := job.Restarts() == 0
			attempts.Add(1)
			return &refuser{refuse: n / 2, failing: func() bool { return first }}
		})
	ringflow.TxnSink(p, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	run(t, job)
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1", job.Restarts())
	}
	var want []string
	for i := range uint64(n) {
		want = append(want, fmt.Sprintf("%d:%d", i%10, i))
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
}

// blockingSink blocks on every record until its context is done, and
// returns the context's error; started counts the records it began.
func blockingSink(started *atomic.Int64) func(context.Context, event) error {
	return func(ctx context.Context, _ event) error {
		started.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
}

// TestSinkContextDoneOnFailure checks that a sink blocked on its context
// returns when another task fails, so that the failure ends the job, and
// when Run's context is cancelled.
func TestSinkContextDoneOnFailure(t *testing.T) {
	t.Run("failure", func(t *testing.T) {
		before := runtime.NumGoroutine()
		// NB: a task that blocks holds up its worker's other tasks (and
		// those of a worker that steps them): three workers, one per
		// chain, none resting (worker 0 would step its tasks) or stepping
		// another's.
		job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 3, NoPin: true, NoRest: true, NoSteal: true})
		gen := ringflow.Generate(func(i uint64) event { return event{Seq: i, Key: i % 10} }, ringflow.GenOptions{})
		var started atomic.Int64
		ringflow.Sink(ringflow.Source(job, "src", gen), "blocked", blockingSink(&started))
		s := ringflow.Source(job, "src2", gen)
		p := ringflow.Process(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "refuse",
			func() ringflow.ProcessFunc[uint64, event, string] { return &refuser{refuse: 10_000} })
		ringflow.Sink(p, "sink", func(context.Context, string) error { return nil })
		if g := job.Graph(); len(g.Operators) != 5 || g.Operators[4].Task != "refuse" {
			t.Fatalf("graph %+v: want three tasks", g.Operators)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := job.Run(ctx)
		if !errors.Is(err, errRefused) || started.Load() == 0 {
			t.Fatalf("Run returned %v (the sink began %d records); want refuse's error", err, started.Load())
		}
		waitGoroutines(t, before)
	})
	t.Run("cancel", func(t *testing.T) {
		job := ringflow.NewJob(ringflow.Config{Workers: 1})
		s := ringflow.Source(job, "src", ringflow.FromSlice([]event{{}, {}}))
		var started atomic.Int64
		ringflow.Sink(s, "blocked", blockingSink(&started))
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for started.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		if err := job.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	})
}

// failingReader fails its Next at record n, or blocks until its context is
// done.
type failingReader struct {
	next, n uint64
	block   bool
}

func (r *failingReader) Next(ctx context.Context) (uint64, []byte, error) {
	if r.next == r.n {
		if r.block {
			<-ctx.Done()
			return 0, nil, ctx.Err()
		}
		return 0, nil, errRefused
	}
	r.next++
	return r.next, nil, nil
}

func (r *failingReader) Close() error { return nil }

// TestBlockingReaderFails checks that an error of a blocking reader fails
// the task naming the source, and that a reader blocked on its context
// returns when the job ends.
func TestBlockingReaderFails(t *testing.T) {
	for _, block := range []bool{false, true} {
		t.Run(fmt.Sprintf("block=%v", block), func(t *testing.T) {
			before := runtime.NumGoroutine()
			job := ringflow.NewJob(ringflow.Config{Workers: 1})
			src := ringflow.Source(job, "reader", ringflow.FromBlocking(
				func(sub, par int, pos []byte) (ringflow.BlockingReader[uint64], error) {
					return &failingReader{n: 100, block: block}, nil
				}, 8))
			var got atomic.Int64
			ringflow.Sink(src, "sink", func(_ context.Context, v uint64) error {
				if got.Add(1) == 100 && block {
					return io.ErrUnexpectedEOF // ends the job while the reader blocks
				}
				return nil
			})
			err := job.Run(context.Background())
			var oe *ringflow.OperatorError
			want, op := errRefused, "reader"
			if block {
				want, op = io.ErrUnexpectedEOF, "sink"
			}
			if !errors.As(err, &oe) || oe.Operator != op || !errors.Is(err, want) || !strings.Contains(err.Error(), op) {
				t.Fatalf("Run returned %v; want %s's failure with %v", err, op, want)
			}
			waitGoroutines(t, before)
		})
	}
}
