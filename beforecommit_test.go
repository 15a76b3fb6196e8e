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
}

func (s *durableSink) Open(context.Context, int, int) error    { return nil }
func (s *durableSink) Recover(context.Context, [][]byte) error { return nil }
func (s *durableSink) Write(uint64) error                      { return nil }
func (s *durableSink) Commit(context.Context, []byte) error    { return nil }
func (s *durableSink) Close() error                            { return nil }
func (s *durableSink) PreCommit() ([]byte, func(context.Context) error, error) {
	s.txn++
	return []byte{byte(s.txn)}, func(context.Context) error {
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
