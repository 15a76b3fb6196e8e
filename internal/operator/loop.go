package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/internal/invariants"
)

// An iteration's back edge, and how its checkpoints log it.
//
// A loop is a head and a tail. The head (LoopHead) is the first operator
// of its task: it passes the loop's forward input down its chain and feeds
// the records fed back into the same chain. The tail (LoopTail) is a sink
// at the end of the body. The back edge from the tails to the heads is not
// a ring but a queue in Go memory per (head subtask, tail subtask), under
// the head's lock: a tail appends a batch and never waits, so the loop
// cannot deadlock on its own backpressure (a ring on the back edge would:
// a head blocked on its full output stops reading the back edge, whose
// ring fills and blocks the tail, which blocks the body, which blocks the
// head).
//
// The queue is bounded by the head, not by the tail: while the records
// waiting at the head exceed LoopBacklogMax the head reads no forward
// input, and it feeds back records only while its output has room. What
// can wait at the head is then what the loop itself held when the head
// stopped admitting input — the body's rings and its operators' partial
// frames — times what one round of the body emits per record, plus
// LoopBacklogMax.
//
// Checkpoints follow the asynchronous barrier snapshot algorithm for cyclic
// graphs (Carbone et al. 2015). The head aligns the barrier of checkpoint
// n on its forward inputs only, snapshots, and sends the barrier into the
// body; the tail, on its own snapshot for n, appends a marker n to every
// head's queue. From its snapshot until marker n from every tail subtask,
// the head logs each record it takes from a tail's queue before that
// tail's marker: those are the records in transit on the back edge at the
// cut. The log is the head's state for n (subtask state "loop-log"); the
// head hands its part of n to the coordinator only once every marker came
// back. On restore the log is fed into the loop before any new input.
//
//	forward ─► [head] ─► body ─► [tail]
//	              ▲                 │  records, then marker n
//	              └──── queue ◄─────┘
//	   snapshot n ─ log every record taken ─ marker n from all tails: done
//
// A marker that reaches the head before its own snapshot (the barrier came
// into the body by another path) holds that tail's queue until the head
// has snapshotted: what follows it is after the tail's cut.
//
// The head also says how many records its log for n holds
// (SnapshotReport.LoopRecords), and how many timers the body's subtasks
// held pending at their snapshots of n (SnapshotReport.LoopTimers). A
// body subtask — one whose operator is on a path from the head to the
// tail (Context.Loops) — tells the loop's LoopProbe of its timers at its
// snapshot, before it sends the barrier on; every such subtask is
// upstream of some tail subtask, whose marker comes after that, so the
// head reads the sum once its log is complete, when every marker is back.
//
// A final checkpoint whose heads logged nothing and found no timer
// pending finds every loop quiescent: the sources had ended before it, so
// nothing entered after it; every record that was in the body when the
// barrier passed reached the head before the marker — and would have been
// logged; and no operator of the body held a timer that could emit later.
// Nothing can happen in the body any more: an operator emits only on a
// record or a timer. Otherwise the coordinator keeps the checkpoint as an
// ordinary one and takes another final checkpoint: at once if records were
// going round (the probe then waits one round of the loop), or when the
// earliest pending processing-time timer is due if only timers were
// pending (SnapshotReport.LoopTimersDue).
//
//	log of final n    timers pending at n    verdict
//	──────────────    ───────────────────    ─────────────────────────────
//	empty             none                   quiescent: the job ends
//	records           any                    busy: probe again at once
//	empty             some                   waiting: probe again when due
//
// Event-time timers cannot stay pending at a final checkpoint: the
// sources send the last watermark (MaxWatermark) before it, which fires
// them, and a keyed operator fires a timer registered once its watermark
// is the last as soon as the batch that registered it is processed (see
// Process). Processing-time timers of the body are waited for: they fire
// when the wall clock reaches them, and what they feed back goes round
// like any record. So a body whose operator always holds a processing-time
// timer keeps its job running, as an unbounded source does.

// LoopVerdict is what a final checkpoint says of a job's loops (see the
// table above).
type LoopVerdict uint8

const (
	// LoopQuiescent: nothing can happen in the loops any more; the job
	// ends with the checkpoint.
	LoopQuiescent LoopVerdict = iota
	// LoopBusy: records were going round; another final checkpoint
	// follows at once.
	LoopBusy
	// LoopWaiting: nothing was going round, but timers of a body were
	// pending; another final checkpoint follows once the earliest is due.
	LoopWaiting
)

// JudgeLoops returns the verdict of a final checkpoint whose heads logged
// records in transit and found timers pending in their bodies, in all.
func JudgeLoops(records, timers int) LoopVerdict {
	switch {
	case records > 0:
		return LoopBusy
	case timers > 0:
		return LoopWaiting
	}
	return LoopQuiescent
}

func (v LoopVerdict) String() string {
	switch v {
	case LoopQuiescent:
		return "quiescent"
	case LoopBusy:
		return "busy"
	case LoopWaiting:
		return "waiting for timers"
	}
	return fmt.Sprintf("LoopVerdict(%d)", uint8(v))
}

// LoopBacklogMax is the number of fed-back records waiting at a head above
// which the head reads no forward input: a few frames' worth, so that the
// loop drains what it holds before it takes more in, while forward input
// still flows when the loop is light.
const LoopBacklogMax = 4096

// loopLogState names the head's log in a checkpoint.
const loopLogState = "loop-log"

// Loop is the back edge of one iteration for one attempt of a job: it
// joins every tail subtask to every head subtask.
type Loop[T any] struct {
	codec Codec[T]
	tails int
	heads []*LoopHead[T]
	probe *LoopProbe
}

// NewLoop returns the back edge of a loop with the given number of head
// and tail subtasks, whose records the codec encodes into the log, and
// whose body reports its timers to probe.
func NewLoop[T any](codec Codec[T], heads, tails int, probe *LoopProbe) *Loop[T] {
	return &Loop[T]{codec: codec, tails: tails, heads: make([]*LoopHead[T], heads), probe: probe}
}

// LoopBody is a loop as an operator of its body sees it (Context.Loops).
type LoopBody interface {
	// Timers says that a subtask of the body held n > 0 timers pending at
	// its snapshot of checkpoint id, the earliest processing-time one due
	// at due (zero: none is of processing time). It is called on the
	// subtask's thread, before the subtask sends the barrier on.
	Timers(id uint64, n int, due time.Time)
}

// LoopProbe gathers, by checkpoint, the timers that the subtasks of a
// loop's body held pending at their snapshots of it, for the loop's heads
// to read once their logs of it are complete. One serves a loop for the
// whole job: checkpoint ids are never reused across its attempts.
type LoopProbe struct {
	mu struct {
		sync.Mutex
		pending map[uint64]probeTimers // checkpoints with timers pending
		// done is, by head subtask, the last checkpoint whose log the head
		// completed: logs complete in order, so a checkpoint no later
		// than every head's is read by all.
		done []uint64
	}
}

// probeTimers is what a loop's body held pending at one checkpoint.
type probeTimers struct {
	n   int
	due time.Time // the earliest processing-time timer; zero: none
}

var _ LoopBody = (*LoopProbe)(nil)

// NewLoopProbe returns the probe of a loop with the given number of head
// subtasks.
func NewLoopProbe(heads int) *LoopProbe {
	p := &LoopProbe{}
	p.mu.pending = map[uint64]probeTimers{}
	p.mu.done = make([]uint64, heads)
	return p
}

// Timers implements LoopBody.
func (p *LoopProbe) Timers(id uint64, n int, due time.Time) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.mu.pending[id]
	t.n += n
	if !due.IsZero() && (t.due.IsZero() || due.Before(t.due)) {
		t.due = due
	}
	p.mu.pending[id] = t
}

// take returns the timers of checkpoint id, whose log head subtask i has
// completed, and forgets what every head has read.
func (p *LoopProbe) take(i int, id uint64) probeTimers {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.mu.pending[id]
	p.mu.done[i] = max(p.mu.done[i], id)
	floor := slices.Min(p.mu.done)
	for k := range p.mu.pending {
		if k <= floor {
			delete(p.mu.pending, k)
		}
	}
	return t
}

// drop forgets the timers of an aborted checkpoint. NB: a body subtask
// may still report for it afterwards; take forgets that entry once every
// head has completed a later log.
func (p *LoopProbe) drop(id uint64) {
	p.mu.Lock()
	delete(p.mu.pending, id)
	p.mu.Unlock()
}

// loopEntry is a batch of fed-back records, or a tail's marker for a
// checkpoint (marker > 0, no records).
type loopEntry[T any] struct {
	recs   []T
	ts     []int64
	marker uint64
}

// LoopDriver is a loop's head as its task drives it. Its methods run on
// the task's thread.
type LoopDriver interface {
	// Bind gives the head what wakes its task and what hands a complete
	// part of a checkpoint to the coordinator.
	Bind(waker interface{ Wake() }, release func(*SnapshotReport))
	// Pump feeds waiting records into the chain while room says the output
	// has room, and returns how many it fed.
	Pump(room func() bool) int
	// Pending reports whether Pump would find work.
	Pending() bool
	// Backlogged reports whether the head should read no forward input.
	Backlogged() bool
	// Hold takes the task's report of a checkpoint until the head's log
	// of it is complete; false: the report may go now.
	Hold(r *SnapshotReport) bool
}

// loopLog is a head's log for one checkpoint.
type loopLog struct {
	id      uint64
	buf     []byte          // the records logged, encoded (appendEntry)
	n       int             // how many
	open    []bool          // by tail subtask: its marker has not come
	waiting int             // tails whose marker has not come
	report  *SnapshotReport // held until the log is complete
}

// LoopHead is one subtask of a loop's head.
type LoopHead[T any] struct {
	loop *Loop[T]
	ctx  *Context
	down Input[T]

	mu struct {
		sync.Mutex
		queues [][]loopEntry[T] // by tail subtask
	}
	offered atomic.Bool // something was offered since the last take

	// The task's thread only.
	waker   interface{ Wake() }
	release func(*SnapshotReport)
	local   [][]loopEntry[T] // taken from mu.queues, by tail subtask
	backlog int              // records in local
	replay  []loopEntry[T]   // restored log, fed before anything else
	snapID  uint64           // the last checkpoint the head snapshotted
	aborted uint64           // the highest checkpoint aborted
	logs    []*loopLog
}

var (
	_ Operator     = (*LoopHead[int])(nil)
	_ Checkpointed = (*LoopHead[int])(nil)
	_ LoopDriver   = (*LoopHead[int])(nil)
	_ Checkpointed = (*LoopTail[int])(nil)
)

// Head makes head subtask i, feeding down.
func (l *Loop[T]) Head(ctx *Context, down Input[T]) *LoopHead[T] {
	h := &LoopHead[T]{loop: l, ctx: ctx, down: down, local: make([][]loopEntry[T], l.tails)}
	h.mu.queues = make([][]loopEntry[T], l.tails)
	l.heads[ctx.Subtask] = h
	return h
}

// Push implements Input: the forward input goes down the chain.
func (h *LoopHead[T]) Push(recs []T, ts []int64) { h.down.Push(recs, ts) }

// Open implements Operator.
func (h *LoopHead[T]) Open(ctx *Context) error {
	return ctx.Declare(loopLogState, "loop log of "+reflect.TypeFor[T]().String())
}

func (h *LoopHead[T]) Watermark(int64) {}
func (h *LoopHead[T]) End()            {}
func (h *LoopHead[T]) Close() error    { return nil }

// Bind implements LoopDriver.
func (h *LoopHead[T]) Bind(waker interface{ Wake() }, release func(*SnapshotReport)) {
	h.waker, h.release = waker, release
}

// offer appends e to tail k's queue and wakes the head's task.
func (h *LoopHead[T]) offer(k int, e loopEntry[T]) {
	h.mu.Lock()
	h.mu.queues[k] = append(h.mu.queues[k], e)
	h.offered.Store(true)
	h.mu.Unlock()
	if h.waker != nil {
		h.waker.Wake()
	}
}

// take moves what the tails offered into local.
func (h *LoopHead[T]) take() {
	if !h.offered.Load() {
		return
	}
	h.mu.Lock()
	h.offered.Store(false)
	for k, q := range h.mu.queues {
		for _, e := range q {
			h.backlog += len(e.recs)
		}
		h.local[k] = append(h.local[k], q...)
		clear(q)
		h.mu.queues[k] = q[:0]
	}
	h.mu.Unlock()
}

// blocked reports whether tail k's queue waits for the head's snapshot.
func (h *LoopHead[T]) blocked(k int) bool {
	q := h.local[k]
	return len(q) > 0 && q[0].marker > h.snapID && q[0].marker > h.aborted
}

// Pending implements LoopDriver.
func (h *LoopHead[T]) Pending() bool {
	if h.offered.Load() || len(h.replay) > 0 {
		return true
	}
	for k := range h.local {
		if len(h.local[k]) > 0 && !h.blocked(k) {
			return true
		}
	}
	return false
}

// Backlogged implements LoopDriver.
func (h *LoopHead[T]) Backlogged() bool {
	if len(h.replay) > 0 {
		return true // the log goes in before new input
	}
	if h.backlog <= LoopBacklogMax {
		return false
	}
	for k := range h.local {
		if h.blocked(k) {
			// NB: what waits behind a marker waits for the barrier on
			// the forward input, which must be read.
			return false
		}
	}
	return true
}

// Pump implements LoopDriver.
func (h *LoopHead[T]) Pump(room func() bool) int {
	fed := 0
	for len(h.replay) > 0 && room() {
		e := h.replay[0]
		h.replay[0] = loopEntry[T]{}
		h.replay = h.replay[1:]
		h.down.Push(e.recs, e.ts)
		fed += len(e.recs)
	}
	if len(h.replay) > 0 {
		return fed
	}
	h.take()
	for k := range h.local {
		for len(h.local[k]) > 0 && !h.blocked(k) {
			e := h.local[k][0]
			if e.marker == 0 && !room() {
				return fed
			}
			h.local[k][0] = loopEntry[T]{}
			h.local[k] = h.local[k][1:]
			if e.marker != 0 {
				h.marker(k, e.marker)
				continue
			}
			h.log(k, e)
			h.backlog -= len(e.recs)
			if invariants.Enabled && h.backlog < 0 {
				panic(invariants.Failf("loop %s#%d: %d fed-back records waiting", h.ctx.Operator, h.ctx.Subtask, h.backlog))
			}
			h.down.Push(e.recs, e.ts)
			fed += len(e.recs)
		}
	}
	return fed
}

// log appends e to every log still open for tail k.
func (h *LoopHead[T]) log(k int, e loopEntry[T]) {
	for _, l := range h.logs {
		if l.open[k] {
			l.buf = h.appendEntry(l.buf, e)
			l.n += len(e.recs)
		}
	}
}

// appendEntry encodes e's records, each as its timestamp and its codec's
// bytes.
func (h *LoopHead[T]) appendEntry(buf []byte, e loopEntry[T]) []byte {
	for i := range e.recs {
		var ts int64
		if e.ts != nil {
			ts = e.ts[i]
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(ts))
		buf = h.loop.codec.Append(buf, &e.recs[i])
	}
	return buf
}

// marker closes tail k's part of every log up to checkpoint id, and hands
// on the logs it completes.
func (h *LoopHead[T]) marker(k int, id uint64) {
	for _, l := range slices.Clone(h.logs) {
		invariants.Check(l.id != id || l.open[k], "loop %s#%d: a second marker of checkpoint %d from tail %d",
			h.ctx.Operator, h.ctx.Subtask, id, k)
		if l.id <= id && l.open[k] {
			l.open[k] = false
			l.waiting--
		}
		if l.waiting == 0 && l.report != nil {
			r := l.report
			l.report = nil
			h.settle(l, r)
			h.release(r)
		}
	}
}

// settle fills in r what the complete log l says of the loop at its
// checkpoint — the records in transit and the timers pending in the body
// — and drops l.
func (h *LoopHead[T]) settle(l *loopLog, r *SnapshotReport) {
	t := h.loop.probe.take(h.ctx.Subtask, l.id)
	r.LoopRecords = l.n
	if !NoLoopTimerWait {
		r.LoopTimers, r.LoopTimersDue = t.n, t.due
	}
	h.drop(l)
}

// NoLoopTimerWait makes heads ignore the timers pending in their loops'
// bodies, and keyed operators leave the event-time timers registered
// after the last watermark unfired (see Process). Tests set it to show
// that their loops need both.
var NoLoopTimerWait bool

func (h *LoopHead[T]) drop(l *loopLog) {
	h.logs = slices.DeleteFunc(h.logs, func(x *loopLog) bool { return x == l })
}

// Hold implements LoopDriver.
func (h *LoopHead[T]) Hold(r *SnapshotReport) bool {
	for _, l := range h.logs {
		if l.id != r.ID {
			continue
		}
		if l.waiting > 0 {
			l.report = r
			return true
		}
		h.settle(l, r)
		return false
	}
	return false
}

// SnapshotState implements Checkpointed: it opens the log of checkpoint
// id, which the snapshot writes once complete. Restored records not fed
// yet are in transit: they go into the log at once.
func (h *LoopHead[T]) SnapshotState(id uint64) (StateSnapshot, error) {
	h.snapID = id
	l := &loopLog{id: id, open: make([]bool, h.loop.tails), waiting: h.loop.tails}
	for k := range l.open {
		l.open[k] = true
	}
	for _, e := range h.replay {
		l.buf = h.appendEntry(l.buf, e)
		l.n += len(e.recs)
	}
	h.logs = append(h.logs, l)
	return &loopSnapshot[T]{log: l, decode: h.decodeLog}, nil
}

// loopSnapshot writes a head's log once the head has handed it on.
type loopSnapshot[T any] struct {
	log    *loopLog
	decode func([]byte) (loopEntry[T], error) // the head's, to check what is written
}

func (s *loopSnapshot[T]) WriteTo(w StateWriter) error {
	// NB: the log is complete: the head appends nothing more to it.
	blob := binary.AppendUvarint(nil, uint64(s.log.n))
	blob = append(blob, s.log.buf...)
	if invariants.Enabled {
		e, err := s.decode(blob)
		invariants.Check(err == nil && len(e.recs) == s.log.n, "loop log of checkpoint %d: %d records written, %d read back (%v)",
			s.log.id, s.log.n, len(e.recs), err)
	}
	return w.PutSubtask(loopLogState, blob)
}

func (s *loopSnapshot[T]) Release() {}

// RestoreState implements Checkpointed: the logs of the old subtasks i
// with i % parallelism == this subtask are fed before any new input.
func (h *LoopHead[T]) RestoreState(r StateReader) error {
	for i, blob := range r.Subtask(loopLogState) {
		if i%h.ctx.Parallelism != h.ctx.Subtask || len(blob) == 0 {
			continue
		}
		e, err := h.decodeLog(blob)
		if err != nil {
			return fmt.Errorf("loop log of old subtask %d: %w", i, err)
		}
		if len(e.recs) > 0 && !NoLoopReplay {
			h.replay = append(h.replay, e)
		}
	}
	return nil
}

// NoLoopReplay drops restored loop logs instead of feeding them. Tests set
// it to show that their loops need the log.
var NoLoopReplay bool

func (h *LoopHead[T]) decodeLog(blob []byte) (loopEntry[T], error) {
	var e loopEntry[T]
	n, used := binary.Uvarint(blob)
	if used <= 0 {
		return e, errors.New("bad record count")
	}
	blob = blob[used:]
	if n > uint64(len(blob)/8) {
		return e, fmt.Errorf("%d records in %d bytes", n, len(blob))
	}
	e.recs, e.ts = make([]T, n), make([]int64, n)
	for i := range e.recs {
		if len(blob) < 8 {
			return e, fmt.Errorf("record %d of %d: truncated", i, n)
		}
		e.ts[i] = int64(binary.LittleEndian.Uint64(blob))
		m, err := h.loop.codec.Decode(blob[8:], &e.recs[i])
		if err != nil {
			return e, fmt.Errorf("record %d of %d: %w", i, n, err)
		}
		blob = blob[8+m:]
	}
	if len(blob) != 0 {
		return e, fmt.Errorf("%d bytes after %d records", len(blob), n)
	}
	if !h.ctx.Timed {
		e.ts = nil
	}
	return e, nil
}

// NotifyComplete implements CheckpointListener.
func (h *LoopHead[T]) NotifyComplete(uint64) error { return nil }

// NotifyAborted implements CheckpointListener: the log of id is dropped,
// and a marker for it no longer holds a queue.
func (h *LoopHead[T]) NotifyAborted(id uint64) {
	h.aborted = max(h.aborted, id)
	h.loop.probe.drop(id)
	for _, l := range h.logs {
		if l.id == id {
			if l.report != nil {
				l.report.Release()
			}
			h.drop(l)
			return
		}
	}
}

// LoopTail is one subtask of a loop's tail: it feeds what reaches it back
// to the heads, a batch to each in turn, and follows its snapshot with a
// marker to every head.
type LoopTail[T any] struct {
	loop *Loop[T]
	k    int
	next int
}

// Tail makes tail subtask k.
func (l *Loop[T]) Tail(k int) *LoopTail[T] { return &LoopTail[T]{loop: l, k: k} }

// Push implements Input. The batch is copied: it is the caller's again
// when Push returns.
func (t *LoopTail[T]) Push(recs []T, ts []int64) {
	if len(recs) == 0 {
		return
	}
	e := loopEntry[T]{recs: slices.Clone(recs)}
	if ts != nil {
		e.ts = slices.Clone(ts)
	}
	h := t.loop.heads[t.next%len(t.loop.heads)]
	t.next++
	h.offer(t.k, e)
}

func (t *LoopTail[T]) Open(*Context) error { return nil }
func (t *LoopTail[T]) Watermark(int64)     {}
func (t *LoopTail[T]) End()                {}
func (t *LoopTail[T]) Close() error        { return nil }

// SnapshotState implements Checkpointed: the marker of checkpoint id
// follows everything the tail fed back before its snapshot.
func (t *LoopTail[T]) SnapshotState(id uint64) (StateSnapshot, error) {
	for _, h := range t.loop.heads {
		h.offer(t.k, loopEntry[T]{marker: id})
	}
	return nil, nil
}

// RestoreState implements Checkpointed: the tail has no state.
func (t *LoopTail[T]) RestoreState(StateReader) error { return nil }
