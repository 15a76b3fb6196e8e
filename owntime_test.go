package ringflow_test

import (
	"context"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// splitRec is a record of one of two splits, at an event time.
type splitRec struct {
	Split int64
	TS    int64
}

// twoSplits reads two splits in step, two records a Read: split 0 runs
// lag ahead of split 1 in event time, each in order. As an
// EventTimeSource it holds its watermark at the slower split.
type twoSplits struct {
	n, i int64 // records per split, and the next
	lag  int64
	last [2]splitRec
}

func (s *twoSplits) Open(_, _ int, pos []byte) error {
	if pos != nil {
		s.i = int64(binary.LittleEndian.Uint64(pos))
	}
	return nil
}

func (s *twoSplits) Read(buf []splitRec) (int, error) {
	if s.i == s.n {
		return 0, io.EOF
	}
	if len(buf) < 2 {
		return 0, nil
	}
	buf[0] = splitRec{0, s.i*10 + s.lag}
	buf[1] = splitRec{1, s.i * 10}
	s.last = [2]splitRec{buf[0], buf[1]}
	s.i++
	return 2, nil
}

func (s *twoSplits) Position() []byte { return binary.LittleEndian.AppendUint64(nil, uint64(s.i)) }
func (s *twoSplits) Close() error     { return nil }

func (s *twoSplits) Timestamps(ts []int64) { ts[0], ts[1] = s.last[0].TS, s.last[1].TS }

func (s *twoSplits) Watermark(time.Time) (int64, bool) {
	if s.i == 0 {
		return ringflow.MinWatermark, false
	}
	return min(s.last[0].TS, s.last[1].TS) - 1, false
}

type countAgg struct{}

func (countAgg) Create() int64                 { return 0 }
func (countAgg) Add(a int64, _ splitRec) int64 { return a + 1 }
func (countAgg) Result(a int64) int64          { return a }
func (countAgg) Merge(a, b int64) int64        { return a + b }

// splitWindowJob counts each split's records in 100 ms windows, the
// source added by add.
func splitWindowJob(add func(*ringflow.Job) ringflow.Stream[splitRec]) (*ringflow.Job, func() int64) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 1})
	bySplit := ringflow.KeyBy(add(job), func(r splitRec) int64 { return r.Split })
	counts := ringflow.Window(bySplit, "count", ringflow.TumblingWindows(100*time.Millisecond), countAgg{})
	var total int64
	ringflow.Sink(counts, "sum", func(_ context.Context, r ringflow.WindowResult[int64, int64]) error {
		total += r.Value
		return nil
	})
	return job, func() int64 { return total }
}

// lateDropped returns the records the window dropped as late.
func lateDropped(t *testing.T, job *ringflow.Job) int64 {
	t.Helper()
	m, ok := job.Metrics().Operator("count")
	if !ok {
		t.Fatal("no metrics of the window")
	}
	return m.LateDropped
}

// TestSourceWithOwnEventTime checks that a source keeping its own event
// time stamps its records and sets the watermark: with its watermark at
// the slower of its two splits, no record is late, where a watermark
// strategy, seeing the newest timestamp of each batch, drops the slower
// split's records as late.
func TestSourceWithOwnEventTime(t *testing.T) {
	const n, lag = 500, 2000
	newSrc := func() ringflow.SourceFunc[splitRec] { return &twoSplits{n: n, lag: lag} }
	job, total := splitWindowJob(func(j *ringflow.Job) ringflow.Stream[splitRec] {
		return ringflow.SourceWithOwnEventTime(j, "splits", newSrc)
	})
	run(t, job)
	if late := lateDropped(t, job); late != 0 || total() != 2*n {
		t.Fatalf("own event time: %d records in windows, %d late; want %d, 0", total(), late, 2*n)
	}

	job, total = splitWindowJob(func(j *ringflow.Job) ringflow.Stream[splitRec] {
		return ringflow.SourceWithEventTime(j, "splits", newSrc, ringflow.WatermarkStrategy[splitRec]{
			Timestamp: func(r splitRec) int64 { return r.TS }})
	})
	run(t, job)
	if late := lateDropped(t, job); late == 0 || total()+late != 2*n {
		t.Fatalf("watermark strategy: %d records in windows, %d late; want some late", total(), late)
	}
}

// TestSourceWithOwnEventTimeNeedsOne checks that a source without event
// time of its own fails its task at open, saying so.
func TestSourceWithOwnEventTimeNeedsOne(t *testing.T) {
	job, _ := splitWindowJob(func(j *ringflow.Job) ringflow.Stream[splitRec] {
		return ringflow.SourceWithOwnEventTime(j, "splits", ringflow.FromSlice([]splitRec{{0, 1}}))
	})
	err := job.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no EventTimeSource") {
		t.Fatalf("run: %v, want an error saying the source is no EventTimeSource", err)
	}
}
