package operator

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"
)

// Source produces the records of one subtask of a source operator. It is
// the runtime's side of ringflow.SourceFunc, whose doc states the contract
// (replayable positions, Read never blocking); the root package checks at
// compile time that the two method sets stay identical.
type Source[T any] interface {
	Open(subtask, parallelism int, pos []byte) error
	Read(buf []T) (int, error)
	Position() []byte
	Close() error
}

// CheckpointPositioner is implemented by sources that need to know which
// checkpoint a position goes into, to act when that checkpoint completes
// (as a CheckpointListener): a task taking a checkpoint asks such a
// source for its position with PositionFor instead of Position.
type CheckpointPositioner interface {
	PositionFor(checkpoint uint64) []byte
}

// Pacer is implemented by sources that produce on a schedule: NextReady says
// when the next record is due (the zero time: now, or never when exhausted).
type Pacer interface {
	NextReady() time.Time
}

// WatermarkStrategy configures a source's timestamps and watermarks.
//
// A source's watermark advances once per batch it reads (up to the
// configured batch size, ringflow's Config.BatchSize), from the newest
// timestamp in that batch, not record by record: every record of a batch
// is processed before the watermark that follows it. So when event-time
// timers and windows fire relative to the records around them depends on
// the batch size (their results do not, for records within the
// out-of-orderness bound). A job that needs a watermark after every
// record, as Flink's per-record watermark generators give, sets
// Config.BatchSize to 1, at a cost in throughput.
type WatermarkStrategy[T any] struct {
	// Timestamp extracts a record's event time, in epoch milliseconds.
	Timestamp func(T) int64
	// TimestampPtr is Timestamp given a pointer to the record; it is used
	// instead when set.
	TimestampPtr func(*T) int64
	// Timestamps is the batch form: it sets ts[i] to recs[i]'s event time;
	// used before the other two when set.
	Timestamps func(recs []T, ts []int64)
	// OutOfOrderness bounds how far behind the newest timestamp seen a
	// record may be: the watermark is max timestamp - bound - 1 ms.
	OutOfOrderness time.Duration
	// IdleTimeout marks the source idle when it produced nothing for this
	// long, so that it does not hold back the watermark downstream; 0
	// never marks it idle.
	IdleTimeout time.Duration
}

// EventTimeSource is implemented by a source that stamps its records with
// event time and computes its watermark itself, from what it knows and
// the runtime does not: which split (a Kafka partition, a file) each
// record came from. A runner made with NewStampedSourceRunner uses it
// instead of a WatermarkStrategy.
type EventTimeSource interface {
	// Timestamps fills ts, of the length Read just returned, with the
	// event times of the records that Read returned, in order.
	Timestamps(ts []int64)
	// Watermark returns the source's watermark, after the records it has
	// returned, and whether it is idle.
	Watermark(now time.Time) (wm int64, idle bool)
}

// SourceDriver is a source as a task drives it.
type SourceDriver interface {
	Operator
	// Read reads one batch of at most max records (0: the batch size) and
	// pushes it down the chain. It returns io.EOF when the source is
	// exhausted.
	Read(now time.Time, max int) (int, error)
	// EventTime returns the source's watermark and whether it is idle.
	EventTime(now time.Time) (wm int64, idle bool)
	// NextReady says when a paced source next has records.
	NextReady() time.Time
	// Position returns the source's position (see Source).
	Position() []byte
	// PositionFor returns the source's position as it goes into checkpoint
	// id (see CheckpointPositioner).
	PositionFor(id uint64) []byte
	// Restore sets the position Open resumes from.
	Restore(pos []byte)
}

// SourceRunner drives a Source of T records.
type SourceRunner[T any] struct {
	Base
	src    Source[T]
	next   Input[T]
	ev     *WatermarkStrategy[T]
	own    EventTimeSource // the source's own event time, if it keeps it
	pos    []byte          // where to open
	buf    []T
	ts     []int64
	maxTs  int64
	lastAt time.Time // when records last came
	// stamped says the runner was made for an EventTimeSource.
	stamped bool
}

// NewSourceRunner returns a driver for src that pushes batches of up to
// batch records into next, opening src at pos. ev may be nil for a stream
// without event time.
func NewSourceRunner[T any](src Source[T], batch int, ev *WatermarkStrategy[T], pos []byte, next Input[T]) *SourceRunner[T] {
	s := &SourceRunner[T]{src: src, next: next, ev: ev, pos: pos, buf: make([]T, batch), maxTs: MinWatermark}
	if ev != nil {
		s.ts = make([]int64, batch)
	}
	return s
}

// NewStampedSourceRunner is NewSourceRunner for a source that keeps its own
// event time (an EventTimeSource): it stamps its records and says its
// watermark. A source that is not an EventTimeSource fails to open.
func NewStampedSourceRunner[T any](src Source[T], batch int, pos []byte, next Input[T]) *SourceRunner[T] {
	s := NewSourceRunner(src, batch, nil, pos, next)
	s.own, _ = src.(EventTimeSource)
	s.ts = make([]int64, batch)
	s.stamped = true
	return s
}

// Open implements Operator.
func (s *SourceRunner[T]) Open(ctx *Context) (err error) {
	s.Ctx = ctx
	defer recoverTo(ctx, &err)
	if s.stamped && s.own == nil {
		return fmt.Errorf("open source: a %T keeps no event time of its own (it is no EventTimeSource)", s.src)
	}
	sub, par := ctx.Subtask, ctx.Parallelism
	if ctx.Share.Parallelism > 0 {
		sub, par = ctx.Share.Subtask, ctx.Share.Parallelism
	}
	if err := s.src.Open(sub, par, s.pos); err != nil {
		return fmt.Errorf("open source: %w", err)
	}
	s.lastAt = time.Now()
	return nil
}

// Read implements SourceDriver.
func (s *SourceRunner[T]) Read(now time.Time, max int) (int, error) {
	defer Guard(s.Ctx)
	buf := s.buf
	if max > 0 && max < len(buf) {
		buf = buf[:max]
	}
	n, err := s.src.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		Fail(s.Ctx, fmt.Errorf("source read: %w", err))
	}
	if n > len(buf) || n < 0 {
		Fail(s.Ctx, fmt.Errorf("source read returned %d records into a buffer of %d", n, len(buf)))
	}
	if n > 0 {
		s.lastAt = now
		if m := s.Ctx.Metrics; m != nil {
			m.RecordsIn.Add(int64(n)) // a source's records count in as it reads them
		}
		s.push(s.buf[:n])
	}
	return n, err
}

func (s *SourceRunner[T]) push(recs []T) {
	if s.own != nil {
		ts := s.ts[:len(recs)]
		s.own.Timestamps(ts)
		s.next.Push(recs, ts)
		return
	}
	if s.ev == nil {
		s.next.Push(recs, nil)
		return
	}
	ts := s.ts[:len(recs)]
	if all := s.ev.Timestamps; all != nil {
		all(recs, ts)
		for _, t := range ts {
			s.maxTs = max(s.maxTs, t)
		}
	} else if at := s.ev.TimestampPtr; at != nil {
		for i := range recs {
			t := at(&recs[i])
			ts[i] = t
			s.maxTs = max(s.maxTs, t)
		}
	} else {
		for i := range recs {
			t := s.ev.Timestamp(recs[i])
			ts[i] = t
			s.maxTs = max(s.maxTs, t)
		}
	}
	s.next.Push(recs, ts)
}

// EventTime implements SourceDriver.
func (s *SourceRunner[T]) EventTime(now time.Time) (int64, bool) {
	if s.own != nil {
		defer Guard(s.Ctx)
		return s.own.Watermark(now)
	}
	if s.ev == nil || s.maxTs == MinWatermark {
		return MinWatermark, s.ev != nil && s.idleSince(now)
	}
	return s.maxTs - s.ev.OutOfOrderness.Milliseconds() - 1, s.idleSince(now)
}

func (s *SourceRunner[T]) idleSince(now time.Time) bool {
	return s.ev.IdleTimeout > 0 && now.Sub(s.lastAt) >= s.ev.IdleTimeout
}

// NextReady implements SourceDriver.
func (s *SourceRunner[T]) NextReady() time.Time {
	if p, ok := s.src.(Pacer); ok {
		return p.NextReady()
	}
	return time.Time{}
}

// Position implements SourceDriver.
func (s *SourceRunner[T]) Position() []byte { return s.src.Position() }

// PositionFor implements SourceDriver.
func (s *SourceRunner[T]) PositionFor(id uint64) []byte {
	if p, ok := s.src.(CheckpointPositioner); ok {
		defer Guard(s.Ctx)
		return p.PositionFor(id)
	}
	return s.src.Position()
}

// Restore implements SourceDriver.
func (s *SourceRunner[T]) Restore(pos []byte) { s.pos = pos }

// Close implements Operator.
func (s *SourceRunner[T]) Close() error { return s.src.Close() }

// NotifyComplete implements CheckpointListener: a source that listens is
// told.
func (s *SourceRunner[T]) NotifyComplete(id uint64) error {
	defer Guard(s.Ctx)
	if l, ok := s.src.(CheckpointListener); ok {
		return l.NotifyComplete(id)
	}
	return nil
}

// NotifyAborted implements CheckpointListener.
func (s *SourceRunner[T]) NotifyAborted(id uint64) {
	defer Guard(s.Ctx)
	if l, ok := s.src.(CheckpointListener); ok {
		l.NotifyAborted(id)
	}
}

// recoverTo turns a panic in user code called outside the data path (Open,
// Close) into an *Error in *errp. Defer it directly.
func recoverTo(ctx *Context, errp *error) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(*Error); ok {
		*errp = e
		return
	}
	*errp = &Error{Operator: ctx.Operator, Subtask: ctx.Subtask, Err: panicValue{r}, Stack: debug.Stack()}
}
