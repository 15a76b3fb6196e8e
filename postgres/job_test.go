package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/postgres"
)

// countJob is the engine job of these tests: a generator of records
// 0..records-1, a keyed count (key i % countKeys), and a PostgreSQL sink
// of each (key, count) into table out, with checkpoints every 3 ms and
// restarts allowed. fail, if not nil, injects one failure: in a user
// function upstream, in the sink's Row, in a Commit or in a durable
// function.
func countJob(connString, stateDir string, records uint64, rate float64, restarts int, fail *failOnce) *ringflow.Job {
	return countJobAt(connString, stateDir, records, rate, restarts, fail, 2)
}

// countJobAt is countJob with the count and the sink at parallelism par.
func countJobAt(connString, stateDir string, records uint64, rate float64, restarts int, fail *failOnce, par int) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Logger: quiet,
		Checkpoint: ringflow.CheckpointConfig{Interval: 3 * time.Millisecond, StateDir: stateDir},
		Restart:    ringflow.RestartStrategy{Attempts: restarts}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: records, Rate: rate}))
	checked := ringflow.Map(src, "check", func(i uint64) uint64 {
		fail.panicAt(stageMap, i)
		return i
	})
	counts := ringflow.Aggregate(ringflow.KeyBy(checked, func(i uint64) uint64 { return i % countKeys }), "count", keyCount{},
		ringflow.Parallelism(par))
	newSink := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out",
		Columns: []string{"k", "v"},
		Row: func(row []any, r kv) []any {
			fail.panicAt(stageRow, uint64(r.V*countKeys+r.K))
			return append(row, r.K, r.V)
		}})
	ringflow.TxnSink(counts, "out", func() ringflow.TwoPhaseSink[kv] { return &failingSink{newSink(), fail} },
		ringflow.Parallelism(par))
	return job
}

// quiet is the jobs' logger: the tests check what they expect of a run
// (its restarts, its output) themselves.
var quiet = slog.New(slog.DiscardHandler)

type stage int

const (
	stageMap     stage = iota // in a user function upstream of the sink
	stageRow                  // in the sink's Row, mid-transaction
	stageCommit               // at a Commit: prepared, its checkpoint complete, not committed
	stageDurable              // after a PREPARE, before its checkpoint completes
)

var stageNames = []string{"map", "row", "commit", "durable"}

// failOnce fails the job once: at record or call seq of stage.
type failOnce struct {
	stage stage
	seq   uint64
	calls atomic.Uint64 // Commit or durable calls so far
	done  atomic.Bool
}

// hit reports whether the failure is due at seq of stage s.
func (f *failOnce) hit(s stage, seq uint64) bool {
	return f != nil && s == f.stage && seq == f.seq && f.done.CompareAndSwap(false, true)
}

func (f *failOnce) panicAt(s stage, seq uint64) {
	if f.hit(s, seq) {
		panic(fmt.Sprintf("injected failure at %s %d", stageNames[s], seq))
	}
}

// call counts a call of stage s and returns the failure when it is due.
func (f *failOnce) call(s stage) error {
	if f == nil || s != f.stage {
		return nil
	}
	if n := f.calls.Add(1); f.hit(s, n) {
		return fmt.Errorf("injected failure at %s %d", stageNames[s], n)
	}
	return nil
}

// failingSink fails a Commit before it commits, or a durable function
// after its PREPARE, as failOnce says.
type failingSink struct {
	ringflow.TwoPhaseSink[kv]
	fail *failOnce
}

func (s *failingSink) Commit(ctx context.Context, txn []byte) error {
	if err := s.fail.call(stageCommit); err != nil {
		return err
	}
	return s.TwoPhaseSink.Commit(ctx, txn)
}

func (s *failingSink) PreCommit() ([]byte, func(context.Context) error, error) {
	txn, durable, err := s.TwoPhaseSink.PreCommit()
	if durable == nil {
		return txn, durable, err
	}
	return txn, func(ctx context.Context) error {
		if err := durable(ctx); err != nil {
			return err
		}
		return s.fail.call(stageDurable)
	}, err
}

// failRate paces the source of TestJobExactlyOnce's runs with failures.
const failRate = 25_000

// TestJobExactlyOnce runs the keyed count into PostgreSQL with a failure
// injected once, at a random record or call: upstream, in the sink's Row,
// before a Commit, after a PREPARE. The table must equal an
// uninterrupted run's, and hold each key's counts 1..n exactly once.
func TestJobExactlyOnce(t *testing.T) {
	const records = 20_000
	oracleDB, oracleConn := newDB(t)
	run(t, countJob(oracleDB, filepath.Join(t.TempDir(), "state"), records, 0, 0, nil))
	want := outRows(t, oracleConn)
	diffRows(t, want, keyCounts(records, countKeys))
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	for st := range stage(len(stageNames)) {
		t.Run(stageNames[st], func(t *testing.T) {
			connString, conn := newDB(t)
			fail := &failOnce{stage: st, seq: 1000 + rng.Uint64N(records-2000)}
			if st >= stageCommit {
				fail.seq = 2 + rng.Uint64N(4) // within the first three checkpoints
			}
			t.Logf("failing at %s %d", stageNames[st], fail.seq)
			// NB: paced, so that the run lasts 0.8 s, time for a couple of
			// hundred checkpoints, and even on a loaded machine the
			// failure comes long before the last one.
			job := countJob(connString, filepath.Join(t.TempDir(), "state"), records, failRate, 2, fail)
			run(t, job)
			if !fail.done.Load() || job.Restarts() != 1 {
				t.Fatalf("failed %v, restarts %d; want one failure and one restart", fail.done.Load(), job.Restarts())
			}
			diffRows(t, outRows(t, conn), want)
			if gids := prepared(t, conn); len(gids) != 0 {
				t.Fatalf("prepared %q left after the job", gids)
			}
		})
	}
}

// TestJobWithoutCheckpoints checks the sink without checkpoints: it
// commits its one transaction at the end of input.
func TestJobWithoutCheckpoints(t *testing.T) {
	connString, conn := newDB(t)
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Logger: quiet})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) kv { return kv{int64(i % 3), int64(i)} },
		ringflow.GenOptions{Count: 3000}))
	ringflow.TxnSink(src, "out", outSink(connString))
	run(t, job)
	got := outRows(t, conn)
	if len(got) != 3000 {
		t.Fatalf("%d rows, want 3000", len(got))
	}
}

func run(t *testing.T, job *ringflow.Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // NB: a hang guard
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
