package queries

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
	"github.com/ringflow/ringflow/bench/nexmark/oracle"
)

// failingSource is Source with one injected failure. In the job's first
// attempt, subtask 0 reads after events, then has nothing to read (Read
// returns 0, nil) until ready says so, and then fails.
type failingSource struct {
	ringflow.SourceFunc[nexmark.Event]
	after   int
	ready   func() bool
	failed  *atomic.Bool
	subtask int
	read    int
}

func (s *failingSource) Open(subtask, parallelism int, pos []byte) error {
	s.subtask = subtask
	return s.SourceFunc.Open(subtask, parallelism, pos)
}

func (s *failingSource) Read(buf []nexmark.Event) (int, error) {
	if s.subtask == 0 && s.read >= s.after && !s.failed.Load() {
		if !s.ready() {
			return 0, nil
		}
		s.failed.Store(true)
		return 0, errors.New("injected failure")
	}
	n, err := s.SourceFunc.Read(buf)
	s.read += n
	return n, err
}

// readCommitted returns the rows of the committed part files in dir.
func readCommitted(t *testing.T, dir string) []string {
	t.Helper()
	rows, err := ringflow.ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// Every query, checkpointing every 2 ms with a transactional file sink,
// survives a failure injected in a source (after a sixth or a half of its
// events, once a checkpoint has completed):
// the job restarts from its latest checkpoint, and the committed rows are
// exactly the oracle's (no row lost, none twice).
func TestQueriesExactlyOnceAcrossFailure(t *testing.T) {
	cfg := testConfig()
	events, err := oracle.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Names {
		for _, part := range []uint64{6, 2} {
			t.Run(fmt.Sprintf("%s/after-1of%d", q, part), func(t *testing.T) {
				want, _ := oracle.Query(q, events)
				dir := t.TempDir()
				job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2,
					Checkpoint: ringflow.CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: filepath.Join(dir, "state")},
					Restart:    ringflow.RestartStrategy{Attempts: 1}})
				var failed atomic.Bool
				ready := func() bool {
					for _, c := range job.Checkpoints() {
						if c.Status == "completed" {
							return true
						}
					}
					return false
				}
				src := func() ringflow.SourceFunc[nexmark.Event] {
					return &failingSource{SourceFunc: Source(cfg)(), after: int(cfg.NumEvents / 2 / part), ready: ready, failed: &failed}
				}
				out := NewTxnOutput(ringflow.FileSink(filepath.Join(dir, "out")))
				if err := BuildOn(q, ringflow.SourceWithEventTime(job, SourceName, src, Watermarks()), out); err != nil {
					t.Fatal(err)
				}
				if err := job.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !failed.Load() || job.Restarts() != 1 || job.RestoredFrom() == 0 {
					t.Fatalf("failure injected: %v, restarts %d, restored from checkpoint %d; want a failure after a checkpoint, one restart from it",
						failed.Load(), job.Restarts(), job.RestoredFrom())
				}
				if d := oracle.Diff(readCommitted(t, filepath.Join(dir, "out")), want); d != "" {
					t.Fatalf("%s after a failure and restore from checkpoint %d: %s", q, job.RestoredFrom(), d)
				}
				t.Logf("%s: %d rows; %d checkpoints, restored from %d", q, len(want), len(job.Checkpoints()), job.RestoredFrom())
			})
		}
	}
}
