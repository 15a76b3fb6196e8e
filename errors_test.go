package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/operator"
)

// logRecorder is a ringflow.Logger that keeps every line.
type logRecorder struct {
	mu    sync.Mutex
	infos []string
	errs  []string
}

func (l *logRecorder) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, fmt.Sprintf(format, args...))
}

func (l *logRecorder) Errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *logRecorder) lines() (infos, errs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.infos...), append([]string(nil), l.errs...)
}

// TestSourceOpenErrorNamesOperator checks that a source that cannot open
// its input fails Run with one line naming ringflow, the operator and the
// subtask, and keeps the cause testable.
func TestSourceOpenErrorNamesOperator(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	missing := filepath.Join(t.TempDir(), "missing.txt")
	ringflow.Sink(ringflow.Source(job, "lines", ringflow.FileLines(missing)), "sink", func(string) error { return nil })
	err := job.Run(context.Background())
	var oe *operator.Error
	if !errors.As(err, &oe) || oe.Operator != "lines" || oe.Subtask != 0 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Run returned %v; want an operator.Error of lines wrapping fs.ErrNotExist", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, `ringflow: operator "lines" subtask 0: `) || !strings.Contains(msg, missing) ||
		strings.Contains(msg, "\n") {
		t.Fatalf("error %q: want one line naming ringflow, the operator, the subtask and the file", msg)
	}
}

// failingSink is a TwoPhaseSink whose Open fails.
type failingSink struct{ fileSinkLike }

type fileSinkLike struct{}

func (fileSinkLike) Open(int, int) error                      { return errors.New("no such bucket") }
func (fileSinkLike) Recover([][]byte) error                   { return nil }
func (fileSinkLike) Write(string) error                       { return nil }
func (fileSinkLike) PreCommit() ([]byte, func() error, error) { return nil, nil, nil }
func (fileSinkLike) Commit([]byte) error                      { return nil }
func (fileSinkLike) Close() error                             { return nil }

// TestSinkOpenErrorNamesOperator checks the same for a user sink.
func TestSinkOpenErrorNamesOperator(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	ringflow.TxnSink(ringflow.Source(job, "src", ringflow.FromSlice([]string{"a"})), "bucket",
		func() ringflow.TwoPhaseSink[string] { return failingSink{} })
	err := job.Run(context.Background())
	var oe *operator.Error
	if !errors.As(err, &oe) || oe.Operator != "bucket" || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("Run returned %v; want an operator.Error of bucket with the sink's error", err)
	}
}

// TestRestartLogsStack checks that a failure the job restarts from goes to
// the Config.Logger with the panic's stack, while the error stays one
// line, and that the restarted job still gives every record once.
func TestRestartLogsStack(t *testing.T) {
	dir := t.TempDir()
	logs := &logRecorder{}
	job := ringflow.NewJob(ringflow.Config{Workers: 2, BatchSize: 100, Logger: logs,
		Checkpoint: checkpointed(dir, 2*time.Millisecond), Restart: ringflow.RestartStrategy{Attempts: 1}})
	const n = 50_000
	var failed atomic.Bool
	s := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) int64 { return int64(seq) }, ringflow.GenOptions{Count: n}))
	m := ringflow.Map(s, "flaky", func(v int64) string {
		if v == n/2 && failed.CompareAndSwap(false, true) {
			panic("halfway")
		}
		return fmt.Sprint(v)
	})
	ringflow.TxnSink(m, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	run(t, job)
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1", job.Restarts())
	}
	_, errs := logs.lines()
	if len(errs) != 1 || !strings.Contains(errs[0], `operator "flaky" subtask 0: panic: halfway`) ||
		!strings.Contains(errs[0], "errors_test.go") {
		t.Fatalf("logged errors %q; want the failure with its stack", errs)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
}
