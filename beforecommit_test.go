package ringflow

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// durableSink is a transactional sink whose transactions are numbers and
// whose durable step fails the n-th time it runs (counting from 1), and
// notes which thread ran it.
type durableSink struct {
	mu      *sync.Mutex
	failAt  int
	calls   *int
	threads map[int]bool
	txn     int
	// onDurable, if set, is called as each durable step begins.
	onDurable func()
}

func (s *durableSink) Open(context.Context, int, int) error    { return nil }
func (s *durableSink) Recover(context.Context, [][]byte) error { return nil }
func (s *durableSink) Write(uint64) error                      { return nil }
func (s *durableSink) Commit(context.Context, []byte) error    { return nil }
func (s *durableSink) Close() error                            { return nil }
func (s *durableSink) PreCommit() ([]byte, func(context.Context) error, error) {
	s.txn++
	return []byte{byte(s.txn)}, func(context.Context) error {
		if s.onDurable != nil {
			s.onDurable()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		*s.calls++
		s.threads[unix.Gettid()] = true
		if *s.calls == s.failAt {
			return errors.New("injected sync failure")
		}
		return nil
	}, nil
}

// TestBeforeCommit: a sink's durable step runs off the workers, on a
// thread of its own, and the checkpoint it belongs to fails when it does,
// naming why; the later checkpoints complete.
func TestBeforeCommit(t *testing.T) {
	var (
		mu      sync.Mutex
		calls   int
		threads = map[int]bool{}
		workers sync.Map // the workers' threads
	)
	job := NewJob(Config{Parallelism: 1, Workers: 1, Checkpoint: CheckpointConfig{Interval: 5 * time.Millisecond,
		StateDir: filepath.Join(t.TempDir(), "state"), TolerableFailures: 10}})
	src := Source(job, "gen", Generate(func(i uint64) uint64 { return i }, GenOptions{Count: 200_000}))
	seen := Map(src, "seen", func(v uint64) uint64 {
		workers.Store(unix.Gettid(), true)
		return v
	})
	TxnSink(seen, "out", func() TwoPhaseSink[uint64] {
		return &durableSink{mu: &mu, failAt: 2, calls: &calls, threads: threads}
	})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var failed, completed int
	for _, c := range job.Checkpoints() {
		switch {
		case c.Status == "completed":
			completed++
		case strings.Contains(c.Status, "make transaction durable: injected sync failure"):
			failed++
		default:
			t.Errorf("checkpoint %d: %s", c.ID, c.Status)
		}
	}
	if failed != 1 || completed < 2 {
		t.Errorf("%d checkpoints failed for the sink's sync, %d completed; want 1 and at least 2", failed, completed)
	}
	mu.Lock()
	defer mu.Unlock()
	for tid := range threads {
		if _, ok := workers.Load(tid); ok {
			t.Errorf("a durable step ran on worker thread %d", tid)
		}
	}
}

// TestSinkSyncStartsAtSnapshot: a transactional sink's durable step starts
// once its synchronous part has ended, without waiting for the write-out
// of the state before it in its chain. Here that write-out waits until
// some durable step has started; had the step waited for the write-out,
// neither would go on.
func TestSinkSyncStartsAtSnapshot(t *testing.T) {
	started := make(chan struct{})
	var startOnce, waitOnce sync.Once
	var waited bool
	testOnPutKeyGroup = func() {
		waitOnce.Do(func() {
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				waited = true // deadlocked: let the job go on and fail the test
			}
		})
	}
	defer func() { testOnPutKeyGroup = nil }()

	job := NewJob(Config{Parallelism: 1, Workers: 1, Checkpoint: CheckpointConfig{Interval: 5 * time.Millisecond,
		StateDir: filepath.Join(t.TempDir(), "state")}})
	src := Source(job, "gen", Generate(func(i uint64) uint64 { return i % 1000 }, GenOptions{Count: 200_000}))
	counts := MapWithState(KeyBy(src, func(k uint64) uint64 { return k }), "count", func(c *int64, k uint64) uint64 {
		*c++
		return k
	})
	var mu sync.Mutex
	calls := 0
	TxnSink(counts, "out", func() TwoPhaseSink[uint64] {
		return &durableSink{mu: &mu, calls: &calls, threads: map[int]bool{}, onDurable: func() {
			startOnce.Do(func() { close(started) })
		}}
	})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if waited {
		t.Fatal("the state's write-out waited 20s for the sink's durable step, which waited for the write-out")
	}
	if calls == 0 {
		t.Fatal("no durable step ran")
	}
}
