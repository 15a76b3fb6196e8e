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
// restarts allowed. fail, if not nil, is asked before each record's
// count is written and before each row is made, and panics where it
// injects a failure.
func countJob(connString, stateDir string, records uint64, rate float64, restarts int, fail *failOnce) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Logger: quiet,
		Checkpoint: ringflow.CheckpointConfig{Interval: 3 * time.Millisecond, StateDir: stateDir},
		Restart:    ringflow.RestartStrategy{Attempts: restarts}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: records, Rate: rate}))
	checked := ringflow.Map(src, "check", func(i uint64) uint64 {
		fail.at(stageMap, i)
		return i
	})
	counts := ringflow.Aggregate(ringflow.KeyBy(checked, func(i uint64) uint64 { return i % countKeys }), "count", keyCount{})
	ringflow.TxnSink(counts, "out", postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out",
		Columns: []string{"k", "v"},
		Row: func(row []any, r kv) []any {
			fail.at(stageRow, uint64(r.V*countKeys+r.K))
			return append(row, r.K, r.V)
		}}))
	return job
}

// quiet is the jobs' logger: the tests check what they expect of a run
// (its restarts, its output) themselves.
var quiet = slog.New(slog.DiscardHandler)

type stage int

const (
	stageMap stage = iota // in a user function upstream of the sink
	stageRow              // in the sink's Row, mid-transaction
)

// failOnce fails the job once: at record seq of stage.
type failOnce struct {
	stage stage
	seq   uint64
	done  atomic.Bool
}

func (f *failOnce) at(s stage, seq uint64) {
	if f != nil && s == f.stage && seq == f.seq && f.done.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("injected failure at record %d", seq))
	}
}

// TestJobExactlyOnce runs the keyed count into PostgreSQL with a failure
// injected once at a random record, upstream or in the sink itself: the
// table must equal an uninterrupted run's, and hold each key's counts
// 1..n exactly once.
func TestJobExactlyOnce(t *testing.T) {
	const records = 20_000
	oracleDB, oracleConn := newDB(t)
	run(t, countJob(oracleDB, filepath.Join(t.TempDir(), "state"), records, 0, 0, nil))
	want := outRows(t, oracleConn)
	diffRows(t, want, keyCounts(records, countKeys))
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	for _, st := range []stage{stageMap, stageRow} {
		t.Run([]string{"map", "row"}[st], func(t *testing.T) {
			connString, conn := newDB(t)
			fail := &failOnce{stage: st, seq: 1000 + rng.Uint64N(records-2000)}
			t.Logf("failing at record %d", fail.seq)
			job := countJob(connString, filepath.Join(t.TempDir(), "state"), records, 0, 2, fail)
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
