package queries

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// Names lists the queries Build knows, in the order dfbench runs them.
var Names = []string{"q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11"}

var builders = map[string]func(ringflow.Stream[nexmark.Event], *Output){
	"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q5": q5, "q7": q7, "q8": q8, "q11": q11,
}

// Operator names shared by every query.
const (
	SourceName = "source"
	SinkName   = "sink"
)

// Build adds the named query ("q0" ... "q11", see Names) to job: a source
// of cfg's events (SourceName, see Source and Watermarks), the query's
// operators, and a sink (SinkName) that hands every result row to out.
// Operators take the job's default parallelism. Run the job to run the
// query.
func Build(job *ringflow.Job, query string, cfg nexmark.Config, out *Output) error {
	if err := cfg.Validate(); err != nil {
		return errorf("%w", err)
	}
	if err := checkQuery(query, out); err != nil {
		return err
	}
	return BuildOn(query, ringflow.SourceWithEventTime(job, SourceName, Source(cfg), Watermarks()), out)
}

// BuildOn adds the named query, reading events, to the stream's job. The
// stream must carry event time: the events' DateTime, as Watermarks gives.
func BuildOn(query string, events ringflow.Stream[nexmark.Event], out *Output) error {
	if err := checkQuery(query, out); err != nil {
		return err
	}
	builders[query](events, out)
	return nil
}

func checkQuery(query string, out *Output) error {
	if _, ok := builders[query]; !ok {
		return errorf("unknown query %q (have %s)", query, strings.Join(Names, ", "))
	}
	if out == nil {
		return errorf("%s: nil Output (use NewOutput(nil) to count rows only)", query)
	}
	return nil
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("nexmark queries: "+format, args...)
}

// Output receives a query's result rows, as CSV lines without the newline
// (nexmark.Append*Row), and counts them.
type Output struct {
	write func(row []byte) error
	txn   func() ringflow.TwoPhaseSink[string]
	rows  atomic.Int64
	mu    sync.Mutex // serializes write and guards buf
	buf   []byte
}

// NewOutput returns an Output that hands each row to write. The sink's
// subtasks call write one at a time, never concurrently; row is valid only
// during the call. A nil write only counts rows: they are not even
// formatted (Flink's Nexmark runs use a blackhole sink likewise). With
// checkpoints on, the rows a restarted job emits again after the
// checkpoint it restored are written (and counted) again: NewTxnOutput
// gives exactly-once output.
func NewOutput(write func(row []byte) error) *Output { return &Output{write: write} }

// NewTxnOutput returns an Output whose rows go into transactions that
// commit with checkpoints (ringflow.TxnSink), each sink subtask through its
// own sink from newSink, for instance ringflow.FileSink(dir). With
// checkpoints on, the committed rows are exactly the query's result, across
// failures and restarts.
func NewTxnOutput(newSink func() ringflow.TwoPhaseSink[string]) *Output {
	return &Output{txn: newSink}
}

// Rows returns the number of rows the sink has seen so far (for a
// transactional Output, those in pre-committed transactions), counting
// again the rows a restarted job emits again.
func (o *Output) Rows() int64 { return o.rows.Load() }

// sink ends a query: every record of s is formatted by format and handed to
// out.
func sink[T any](s ringflow.Stream[T], out *Output, format func(dst []byte, r T) []byte) {
	if out.txn != nil {
		ringflow.TxnSink(s, SinkName, func() ringflow.TwoPhaseSink[T] {
			return &rowSink[T]{TwoPhaseSink: out.txn(), format: format, out: out}
		})
		return
	}
	ringflow.Sink(s, SinkName, func(_ context.Context, r T) error {
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

// rowSink formats a query's records into the rows of a transactional
// string sink. Each sink subtask has its own, so it needs no lock.
type rowSink[T any] struct {
	ringflow.TwoPhaseSink[string]
	format func([]byte, T) []byte
	out    *Output
	buf    []byte
	rows   int64 // in the open transaction
}

func (s *rowSink[T]) Write(r T) error {
	s.rows++
	s.buf = s.format(s.buf[:0], r)
	return s.TwoPhaseSink.Write(string(s.buf))
}

func (s *rowSink[T]) PreCommit() ([]byte, func(context.Context) error, error) {
	s.out.rows.Add(s.rows)
	s.rows = 0
	return s.TwoPhaseSink.PreCommit()
}

// count counts records (in place: AddPtr).
type count[T any] struct{}

func (count[T]) Create() int64          { return 0 }
func (count[T]) Add(n int64, _ T) int64 { return n + 1 }
func (count[T]) AddPtr(n *int64, _ *T)  { *n++ }
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
