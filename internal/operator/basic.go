package operator

import (
	"context"
	"fmt"
)

// Base gives an operator the Operator methods it has nothing to do in. It
// keeps the Context that Open receives.
type Base struct{ Ctx *Context }

// Open implements Operator.
func (b *Base) Open(ctx *Context) error { b.Ctx = ctx; return nil }

// Watermark implements Operator.
func (b *Base) Watermark(int64) {}

// End implements Operator.
func (b *Base) End() {}

// Close implements Operator.
func (b *Base) Close() error { return nil }

// Collector gathers the records an operator emits for one batch, with the
// event timestamp each inherits.
type Collector[T any] struct {
	recs  []T
	ts    []int64
	now   int64 // timestamp given to emitted records
	timed bool
}

// Emit emits v, with the timestamp of the record being processed.
func (c *Collector[T]) Emit(v T) {
	c.recs = append(c.recs, v)
	if c.timed {
		c.ts = append(c.ts, c.now)
	}
}

// EmitAt emits v with event timestamp ts (ignored on streams without event
// time).
func (c *Collector[T]) EmitAt(v T, ts int64) {
	c.recs = append(c.recs, v)
	if c.timed {
		c.ts = append(c.ts, ts)
	}
}

func (c *Collector[T]) reset(timed bool) {
	c.recs, c.ts, c.timed = c.recs[:0], c.ts[:0], timed
}

// flush pushes what was collected to next and empties the collector.
func (c *Collector[T]) flush(next Input[T]) {
	if len(c.recs) == 0 {
		return
	}
	var ts []int64
	if c.timed {
		ts = c.ts
	}
	next.Push(c.recs, ts)
	c.recs, c.ts = c.recs[:0], c.ts[:0]
}

// Map applies f, or fp to a pointer to the record, to every record.
type Map[T, U any] struct {
	Base
	f    func(T) U
	fp   func(*T) U
	next Input[U]
	out  []U
}

// NewMap returns a map operator feeding next.
func NewMap[T, U any](f func(T) U, next Input[U]) *Map[T, U] {
	return &Map[T, U]{f: f, next: next}
}

// NewMapPtr returns a map operator feeding next that passes f a pointer to
// each record rather than a copy: for large records, the copy of every
// call is most of a small function's cost. f may not keep the pointer.
func NewMapPtr[T, U any](f func(*T) U, next Input[U]) *Map[T, U] {
	return &Map[T, U]{fp: f, next: next}
}

// Push implements Input.
func (m *Map[T, U]) Push(recs []T, ts []int64) {
	defer Guard(m.Ctx)
	if cap(m.out) < len(recs) {
		m.out = make([]U, len(recs))
	}
	out := m.out[:len(recs)]
	if m.fp != nil {
		for i := range recs {
			out[i] = m.fp(&recs[i])
		}
	} else {
		for i := range recs {
			out[i] = m.f(recs[i])
		}
	}
	m.next.Push(out, ts)
}

// MapBatches applies f to whole batches: f sets out[i] from in[i] for
// every i (len(out) == len(in)), one call per batch instead of one per
// record.
type MapBatches[T, U any] struct {
	Base
	f    func(in []T, out []U)
	next Input[U]
	out  []U
}

// NewMapBatches returns a batch map operator feeding next.
func NewMapBatches[T, U any](f func(in []T, out []U), next Input[U]) *MapBatches[T, U] {
	return &MapBatches[T, U]{f: f, next: next}
}

// Push implements Input.
func (m *MapBatches[T, U]) Push(recs []T, ts []int64) {
	defer Guard(m.Ctx)
	if cap(m.out) < len(recs) {
		m.out = make([]U, len(recs))
	}
	out := m.out[:len(recs)]
	m.f(recs, out)
	m.next.Push(out, ts)
}

// Filter keeps the records for which keep (or keepPtr, given a pointer to
// the record) returns true.
type Filter[T any] struct {
	Base
	keep    func(T) bool
	keepPtr func(*T) bool
	next    Input[T]
	out     []T
	ts      []int64
}

// NewFilter returns a filter operator feeding next.
func NewFilter[T any](keep func(T) bool, next Input[T]) *Filter[T] {
	return &Filter[T]{keep: keep, next: next}
}

// NewFilterPtr returns a filter operator feeding next that passes keep a
// pointer to each record rather than a copy (see NewMapPtr).
func NewFilterPtr[T any](keep func(*T) bool, next Input[T]) *Filter[T] {
	return &Filter[T]{keepPtr: keep, next: next}
}

// Push implements Input.
func (f *Filter[T]) Push(recs []T, ts []int64) {
	defer Guard(f.Ctx)
	if f.keepPtr != nil {
		f.pushPtr(recs, ts)
		return
	}
	if cap(f.out) < len(recs) {
		f.out = make([]T, len(recs))
	}
	out := f.out[:len(recs)]
	// NB: every record is copied to the next free slot and the slot is kept
	// only if keep says so, without a branch on keep's answer: whether a
	// record passes is often a coin toss, and a branch on it mispredicts
	// about half the time, which cost more than the copy.
	n := 0
	if ts == nil {
		for i := range recs {
			out[n] = recs[i]
			if f.keep(recs[i]) {
				n++
			}
		}
		if n > 0 {
			f.next.Push(out[:n], nil)
		}
		return
	}
	if cap(f.ts) < len(recs) {
		f.ts = make([]int64, len(recs))
	}
	outTs := f.ts[:len(recs)]
	for i := range recs {
		out[n], outTs[n] = recs[i], ts[i]
		if f.keep(recs[i]) {
			n++
		}
	}
	if n > 0 {
		f.next.Push(out[:n], outTs[:n])
	}
}

// pushPtr is Push for keepPtr.
func (f *Filter[T]) pushPtr(recs []T, ts []int64) {
	if cap(f.out) < len(recs) {
		f.out = make([]T, len(recs))
	}
	out := f.out[:len(recs)]
	if ts == nil {
		n := 0
		for i := range recs {
			out[n] = recs[i]
			if f.keepPtr(&recs[i]) {
				n++
			}
		}
		if n > 0 {
			f.next.Push(out[:n], nil)
		}
		return
	}
	if cap(f.ts) < len(recs) {
		f.ts = make([]int64, len(recs))
	}
	outTs := f.ts[:len(recs)]
	n := 0
	for i := range recs {
		out[n], outTs[n] = recs[i], ts[i]
		if f.keepPtr(&recs[i]) {
			n++
		}
	}
	if n > 0 {
		f.next.Push(out[:n], outTs[:n])
	}
}

// FlatMap calls f for every record; f emits any number of records through
// the Collector, each with the timestamp of the record it came from.
type FlatMap[T, U any] struct {
	Base
	f    func(T, *Collector[U])
	fp   func(*T, *Collector[U])
	next Input[U]
	out  Collector[U]
}

// NewFlatMap returns a flat-map operator feeding next.
func NewFlatMap[T, U any](f func(T, *Collector[U]), next Input[U]) *FlatMap[T, U] {
	return &FlatMap[T, U]{f: f, next: next}
}

// NewFlatMapPtr returns a flat-map operator feeding next that passes f a
// pointer to each record rather than a copy (see NewMapPtr).
func NewFlatMapPtr[T, U any](f func(*T, *Collector[U]), next Input[U]) *FlatMap[T, U] {
	return &FlatMap[T, U]{fp: f, next: next}
}

// Push implements Input.
func (m *FlatMap[T, U]) Push(recs []T, ts []int64) {
	defer Guard(m.Ctx)
	m.out.reset(ts != nil)
	for i := range recs {
		if ts != nil {
			m.out.now = ts[i]
		}
		if m.fp != nil {
			m.fp(&recs[i], &m.out)
		} else {
			m.f(recs[i], &m.out)
		}
	}
	m.out.flush(m.next)
}

// BatchSink hands each batch of records that reaches one instance to the
// function that instance's open call returned, with the job's attempt
// context (Context.Attempt); an error from it fails the job.
type BatchSink[T any] struct {
	Base
	open  func(subtask int) func(ctx context.Context, batch []T) error
	write func(context.Context, []T) error
}

// NewBatchSink returns a batch sink operator; open is called once per
// instance, in Open.
func NewBatchSink[T any](open func(subtask int) func(ctx context.Context, batch []T) error) *BatchSink[T] {
	return &BatchSink[T]{open: open}
}

// Open implements Operator: it asks open for this instance's function.
func (s *BatchSink[T]) Open(ctx *Context) (err error) {
	s.Ctx = ctx
	defer recoverTo(ctx, &err)
	if s.write = s.open(ctx.Subtask); s.write == nil {
		return fmt.Errorf("open returned a nil function for subtask %d", ctx.Subtask)
	}
	return nil
}

// Push implements Input. recs is only valid during the call.
func (s *BatchSink[T]) Push(recs []T, _ []int64) {
	defer Guard(s.Ctx)
	if len(recs) == 0 {
		return
	}
	if err := s.write(s.Ctx.Ctx(), recs); err != nil {
		Fail(s.Ctx, err)
	}
}

// Sink hands every record to a user function, with the job's attempt
// context (Context.Attempt); an error from it fails the job.
type Sink[T any] struct {
	Base
	f func(context.Context, T) error
}

// NewSink returns a sink operator.
func NewSink[T any](f func(ctx context.Context, rec T) error) *Sink[T] { return &Sink[T]{f: f} }

// Push implements Input.
func (s *Sink[T]) Push(recs []T, _ []int64) {
	defer Guard(s.Ctx)
	ctx := s.Ctx.Ctx()
	for i := range recs {
		if err := s.f(ctx, recs[i]); err != nil {
			Fail(s.Ctx, err)
		}
	}
}
