package queries

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// Names lists the queries Build knows, in the order dfbench runs them.
var Names = []string{"q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11"}

var builders = map[string]func(*ringflow.Job, nexmark.Config, *Output){
	"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q5": q5, "q7": q7, "q8": q8, "q11": q11,
}

// Operator names shared by every query.
const (
	SourceName = "source"
	SinkName   = "sink"
)

// Build adds the named query ("q0" ... "q11", see Names) to job: a source
// of cfg's events (SourceName), the query's operators, and a sink
// (SinkName) that hands every result row to out. Operators take the job's
// default parallelism. Run the job to run the query.
func Build(job *ringflow.Job, query string, cfg nexmark.Config, out *Output) error {
	build, ok := builders[query]
	if !ok {
		return fmt.Errorf("nexmark queries: unknown query %q (have %s)", query, strings.Join(Names, ", "))
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("nexmark queries: %w", err)
	}
	if out == nil {
		return fmt.Errorf("nexmark queries: %s: nil Output (use NewOutput(nil) to count rows only)", query)
	}
	build(job, cfg, out)
	return nil
}

// Output receives a query's result rows, as CSV lines without the newline
// (nexmark.Append*Row), and counts them.
type Output struct {
	write func(row []byte) error
	rows  atomic.Int64
	mu    sync.Mutex // serializes write and guards buf
	buf   []byte
}

// NewOutput returns an Output that hands each row to write. The sink's
// subtasks call write one at a time, never concurrently; row is valid only
// during the call. A nil write only counts rows: they are not even
// formatted (Flink's Nexmark runner uses a blackhole sink likewise).
func NewOutput(write func(row []byte) error) *Output { return &Output{write: write} }

// Rows returns the number of rows the sink has seen so far.
func (o *Output) Rows() int64 { return o.rows.Load() }

// sink ends a query: every record of s is formatted by format and handed to
// out.
func sink[T any](s ringflow.Stream[T], out *Output, format func(dst []byte, r T) []byte) {
	ringflow.Sink(s, SinkName, func(r T) error {
		out.rows.Add(1)
		if out.write == nil {
			return nil
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		out.buf = format(out.buf[:0], r)
		return out.write(out.buf)
	})
}

// events adds the source of cfg's events, with event time.
func events(job *ringflow.Job, cfg nexmark.Config) ringflow.Stream[nexmark.Event] {
	return ringflow.SourceWithEventTime(job, SourceName, Source(cfg), Watermarks())
}

// count counts records.
type count[T any] struct{}

func (count[T]) Create() int64          { return 0 }
func (count[T]) Add(n int64, _ T) int64 { return n + 1 }
func (count[T]) Result(n int64) int64   { return n }
func (count[T]) Merge(a, b int64) int64 { return a + b }

// windowStart is the start of the tumbling window of size sizeMs that holds
// ts, windows being aligned to the epoch.
func windowStart(ts, sizeMs int64) int64 {
	q := ts / sizeMs
	if ts%sizeMs != 0 && ts < 0 {
		q--
	}
	return q * sizeMs
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("nexmark queries: "+format, args...)
}
