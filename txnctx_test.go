package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// ctxCall is one call of a ctxSink that took a context: which, the context,
// and whether it was done when the call began.
type ctxCall struct {
	what string
	ctx  context.Context
	done bool
}

// ctxSink is a transactional sink that records the context of every call
// that takes one. blockCommit makes Commit wait for its context to be done
// (saying so on entered) and fail with its error; failDone makes every
// call that takes a context fail if it is done, as a sink whose broker
// calls honour their context would.
type ctxSink struct {
	mu          *sync.Mutex
	calls       *[]ctxCall
	blockCommit bool
	failDone    bool
	entered     chan<- struct{}
	txn         int
}

func (s *ctxSink) note(what string, ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := ctx != nil && ctx.Err() != nil
	*s.calls = append(*s.calls, ctxCall{what, ctx, done})
	if done && s.failDone {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	return nil
}

func (s *ctxSink) Open(ctx context.Context, _, _ int) error      { return s.note("Open", ctx) }
func (s *ctxSink) Recover(ctx context.Context, _ [][]byte) error { return s.note("Recover", ctx) }
func (s *ctxSink) Write(uint64) error                            { return nil }
func (s *ctxSink) Close() error                                  { return nil }

func (s *ctxSink) PreCommit() ([]byte, func(context.Context) error, error) {
	s.txn++
	return []byte{byte(s.txn)}, func(ctx context.Context) error { return s.note("durable", ctx) }, nil
}

func (s *ctxSink) Commit(ctx context.Context, _ []byte) error {
	if err := s.note("Commit", ctx); err != nil || !s.blockCommit {
		return err
	}
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return fmt.Errorf("commit: %w", ctx.Err())
}

// ctxSinkJob is a job of a generator of count records (0: without end)
// into a ctxSink, with checkpoints every few milliseconds.
func ctxSinkJob(t *testing.T, cfg ringflow.Config, count uint64, sink ctxSink) (*ringflow.Job, func() []ctxCall) {
	var mu sync.Mutex
	var calls []ctxCall
	sink.mu, sink.calls = &mu, &calls
	cfg.Workers, cfg.Parallelism = 2, 2
	cfg.Checkpoint = checkpointed(t.TempDir(), 2*time.Millisecond)
	cfg.Checkpoint.Timeout = time.Minute
	job := ringflow.NewJob(cfg)
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: count, Rate: 200_000}))
	ringflow.TxnSink(src, "out", func() ringflow.TwoPhaseSink[uint64] { s := sink; return &s })
	return job, func() []ctxCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]ctxCall(nil), calls...)
	}
}

// TestTxnSinkContext checks that a two-phase sink's Open, Recover, Commit
// and durable function get a context that is live while the job runs and
// done once Run has returned.
func TestTxnSinkContext(t *testing.T) {
	job, calls := ctxSinkJob(t, ringflow.Config{}, 20_000, ctxSink{})
	run(t, job)
	count := map[string]int{}
	for _, c := range calls() {
		count[c.what]++
		switch {
		case c.ctx == nil:
			t.Fatalf("%s got a nil context", c.what)
		case c.done:
			t.Fatalf("%s got a context done while the job ran: %v", c.what, c.ctx.Err())
		case c.ctx.Err() == nil:
			t.Fatalf("the context %s got is not done after Run returned", c.what)
		}
	}
	for _, what := range []string{"Open", "Recover", "durable", "Commit"} {
		if count[what] == 0 {
			t.Fatalf("calls %v: none of %s", count, what)
		}
	}
}

// TestTxnSinkCommitBlocked checks that a Commit blocked on its context
// returns when Run's context is cancelled, and Run with it.
func TestTxnSinkCommitBlocked(t *testing.T) {
	entered := make(chan struct{}, 1)
	job, calls := ctxSinkJob(t, ringflow.Config{}, 0, ctxSink{blockCommit: true, entered: entered})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("Run returned %v before a Commit", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v; want context.Canceled", err)
		}
	case <-time.After(time.Minute): // NB: a deadlock guard, not a measurement
		t.Fatalf("Run did not return with a Commit blocked on its context; calls %d", len(calls()))
	}
}

// TestTxnSinkStopOnCancel checks that with StopOnCancel the stop
// checkpoint's commits get a live context: a sink whose calls fail once
// their context is done commits the stop checkpoint, and Run returns only
// context.Canceled.
func TestTxnSinkStopOnCancel(t *testing.T) {
	job, calls := ctxSinkJob(t, ringflow.Config{StopOnCancel: true}, 0, ctxSink{failDone: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := started(t, ctx, job, 2)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v; want context.Canceled", err)
	}
	cps := job.Checkpoints()
	if last := cps[len(cps)-1]; last.Status != "completed" || !last.Stop {
		t.Fatalf("last checkpoint %d: %s, stop %v; want a completed stop checkpoint", last.ID, last.Status, last.Stop)
	}
	for _, c := range calls() {
		if c.done {
			t.Fatalf("%s got a done context while the job stopped", c.what)
		}
	}
}

// TestTaskInfo checks that the contexts a two-phase sink is given name its
// job, run, operator and subtask: a connector names what it leaves in an
// external system from them.
func TestTaskInfo(t *testing.T) {
	job, calls := ctxSinkJob(t, ringflow.Config{}, 5_000, ctxSink{})
	run(t, job)
	seen := map[ringflow.TaskInfo]bool{}
	for _, c := range calls() {
		ti, ok := ringflow.TaskInfoFrom(c.ctx)
		if !ok {
			t.Fatalf("%s's context carries no TaskInfo", c.what)
		}
		seen[ti] = true
	}
	if len(seen) != 2 {
		t.Fatalf("task infos %v, want one for each of 2 subtasks", seen)
	}
	var jobID string
	for ti := range seen {
		if ti.Operator != "out" || ti.Parallelism != 2 || ti.Subtask < 0 || ti.Subtask > 1 || ti.Job == "" || !ti.Checkpoints {
			t.Fatalf("task info %+v: want operator out, subtask 0 or 1 of 2, a job and checkpoints", ti)
		}
		if jobID != "" && ti.Job != jobID {
			t.Fatalf("subtasks name jobs %s and %s", jobID, ti.Job)
		}
		jobID = ti.Job
	}
	if _, ok := ringflow.TaskInfoFrom(context.Background()); ok {
		t.Fatal("a plain context carries a TaskInfo")
	}
}
