package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/operator"
)

// logRecorder is a slog.Handler that keeps every record, with the
// attributes of the logger it came through.
type logRecorder struct {
	shared *recorded
	attrs  []slog.Attr
}

type recorded struct {
	mu      sync.Mutex
	records []logRecord
}

// logRecord is one record: its level, message and attributes by key.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (r logRecord) String() string {
	var b strings.Builder
	b.WriteString(r.msg)
	for _, k := range slices.Sorted(maps.Keys(r.attrs)) {
		fmt.Fprintf(&b, " %s=%v", k, r.attrs[k])
	}
	return b.String()
}

func newLogRecorder() *logRecorder { return &logRecorder{shared: &recorded{}} }

// logger returns a logger writing to l.
func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	for _, a := range l.attrs {
		rec.attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.Resolve(); return true })
	l.shared.mu.Lock()
	l.shared.records = append(l.shared.records, rec)
	l.shared.mu.Unlock()
	return nil
}

func (l *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{shared: l.shared, attrs: append(slices.Clip(l.attrs), attrs...)}
}

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

// records returns every record so far.
func (l *logRecorder) records() []logRecord {
	l.shared.mu.Lock()
	defer l.shared.mu.Unlock()
	return slices.Clone(l.shared.records)
}

// lines returns the records below level Error and those at it or above,
// each as its message followed by its attributes (key=value).
func (l *logRecorder) lines() (infos, errs []string) {
	for _, r := range l.records() {
		if r.level >= slog.LevelError {
			errs = append(errs, r.String())
		} else {
			infos = append(infos, r.String())
		}
	}
	return infos, errs
}

// TestSourceOpenErrorNamesOperator checks that a source that cannot open
// its input fails Run with one line naming ringflow, the operator and the
// subtask, and keeps the cause testable.
func TestSourceOpenErrorNamesOperator(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	missing := filepath.Join(t.TempDir(), "missing.txt")
	ringflow.Sink(ringflow.Source(job, "lines", ringflow.FileLines(missing)), "sink", func(context.Context, string) error { return nil })
	err := job.Run(context.Background())
	var oe *ringflow.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "lines" || oe.Subtask != 0 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Run returned %v; want an OperatorError of lines wrapping fs.ErrNotExist", err)
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

func (fileSinkLike) Open(context.Context, int, int) error    { return errors.New("no such bucket") }
func (fileSinkLike) Recover(context.Context, [][]byte) error { return nil }
func (fileSinkLike) Write(string) error                      { return nil }
func (fileSinkLike) PreCommit() ([]byte, func(context.Context) error, error) {
	return nil, nil, nil
}
func (fileSinkLike) Commit(context.Context, []byte) error { return nil }
func (fileSinkLike) Close() error                         { return nil }

// TestSinkOpenErrorNamesOperator checks the same for a user sink.
func TestSinkOpenErrorNamesOperator(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	ringflow.TxnSink(ringflow.Source(job, "src", ringflow.FromSlice([]string{"a"})), "bucket",
		func() ringflow.TwoPhaseSink[string] { return failingSink{} })
	err := job.Run(context.Background())
	var oe *ringflow.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "bucket" || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("Run returned %v; want an OperatorError of bucket with the sink's error", err)
	}
}

// TestRestartLogsStack checks that a failure the job restarts from goes to
// the Config.Logger with the panic's stack, while the error stays one
// line, and that the restarted job still gives every record once.
func TestRestartLogsStack(t *testing.T) {
	dir := t.TempDir()
	logs := newLogRecorder()
	job := ringflow.NewJob(ringflow.Config{Workers: 2, BatchSize: 100, Logger: logs.logger(),
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

// TestGraphErrorKinds checks that Run reports every problem of a graph at
// once, each a *GraphError whose kind errors.Is finds and which names its
// operator, and that errors.Is finds no kind that is not there.
func TestGraphErrorKinds(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	codec, err := operator.CodecFor[int64]()
	if err != nil {
		t.Fatal(err)
	}
	src := ringflow.Source(job, "src", ringflow.FromSlice([]event{{Key: 1}}))
	// WithCodec for int64 on an operator whose output is a string.
	str := ringflow.Map(src, "str", func(e event) string { return "x" }, ringflow.WithCodec(codec))
	ringflow.Sink(str, "sink", func(context.Context, string) error { return nil })
	// An output that goes nowhere, with a parallelism of 0.
	ringflow.Map(src, "orphan", func(e event) event { return e }, ringflow.Parallelism(0))
	// A window over a stream without event time.
	w := ringflow.Window(ringflow.KeyBy(src, func(e event) uint64 { return e.Key }), "win",
		ringflow.TumblingWindows(time.Second), valueSum{})
	// A name used twice.
	ringflow.Sink(w, "sink", func(context.Context, ringflow.WindowResult[uint64, int64]) error { return nil })

	err = job.Run(context.Background())
	want := map[error]string{
		ringflow.ErrTypeMismatch: "str",
		ringflow.ErrUnusedOutput: "orphan",
		ringflow.ErrParallelism:  "orphan",
		ringflow.ErrEventTime:    "win",
		ringflow.ErrOperatorName: "sink",
	}
	for kind, op := range want {
		if !errors.Is(err, kind) {
			t.Errorf("errors.Is(err, %v) is false; Run returned %v", kind, err)
		}
		found := false
		for _, ge := range ringflow.GraphErrors(err) {
			if ge.Kind == kind && ge.Operator == op {
				found = true
			}
		}
		if !found {
			t.Errorf("no GraphError of kind %v names operator %q", kind, op)
		}
	}
	for _, absent := range []error{ringflow.ErrCycle, ringflow.ErrNoSink, ringflow.ErrNoCodec, ringflow.ErrForeignStream,
		ringflow.ErrConfig} {
		if errors.Is(err, absent) {
			t.Errorf("errors.Is(err, %v) is true; Run returned %v", absent, err)
		}
	}
	if n := len(ringflow.GraphErrors(err)); n != len(want) {
		t.Errorf("%d graph errors, want %d: %v", n, len(want), err)
	}
	var ge *ringflow.GraphError
	if !errors.As(err, &ge) || !errors.Is(ge, ringflow.ErrGraph) ||
		!strings.HasPrefix(ge.Error(), "ringflow: invalid job graph: operator") {
		t.Errorf("errors.As found %v; want a GraphError wrapping ErrGraph whose message names its operator", ge)
	}
}

// TestGraphAndConfigErrorsJoined checks that problems of the Config and of
// the graph come back together, each testable on its own.
func TestGraphAndConfigErrorsJoined(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: -1, BatchSize: -1})
	src := ringflow.Source(job, "src", ringflow.FromSlice([]int64{1}))
	ringflow.Map(src, "unused", func(v int64) int64 { return v })
	err := job.Run(context.Background())
	var fields []string
	for _, ce := range ringflow.ConfigErrors(err) {
		fields = append(fields, ce.Field)
	}
	if !slices.Equal(fields, []string{"Workers", "BatchSize"}) {
		t.Errorf("config errors for %v, want Workers and BatchSize: %v", fields, err)
	}
	if !errors.Is(err, ringflow.ErrConfig) || !errors.Is(err, ringflow.ErrNoSink) ||
		!errors.Is(err, ringflow.ErrUnusedOutput) {
		t.Errorf("Run returned %v; want ErrConfig, ErrNoSink and ErrUnusedOutput in it", err)
	}
}
