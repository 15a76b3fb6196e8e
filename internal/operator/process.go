package operator

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/ringflow/ringflow/snapshot/cow"
)

// ProcessFunc is user code that sees one keyed record at a time, with keyed
// state and timers (Flink's KeyedProcessFunction). A ProcessFunc that
// implements CheckpointListener is told when checkpoints complete or abort.
//
// Process and OnTimer run on a worker thread, between the task's other
// work: they should not block (ctx.Context is there for calls that take a
// context, done when the job's attempt ends). An error from Open, Process
// or OnTimer, or a panic, fails the task with an *Error naming the
// operator and subtask; the job then restarts as its restart strategy
// says, or fails.
type ProcessFunc[K comparable, T, O any] interface {
	// Open declares the function's state (NewValueState, NewMapState,
	// NewListState) on s.
	Open(s *KeyedScope[K]) error
	// Process handles one record of the current key. It emits through out,
	// and to side outputs through OutputTag.Emit(ctx, ...).
	Process(ctx *KeyedContext[K], rec T, out *Collector[O]) error
	// OnTimer handles a timer of the current key that fired at ts: event
	// time (epoch ms) for event-time timers, Unix ms for processing time.
	OnTimer(ctx *KeyedContext[K], ts int64, domain TimeDomain, out *Collector[O]) error
}

// TimeDomain says which clock a timer follows.
type TimeDomain int

const (
	// EventTime timers fire when the watermark reaches them.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime
)

// KeyedScope is where a ProcessFunc declares its keyed state.
type KeyedScope[K comparable] struct {
	ctx    *Context
	hash   func(K) uint64
	cur    *KeyedContext[K]
	tables *[]stateTable
}

// KeyedContext is the current key, the current record's timestamp, the
// watermark, the timer service and the side outputs (it is an Outputs).
type KeyedContext[K comparable] struct {
	key  K
	hash uint64
	ts   int64
	wm   int64
	op   interface {
		timer(ts int64, d TimeDomain, k K, h uint64, del bool)
	}
	sides *sideOutputs
	ctx   *Context
}

// Context returns the context of the job's current attempt, done when the
// attempt ends (see Context.Attempt), for calls that take one.
func (c *KeyedContext[K]) Context() context.Context { return c.ctx.Ctx() }

func (c *KeyedContext[K]) sideOutput(name string) (SideOutput, int64) {
	if c.sides == nil {
		return nil, 0
	}
	return c.sides.find(name), c.ts
}

// Key returns the current key.
func (c *KeyedContext[K]) Key() K { return c.key }

// Timestamp returns the event timestamp of the current record (of the timer
// when in OnTimer).
func (c *KeyedContext[K]) Timestamp() int64 { return c.ts }

// Watermark returns the current event-time watermark.
func (c *KeyedContext[K]) Watermark() int64 { return c.wm }

// RegisterEventTimer asks for OnTimer when the watermark reaches ts: at the
// next watermark if it has passed ts already, or, once the watermark is
// the last (MaxWatermark), when the current batch has been processed.
func (c *KeyedContext[K]) RegisterEventTimer(ts int64) {
	c.op.timer(ts, EventTime, c.key, c.hash, false)
}

// DeleteEventTimer cancels an event-time timer of the current key.
func (c *KeyedContext[K]) DeleteEventTimer(ts int64) { c.op.timer(ts, EventTime, c.key, c.hash, true) }

// RegisterProcessingTimer asks for OnTimer when the wall clock reaches t.
func (c *KeyedContext[K]) RegisterProcessingTimer(t time.Time) {
	c.op.timer(t.UnixMilli(), ProcessingTime, c.key, c.hash, false)
}

// DeleteProcessingTimer cancels a processing-time timer of the current key
// set for t.
func (c *KeyedContext[K]) DeleteProcessingTimer(t time.Time) {
	c.op.timer(t.UnixMilli(), ProcessingTime, c.key, c.hash, true)
}

// ValueState is one value per key.
type ValueState[K comparable, V any] struct {
	cur *KeyedContext[K]
	m   *cow.Map[K, valueSlot[V]]
}

type valueSlot[V any] struct {
	v  V
	ok bool
}

// NewValueState declares a value state named name on s. A checkpoint keeps
// each state under its operator's name and its own, with the layout of its
// types: a restore gives it back by name, whatever the order of
// declaration, and refuses a checkpoint whose state of that name has
// another layout. Names are unique within the function, non-empty, without
// '/'; "event-timers" and "processing-timers" are taken.
func NewValueState[K comparable, V any](s *KeyedScope[K], name string) *ValueState[K, V] {
	t := newTableAs[K, valueSlot[V]](s.ctx, name, s.hash, keyedLayout(reflect.TypeFor[K](), Layout(reflect.TypeFor[V]())))
	*s.tables = append(*s.tables, t)
	return &ValueState[K, V]{cur: s.cur, m: t.m}
}

// Value returns the current key's value and whether it has one.
func (v *ValueState[K, V]) Value() (V, bool) {
	s, _ := v.m.GetHashed(v.cur.hash, v.cur.key)
	return s.v, s.ok
}

// Update sets the current key's value.
func (v *ValueState[K, V]) Update(x V) {
	if err := v.m.PutHashed(v.cur.hash, v.cur.key, valueSlot[V]{x, true}); err != nil {
		panic(err)
	}
}

// Clear removes the current key's value.
func (v *ValueState[K, V]) Clear() { v.m.DeleteHashed(v.cur.hash, v.cur.key) }

// MapState is a map per key.
type MapState[K, MK comparable, MV any] struct {
	cur *KeyedContext[K]
	m   *cow.Map[mapKey[K, MK], MV]
}

type mapKey[K, MK comparable] struct {
	key K
	mk  MK
}

// NewMapState declares a map state named name on s (see NewValueState).
func NewMapState[K, MK comparable, MV any](s *KeyedScope[K], name string) *MapState[K, MK, MV] {
	hash := s.hash
	layout := keyedLayout(reflect.TypeFor[K](), Layout(reflect.TypeFor[map[MK]MV]()))
	t := newTableAs[mapKey[K, MK], MV](s.ctx, name, func(k mapKey[K, MK]) uint64 { return hash(k.key) }, layout)
	*s.tables = append(*s.tables, t)
	return &MapState[K, MK, MV]{cur: s.cur, m: t.m}
}

// Get returns the current key's entry for mk.
func (m *MapState[K, MK, MV]) Get(mk MK) (MV, bool) {
	return m.m.GetHashed(m.cur.hash, mapKey[K, MK]{m.cur.key, mk})
}

// Put sets the current key's entry for mk.
func (m *MapState[K, MK, MV]) Put(mk MK, v MV) {
	if err := m.m.PutHashed(m.cur.hash, mapKey[K, MK]{m.cur.key, mk}, v); err != nil {
		panic(err)
	}
}

// Delete removes the current key's entry for mk.
func (m *MapState[K, MK, MV]) Delete(mk MK) {
	m.m.DeleteHashed(m.cur.hash, mapKey[K, MK]{m.cur.key, mk})
}

// ListState is a list per key.
type ListState[K comparable, V any] struct {
	cur *KeyedContext[K]
	m   *cow.Map[K, []V]
}

// NewListState declares a list state named name on s (see NewValueState).
func NewListState[K comparable, V any](s *KeyedScope[K], name string) *ListState[K, V] {
	t := newTable[K, []V](s.ctx, name, s.hash)
	*s.tables = append(*s.tables, t)
	return &ListState[K, V]{cur: s.cur, m: t.m}
}

// Get returns the current key's list. It must not be modified.
func (l *ListState[K, V]) Get() []V {
	v, _ := l.m.GetHashed(l.cur.hash, l.cur.key)
	return v
}

// Add appends v to the current key's list.
func (l *ListState[K, V]) Add(v V) {
	p, err := l.m.UpsertHashed(l.cur.hash, l.cur.key)
	if err != nil {
		panic(err)
	}
	// NB: appending never changes the elements a snapshot's copy of the
	// slice header can see, so the list is safe under copy-on-write.
	*p = append(*p, v)
}

// Update replaces the current key's list with a copy of vs.
func (l *ListState[K, V]) Update(vs []V) {
	if err := l.m.PutHashed(l.cur.hash, l.cur.key, append([]V(nil), vs...)); err != nil {
		panic(err)
	}
}

// Clear removes the current key's list.
func (l *ListState[K, V]) Clear() { l.m.DeleteHashed(l.cur.hash, l.cur.key) }

type keyTimer[K comparable] struct {
	ts   int64
	key  K
	hash uint64
}

// Process runs a ProcessFunc per key.
type Process[K comparable, T, O any] struct {
	Base
	keys   KeyFuncs[K, T]
	fn     ProcessFunc[K, T, O]
	next   Input[O]
	cur    KeyedContext[K]
	event  timerQueue[keyTimer[K]]
	proc   timerQueue[keyTimer[K]]
	tables []stateTable
	// timers mirror the timer queues in keyed state, so checkpoints hold
	// them: [EventTime] and [ProcessingTime].
	timers [2]*keyedTable[keyTimer[K], bool]
	out    Collector[O]
	sides  sideOutputs
	klist  []K
	hashes []uint64 // the batch's key hashes: carried, or in own
	own    []uint64
	// carried holds the key hashes the Hash edge brought with the batch
	// being pushed (PushHashed), else nil.
	carried []uint64
}

// NewProcess returns a keyed process operator feeding next.
func NewProcess[K comparable, T, O any](keys KeyFuncs[K, T], fn ProcessFunc[K, T, O], next Input[O]) *Process[K, T, O] {
	p := &Process[K, T, O]{keys: keys, fn: fn, next: next}
	p.cur.op = p
	p.cur.wm = MinWatermark
	return p
}

// Open implements Operator.
func (p *Process[K, T, O]) Open(ctx *Context) (err error) {
	p.Ctx = ctx
	defer recoverTo(ctx, &err)
	maxP := ctx.MaxParallelism
	th := func(t keyTimer[K]) uint64 { return cow.SubKeyHash(t.hash, uint64(t.ts), maxP) }
	p.timers[EventTime] = newTable[keyTimer[K], bool](ctx, "event-timers", th)
	p.timers[ProcessingTime] = newTable[keyTimer[K], bool](ctx, "processing-timers", th)
	p.tables = []stateTable{p.timers[EventTime], p.timers[ProcessingTime]}
	p.sides = newSideOutputs(ctx)
	p.cur.sides, p.cur.ctx = &p.sides, ctx
	return p.fn.Open(&KeyedScope[K]{ctx: ctx, hash: p.keys.Hash, cur: &p.cur, tables: &p.tables})
}

func (p *Process[K, T, O]) queue(d TimeDomain) *timerQueue[keyTimer[K]] {
	if d == ProcessingTime {
		return &p.proc
	}
	return &p.event
}

func (p *Process[K, T, O]) timer(ts int64, d TimeDomain, k K, h uint64, del bool) {
	t := keyTimer[K]{ts, k, h}
	th := cow.SubKeyHash(h, uint64(ts), p.Ctx.MaxParallelism)
	if del {
		p.queue(d).delete(t)
		p.timers[d].m.DeleteHashed(th, t)
		return
	}
	if p.queue(d).add(ts, t) {
		*upsert(p.Ctx, p.timers[d].m, th, t) = true
	}
}

// SnapshotState implements Checkpointed.
func (p *Process[K, T, O]) SnapshotState(id uint64) (StateSnapshot, error) {
	return snapshotTables(id, p.tables)
}

// RestoreState implements Checkpointed: it loads every state and the
// timers.
func (p *Process[K, T, O]) RestoreState(r StateReader) error {
	for _, t := range p.tables {
		if err := t.restore(r); err != nil {
			return err
		}
	}
	for d, tt := range p.timers {
		kgs := tt.m.KeyGroups()
		for kg := kgs.Start; kg < kgs.End; kg++ {
			for t := range tt.m.All(kg) {
				p.queue(TimeDomain(d)).add(t.ts, t)
			}
		}
	}
	return nil
}

// NotifyComplete implements CheckpointListener.
// The function is told after its state.
func (p *Process[K, T, O]) NotifyComplete(id uint64) error {
	for _, t := range p.tables {
		t.complete(id)
	}
	defer Guard(p.Ctx)
	if l, ok := p.fn.(CheckpointListener); ok {
		return l.NotifyComplete(id)
	}
	return nil
}

// NotifyAborted implements CheckpointListener.
func (p *Process[K, T, O]) NotifyAborted(id uint64) {
	defer Guard(p.Ctx)
	if l, ok := p.fn.(CheckpointListener); ok {
		l.NotifyAborted(id)
	}
}

// PushHashed implements HashedInput.
func (p *Process[K, T, O]) PushHashed(recs []T, ts []int64, hashes []uint64) {
	p.carried = hashes
	p.Push(recs, ts)
	p.carried = nil
}

// TimerHolder is an operator with timers that user code registers (and
// that are not the operator's own bookkeeping, as a window's are: those all
// fire at the last watermark, and no record after it opens a window). A
// loop whose body holds one ends only once none is pending (see LoopHead).
type TimerHolder interface {
	// PendingTimers returns the number of timers registered and not
	// fired, and when the earliest processing-time one is due (zero: none
	// is).
	PendingTimers() (n int, due time.Time)
}

var _ TimerHolder = (*Process[int, int, int])(nil)

// PendingTimers implements TimerHolder.
func (p *Process[K, T, O]) PendingTimers() (int, time.Time) {
	return p.event.len() + p.proc.len(), p.Deadline()
}

// Push implements Input.
func (p *Process[K, T, O]) Push(recs []T, ts []int64) {
	defer Guard(p.Ctx)
	p.hashes = hashKeys(p.keys, recs, p.carried, &p.klist, &p.own)
	p.out.reset(ts != nil)
	for i := range recs {
		p.cur.key, p.cur.hash = p.klist[i], p.hashes[i]
		if ts != nil {
			p.cur.ts, p.out.now = ts[i], ts[i]
		}
		if err := p.fn.Process(&p.cur, recs[i], &p.out); err != nil {
			Fail(p.Ctx, err)
		}
	}
	p.out.flush(p.next)
	p.sides.flush()
	p.fireAfterEnd()
}

// fireAfterEnd fires the event-time timers registered once the watermark
// was the last (MaxWatermark). A timer behind the watermark fires at the
// next one, as in Flink; after the last there is none, and records still
// come after it inside a loop (and downstream of one): the batch that
// registered them is their watermark.
func (p *Process[K, T, O]) fireAfterEnd() {
	if p.cur.wm == MaxWatermark && p.event.len() > 0 && !NoLoopTimerWait {
		p.fireTimers(&p.event, MaxWatermark, EventTime)
	}
}

// Watermark implements Operator: event-time timers up to wm fire.
func (p *Process[K, T, O]) Watermark(wm int64) {
	defer Guard(p.Ctx)
	p.cur.wm = wm
	p.fireTimers(&p.event, wm, EventTime)
}

// Tick implements Ticker: processing-time timers up to now fire.
func (p *Process[K, T, O]) Tick(now time.Time) {
	if p.proc.len() == 0 {
		return
	}
	defer Guard(p.Ctx)
	p.fireTimers(&p.proc, now.UnixMilli(), ProcessingTime)
	p.fireAfterEnd() // those the processing-time timers registered
}

// Deadline implements Ticker.
func (p *Process[K, T, O]) Deadline() time.Time {
	if ts, ok := p.proc.next(); ok {
		return time.UnixMilli(ts)
	}
	return time.Time{}
}

func (p *Process[K, T, O]) fireTimers(q *timerQueue[keyTimer[K]], upTo int64, d TimeDomain) {
	p.out.reset(p.Ctx.Timed)
	for {
		ts, t, ok := q.pop(upTo)
		if !ok {
			break
		}
		p.timers[d].m.DeleteHashed(cow.SubKeyHash(t.hash, uint64(t.ts), p.Ctx.MaxParallelism), t)
		p.cur.key, p.cur.hash, p.cur.ts, p.out.now = t.key, t.hash, ts, ts
		if err := p.fn.OnTimer(&p.cur, ts, d, &p.out); err != nil {
			Fail(p.Ctx, fmt.Errorf("timer at %d: %w", ts, err))
		}
	}
	p.out.flush(p.next)
	p.sides.flush()
}
