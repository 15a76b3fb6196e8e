package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// ledger is the external system of ledgerSinks: transactions pending and
// committed, by name, shared by every instance of every attempt and run.
type ledger struct {
	mu        sync.Mutex
	pending   map[string][]uint64
	committed map[string][]uint64
	order     []string // committed names, in the order of their commits
	written   int
	total     int
	// failFinal fails the first commit made once every record is written:
	// the commit of the final checkpoint.
	failFinal bool
	failed    bool
}

// ledgerSink is a two-phase sink of a ledger whose transactions are named
// after the task and a nonce of each Open.
type ledgerSink struct {
	l      *ledger
	prefix string
	nonce  string
	seq    int
	cur    []uint64
}

func (s *ledgerSink) Open(ctx context.Context, subtask, _ int) error {
	s.prefix = fmt.Sprintf("%d/", subtask)
	s.nonce = fmt.Sprintf("%p", s)
	return nil
}

func (s *ledgerSink) Recover(_ context.Context, txns [][]byte) error {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	keep := map[string]bool{}
	for _, t := range txns {
		keep[string(t)] = true
		s.l.commit(string(t))
	}
	for name := range s.l.pending {
		if strings.HasPrefix(name, s.prefix) && !keep[name] {
			delete(s.l.pending, name)
		}
	}
	return nil
}

func (s *ledgerSink) Write(rec uint64) error {
	s.cur = append(s.cur, rec)
	s.l.mu.Lock()
	s.l.written++
	s.l.mu.Unlock()
	return nil
}

func (s *ledgerSink) PreCommit() ([]byte, func(context.Context) error, error) {
	if len(s.cur) == 0 {
		return nil, nil, nil
	}
	s.seq++
	name := fmt.Sprintf("%s%s/%d", s.prefix, s.nonce, s.seq)
	s.l.mu.Lock()
	s.l.pending[name] = s.cur
	s.l.mu.Unlock()
	s.cur = nil
	return []byte(name), nil, nil
}

func (s *ledgerSink) Commit(_ context.Context, txn []byte) error {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.l.failFinal && !s.l.failed && s.l.written >= s.l.total {
		s.l.failed = true
		return errors.New("commit of the final checkpoint fails once")
	}
	s.l.commit(string(txn))
	return nil
}

// commit commits the pending transaction name, if there is one.
func (l *ledger) commit(name string) {
	if recs, ok := l.pending[name]; ok {
		l.committed[name] = recs
		l.order = append(l.order, name)
		delete(l.pending, name)
	}
}

func (s *ledgerSink) Close() error { return nil }

// TestFinalCheckpointCommitted checks that the transactions of a job's
// final checkpoint are committed even when their commit fails: the
// restart finds the job finished, commits them, and Run returns nil; and
// that a job whose process ended before committing them commits them when
// run again on its state directory (which then reports ErrFinished).
func TestFinalCheckpointCommitted(t *testing.T) {
	const total = 30_000
	l := &ledger{pending: map[string][]uint64{}, committed: map[string][]uint64{}, total: total, failFinal: true}
	dir := t.TempDir()
	newJob := func() *ringflow.Job {
		// NB: no periodic checkpoint in a run this short: the final
		// checkpoint is the only one, and holds every record.
		cfg := ringflow.Config{Workers: 2, Parallelism: 2, Checkpoint: checkpointed(dir, time.Hour),
			Restart: ringflow.RestartStrategy{Attempts: 3}}
		job := ringflow.NewJob(cfg)
		src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
			ringflow.GenOptions{Count: total, Rate: 300_000}))
		ringflow.TxnSink(src, "out", func() ringflow.TwoPhaseSink[uint64] { return &ledgerSink{l: l} })
		return job
	}
	check := func(when string) {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		seen := make([]int, total)
		for _, recs := range l.committed {
			for _, r := range recs {
				seen[r]++
			}
		}
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("%s: record %d committed %d times (%d transactions pending)", when, r, n, len(l.pending))
			}
		}
	}
	job := newJob()
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !l.failed {
		t.Fatal("the final checkpoint's commit never failed: the test tested nothing")
	}
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1 (after the failed commit)", job.Restarts())
	}
	check("after the restart")

	// A process that ended between the final checkpoint and its commit:
	// the last transaction committed, one of the final checkpoint's, is
	// pending again; a new Run commits it.
	l.mu.Lock()
	last := l.order[len(l.order)-1]
	l.pending[last] = l.committed[last]
	delete(l.committed, last)
	l.mu.Unlock()
	if err := newJob().Run(context.Background()); !errors.Is(err, ringflow.ErrFinished) {
		t.Fatalf("Run on the finished state directory = %v, want ErrFinished", err)
	}
	check("after a run on the finished directory")
}
