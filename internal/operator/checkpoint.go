package operator

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/align"
	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/ring"
	"github.com/ringflow/ringflow/sched"
)

// Coordinator is the job's checkpoint coordinator as a task sees it. Its
// methods are called on the task's thread and must not block.
type Coordinator interface {
	// Snapshotted hands over the task's part of a checkpoint: the frozen
	// state of each operator, to be written in the background.
	Snapshotted(t *Task, r *SnapshotReport)
	// Declined says the task could not take its part of checkpoint id.
	Declined(t *Task, id uint64, err error)
	// SourceFinished says a source task has read all its input; it waits
	// for the final checkpoint before it ends its output.
	SourceFinished(t *Task)
}

// SnapshotReport is one task's part of one checkpoint.
type SnapshotReport struct {
	ID    uint64
	Parts []OperatorSnapshot
	// Timing of the synchronous part, and the aligner's statistics (zero
	// for source tasks).
	SyncDuration time.Duration
	// SyncCPU is the part of SyncDuration the task's thread was on its
	// core; the rest it waited, preempted by another thread, asleep in
	// the kernel, or (under a hypervisor that reports steal time) with
	// its vCPU taken by the host. A part of a few microseconds can read 0.
	SyncCPU time.Duration
	// SyncCause says where the synchronous part's time went when it took
	// longer than Checkpoints.StallBound (a sched.Stall's Cause); "" when
	// it did not.
	SyncCause string
	Align     align.Stats
	// Unaligned checkpoints: recorded in-flight data of input channels (by
	// InputKey) and of output rings (by OutputKey, from the gate).
	Channels     map[int][]byte
	Outputs      map[int][]byte
	TriggerTime  time.Time
	SnapshotTime time.Time
	// ForwardTime is when the task sent the barrier on to its outputs
	// (zero for a task without outputs).
	ForwardTime time.Time
	// LoopRecords is, for a loop's head, the number of records its log
	// of the checkpoint holds: those in transit on the back edge at the
	// cut (see LoopHead). None, at a final checkpoint, says the loop was
	// quiescent.
	LoopRecords int
	// LoopTimers is, for a loop's head, the number of timers the loop's
	// body held pending at its snapshots of the checkpoint, and
	// LoopTimersDue when the earliest processing-time one of them is due
	// (zero: none is). A final checkpoint finds the loop quiescent only if
	// both LoopRecords and LoopTimers are zero (see LoopHead).
	LoopTimers    int
	LoopTimersDue time.Time
	// Seen and Done are, by input channel, when its barrier was first
	// seen and when the channel was done with the checkpoint, in Unix
	// nanoseconds (align.Aligner.ChannelTimes); nil for sources.
	Seen, Done []int64

	posBuf []byte // room for a source's position, allocated with the report
	// homes are where the buffers of Channels go back on Release.
	homes []bufHome
}

// bufHome is a recorded channel's buffer and the channel that reuses it.
type bufHome struct {
	buf  []byte
	home *atomic.Pointer[[]byte]
}

// OperatorSnapshot is the frozen state of one operator instance.
type OperatorSnapshot struct {
	Operator string
	Subtask  int
	State    StateSnapshot // nil if the operator has no state
	Position []byte        // a source's position; nil otherwise
}

// Release releases every part.
func (r *SnapshotReport) Release() {
	for _, p := range r.Parts {
		if p.State != nil {
			p.State.Release()
		}
	}
	for i, h := range r.homes {
		b := h.buf[:0]
		h.home.Store(&b)
		r.homes[i] = bufHome{}
	}
	r.homes = r.homes[:0]
}

// Checkpoints connects a task to checkpointing. A nil *Checkpoints means
// checkpoints are off.
type Checkpoints struct {
	Coord   Coordinator
	Aligner *align.Aligner // input tasks only
	Waker   interface{ Wake() }
	// Unaligned says every checkpoint is unaligned from the start;
	// MayUnalign that checkpoints may become unaligned (an alignment
	// timeout, or Unaligned): sources then send barriers ahead of output
	// waiting for room.
	Unaligned, MayUnalign bool
	// Raise runs the synchronous part of each snapshot with the thread in
	// the real-time class (affinity.Raise), so that preemption does not
	// stretch it.
	Raise bool
	// StallBound, if positive, is the time over which a synchronous part
	// is recorded with where its time went (sched.Explain), in its report
	// (SyncCause) and with Stalls.
	StallBound time.Duration
	Stalls     interface{ RecordStall(sched.Stall) }
	probe      *sched.Probe

	mail struct {
		sync.Mutex
		msgs []message
	}
	hasMail atomic.Bool

	snap      *SnapshotReport // taken, not yet complete
	next      *SnapshotReport // allocated ahead for the next snapshot
	last      uint64          // id of the last snapshot taken
	final     uint64          // a source's final checkpoint, once triggered
	completed uint64          // highest checkpoint known complete
	// stopping says a source took a stop checkpoint's trigger: it reads
	// no more (TriggerStop); stopped that the task was told to end
	// (Task.Stop).
	stopping, stopped bool
	// syncStep is the task's step that took the last synchronous part
	// (of checkpoint syncID, taking syncTook), for stall notes.
	syncStep   int64
	syncID     uint64
	syncTook   time.Duration
	srcDone    bool // a source task has read all input
	reportedEO bool
}

type msgKind int

const (
	msgTrigger msgKind = iota
	msgComplete
	msgAbort
	msgStop
	msgNotFinal
)

type message struct {
	kind    msgKind
	id      uint64
	trigger time.Time
	trig    TriggerKind
}

// TriggerKind is what a checkpoint is for, as its sources are told.
type TriggerKind uint8

const (
	// TriggerPeriodic is a periodic checkpoint: aligned or unaligned as
	// the job's settings say.
	TriggerPeriodic TriggerKind = iota
	// TriggerSavepoint is a checkpoint taken for a savepoint: its barrier
	// is of kind ring.Savepoint, aligned everywhere whatever the
	// settings, so that it holds no in-flight data; the job goes on.
	TriggerSavepoint
	// TriggerStop is a savepoint's barrier after which the sources read
	// nothing more: the job is stopping, and ends (Task.Stop) once the
	// checkpoint completed, with nothing after it in flight.
	TriggerStop
	// TriggerFinal is the final checkpoint of sources that read all
	// their input: aligned, and a source ends its output once it
	// completes.
	TriggerFinal
)

func (c *Checkpoints) post(m message) {
	c.mail.Lock()
	c.mail.msgs = append(c.mail.msgs, m)
	c.mail.Unlock()
	c.hasMail.Store(true)
	c.Waker.Wake()
}

// Trigger asks a source task to take checkpoint id, of the given kind.
func (t *Task) Trigger(id uint64, at time.Time, kind TriggerKind) {
	t.Checkpoints.post(message{kind: msgTrigger, id: id, trigger: at, trig: kind})
}

// Complete tells the task that checkpoint id is complete.
func (t *Task) Complete(id uint64) { t.Checkpoints.post(message{kind: msgComplete, id: id}) }

// NotFinal tells a source task that its final checkpoint id, which
// completes, did not end the job: a loop was not quiescent at it, and
// another final checkpoint follows. Posted before Complete(id).
func (t *Task) NotFinal(id uint64) { t.Checkpoints.post(message{kind: msgNotFinal, id: id}) }

// Abort tells the task that checkpoint id was aborted.
func (t *Task) Abort(id uint64) { t.Checkpoints.post(message{kind: msgAbort, id: id}) }

// Stop tells the task to end, once it has handled the messages posted
// before: its step returns sched.Done without ending its operators' input
// (no window or timer fires, nothing is sent on). A job stops its tasks so
// after a stop checkpoint (TriggerStop) completed and every task was told
// (Complete), so that what the checkpoint covers is committed and nothing
// is in flight after it. What an operator emits after its part of that
// checkpoint is dropped: it belongs to no checkpoint, and the run that
// resumes from the checkpoint emits it again.
func (t *Task) Stop() { t.Checkpoints.post(message{kind: msgStop}) }

// handleMail runs the coordinator's messages on the task's thread.
func (t *Task) handleMail(now time.Time) error {
	c := t.Checkpoints
	c.hasMail.Store(false)
	c.mail.Lock()
	msgs := c.mail.msgs
	c.mail.msgs = nil
	c.mail.Unlock()
	for _, m := range msgs {
		var err error
		switch m.kind {
		case msgTrigger:
			err = t.sourceCheckpoint(m, now)
		case msgComplete:
			err = t.notifyComplete(m.id)
		case msgAbort:
			err = t.notifyAborted(m.id, now)
		case msgStop:
			c.stopped = true
		case msgNotFinal:
			if c.final == m.id {
				c.final = 0
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sourceCheckpoint takes a source task's part of a checkpoint and sends the
// barrier downstream: the source's position and the chain's state are
// those after every record already emitted, and the barrier follows them.
func (t *Task) sourceCheckpoint(m message, now time.Time) error {
	if err := t.snapshot(m.id, m.trigger); err != nil {
		return err
	}
	r := t.Checkpoints.snap
	t.Checkpoints.snap = nil
	b := ring.Barrier{ID: m.id, Trigger: m.trigger, Kind: ring.Aligned}
	switch {
	case m.trig != TriggerPeriodic:
		// Nothing may be in flight when the last output commits, nor in a
		// savepoint, which a changed job may restore: the final, stop and
		// savepoint checkpoints are aligned everywhere.
		b.Kind = ring.Savepoint
		t.forward(b)
	case t.Checkpoints.MayUnalign && t.Gate != nil && r != nil:
		// A barrier must not wait behind output that waits for room: it
		// goes first, and that output is part of the checkpoint. Kind
		// unaligned (from the start) makes receivers switch at once; an
		// aligned barrier lets them align until their timeout.
		r.Outputs = t.Gate.SnapshotOutputs()
		if t.Checkpoints.Unaligned {
			b.Kind = ring.Unaligned
		}
		t.Gate.BarrierFirst(b)
	default:
		t.forward(b)
	}
	if r != nil && t.Gate != nil {
		r.ForwardTime = time.Now()
	}
	if r != nil {
		t.Checkpoints.Coord.Snapshotted(t, r)
	}
	switch m.trig {
	case TriggerFinal:
		// END follows once this checkpoint completes; if it fails, the
		// coordinator triggers another final one.
		t.Checkpoints.final = m.id
	case TriggerStop:
		// The source's position is the checkpoint's: it reads no more
		// until the task is stopped (if the checkpoint fails, the
		// coordinator triggers another stop checkpoint).
		t.Checkpoints.stopping = true
		t.sourceDue = time.Time{} // no deadline: nothing is due any more
	}
	t.flushAll()
	t.prepareReport()
	return nil
}

// snapshot takes the synchronous part of checkpoint id: the source's
// position and every operator's frozen state, in chain order.
func (t *Task) snapshot(id uint64, trigger time.Time) error {
	if t.Checkpoints.Raise {
		defer affinity.Raise().Lower()
	}
	var before sched.Counters
	if c := t.Checkpoints; c.StallBound > 0 {
		if c.probe == nil {
			c.probe = sched.NewProbe()
		}
		c.probe.Read(&before)
	}
	start, cpu := time.Now(), affinity.ThreadCPU()
	r := t.Checkpoints.next
	t.Checkpoints.next = nil
	if r == nil {
		r = t.newReport()
	}
	r.ID, r.TriggerTime, r.SnapshotTime = id, trigger, start
	if t.Source != nil {
		r.Parts = append(r.Parts, OperatorSnapshot{Operator: t.Ctx.Operator, Subtask: t.Ctx.Subtask,
			Position: append(r.posBuf[:0], t.Source.PositionFor(id)...)})
	}
	for i, op := range t.Ops {
		cp, ok := op.(Checkpointed)
		if !ok {
			continue
		}
		s, err := cp.SnapshotState(id)
		if err != nil {
			r.Release()
			t.Checkpoints.Coord.Declined(t, id, fmt.Errorf("operator %q subtask %d: %w",
				t.Ctxs[i].Operator, t.Ctxs[i].Subtask, err))
			return nil
		}
		r.Parts = append(r.Parts, OperatorSnapshot{Operator: t.Ctxs[i].Operator, Subtask: t.Ctxs[i].Subtask, State: s})
	}
	t.reportTimers(id)
	wall := time.Since(start)
	r.SyncDuration, r.SyncCPU = wall, min(max(affinity.ThreadCPU()-cpu, 0), wall)
	if c := t.Checkpoints; c.StallBound > 0 && wall > c.StallBound {
		r.SyncCause = t.syncStall(id, wall, before)
	}
	t.Checkpoints.syncStep, t.Checkpoints.syncID, t.Checkpoints.syncTook = t.steps, id, r.SyncDuration
	t.Checkpoints.snap = r
	t.Checkpoints.last = id
	return nil
}

// syncStall records that the synchronous part of checkpoint id took d,
// over the stall bound, with where its time went since the probe's
// reading before (taken as the part began); it returns the cause.
func (t *Task) syncStall(id uint64, d time.Duration, before sched.Counters) string {
	c := t.Checkpoints
	var after sched.Counters
	c.probe.Read(&after)
	s := sched.Explain(d, before, after)
	s.Task, s.Part = t.Name, fmt.Sprintf("synchronous part of checkpoint %d", id)
	if c.Stalls != nil {
		c.Stalls.RecordStall(s)
	}
	return s.Cause
}

// reportTimers tells the loops around the chain's operators (Context.Loops)
// of the timers they hold pending at checkpoint id. NB: the snapshot
// calls it before the barrier goes on, so that the loops' heads have
// every report once the markers that follow the barrier are back.
func (t *Task) reportTimers(id uint64) {
	for i, op := range t.Ops {
		loops := t.Ctxs[i].Loops
		th, ok := op.(TimerHolder)
		if len(loops) == 0 || !ok {
			continue
		}
		if n, due := th.PendingTimers(); n > 0 {
			for _, l := range loops {
				l.Timers(id, n, due)
			}
		}
	}
}

// newReport allocates an empty report with room for the task's parts.
func (t *Task) newReport() *SnapshotReport {
	n := 0
	if t.Source != nil {
		n++
	}
	for _, op := range t.Ops {
		if _, ok := op.(Checkpointed); ok {
			n++
		}
	}
	r := &SnapshotReport{Parts: make([]OperatorSnapshot, 0, n)}
	if t.Source != nil {
		r.posBuf = make([]byte, 0, positionRoom)
	}
	return r
}

// positionRoom is the size of a source position that fits a report's
// buffer without another allocation.
const positionRoom = 64

// prepareReport allocates the next snapshot's report now, off the barrier's
// path: the task calls it when it opens and after each snapshot it hands
// on. Allocating inside the synchronous part took tens of µs at times
// here (a fresh page of the Go heap costs a fault), and every µs of it
// holds the barrier back.
func (t *Task) prepareReport() {
	if c := t.Checkpoints; c != nil && c.next == nil {
		c.next = t.newReport()
	}
}

// forward writes a barrier into every output ring.
func (t *Task) forward(b ring.Barrier) {
	if t.Gate != nil {
		t.Gate.Barrier(b)
	}
}

func (t *Task) notifyComplete(id uint64) error {
	if l, ok := t.Source.(CheckpointListener); ok {
		if err := l.NotifyComplete(id); err != nil {
			return attribute(t.Ctx, fmt.Errorf("notify checkpoint %d complete: %w", id, err))
		}
	}
	for i, op := range t.Ops {
		if l, ok := op.(CheckpointListener); ok {
			if err := l.NotifyComplete(id); err != nil {
				return &Error{Operator: t.Ctxs[i].Operator, Subtask: t.Ctxs[i].Subtask,
					Err: fmt.Errorf("commit checkpoint %d: %w", id, err)}
			}
		}
	}
	c := t.Checkpoints
	c.completed = max(c.completed, id)
	if c.final != 0 && id >= c.final {
		t.finish() // a source's output ends after its final checkpoint
	}
	return nil
}

// InputKey numbers the channel state of an input channel by its edge and
// upstream subtask.
func InputKey(edge, upstream int) int { return edge<<16 | upstream }

// committed reports whether the last checkpoint the task took part in has
// completed: a finishing task waits for it, so that its output is committed.
func (c *Checkpoints) committed() bool { return c.completed >= c.last }

func (t *Task) notifyAborted(id uint64, now time.Time) error {
	c := t.Checkpoints
	if c.Aligner != nil {
		acts, err := c.Aligner.Step(align.Input{Type: align.InputAbort, Barrier: align.Barrier{ID: id}, NowNs: now.UnixNano()})
		if err != nil {
			return fmt.Errorf("abort checkpoint %d: %w", id, err)
		}
		if err := t.apply(acts, now); err != nil {
			return err
		}
	}
	if c.snap != nil && c.snap.ID == id {
		c.snap.Release()
		c.snap = nil
	}
	if l, ok := t.Source.(CheckpointListener); ok {
		l.NotifyAborted(id)
	}
	for _, op := range t.Ops {
		if l, ok := op.(CheckpointListener); ok {
			l.NotifyAborted(id)
		}
	}
	return nil
}

// onBarrier feeds a barrier read from channel c to the aligner. The clock
// is read here, not taken from the step: statistics time the barrier.
func (t *Task) onBarrier(c *Channel, b ring.Barrier, _ time.Time) error {
	now := time.Now()
	ab := align.Barrier{ID: b.ID, TriggerNs: b.Trigger.UnixNano(), Kind: align.Kind(b.Kind)}
	return t.step(align.Input{Type: align.InputBarrier, Channel: c.Index, Barrier: ab, NowNs: now.UnixNano()}, now)
}

func (t *Task) step(in align.Input, now time.Time) error {
	acts, err := t.Checkpoints.Aligner.Step(in)
	if err != nil {
		return fmt.Errorf("input channel %d: %w", in.Channel, err)
	}
	return t.apply(acts, now)
}

// apply carries out the aligner's actions, in order.
func (t *Task) apply(acts []align.Action, now time.Time) error {
	c := t.Checkpoints
	for _, a := range acts {
		switch a.Op {
		case align.OpBlock:
			t.Inputs[a.Channel].blocked = true
		case align.OpUnblock:
			t.Inputs[a.Channel].blocked = false
		case align.OpSnapshot:
			if err := t.snapshot(a.Barrier.ID, time.Unix(0, a.Barrier.TriggerNs)); err != nil {
				return err
			}
			if a.Unaligned && c.snap != nil && t.Gate != nil {
				c.snap.Outputs = t.Gate.SnapshotOutputs()
			}
		case align.OpForward:
			b := ring.Barrier{ID: a.Barrier.ID, Trigger: time.Unix(0, a.Barrier.TriggerNs),
				Kind: ring.BarrierKind(a.Barrier.Kind)}
			switch {
			case t.Gate == nil:
			case b.Kind == ring.Unaligned:
				t.Gate.BarrierFirst(b)
			default:
				t.Gate.Barrier(b)
			}
			if c.snap != nil && c.snap.ID == b.ID && t.Gate != nil {
				c.snap.ForwardTime = time.Now()
			}
		case align.OpRecord:
			ch := t.Inputs[a.Channel]
			ch.rec = &chanRecord{id: a.Barrier.ID, upTo: ch.Reader.Pos(), buf: ch.recordBuffer()}
			ch.scan = ch.Reader.Pos()
			if t.held == ch {
				// NB: the records of the frame a step stopped in that
				// are not pushed yet come after the snapshot: they are
				// channel state; the ones pushed are in the snapshot.
				n, payload := ch.dec.tail(nil, ch.done)
				ch.rec.buf = AppendChannelFrame(ch.rec.buf, n, payload)
			}
		case align.OpStopRecord:
			ch := t.Inputs[a.Channel]
			if ch.rec != nil && c.snap != nil && c.snap.ID == ch.rec.id && len(ch.rec.buf) > 0 {
				if c.snap.Channels == nil {
					c.snap.Channels = map[int][]byte{}
				}
				c.snap.Channels[InputKey(ch.Edge, ch.Upstream)] = ch.rec.buf
				c.snap.homes = append(c.snap.homes, bufHome{ch.rec.buf, &ch.spare})
			}
			ch.rec = nil
		case align.OpComplete:
			if c.snap != nil && c.snap.ID == a.Barrier.ID {
				c.snap.Align = a.Stats
				if seen, done, ok := c.Aligner.ChannelTimes(a.Barrier.ID); ok {
					c.snap.Seen = append(c.snap.Seen[:0], seen...)
					c.snap.Done = append(c.snap.Done[:0], done...)
				}
				if t.Loop == nil || !t.Loop.Hold(c.snap) {
					c.Coord.Snapshotted(t, c.snap)
				}
				c.snap = nil
			}
		case align.OpAbort:
			if c.snap != nil && c.snap.ID == a.Barrier.ID {
				c.snap.Release()
				c.snap = nil
			}
			for _, ch := range t.Inputs {
				if ch.rec != nil && ch.rec.id == a.Barrier.ID {
					ch.rec = nil
				}
			}
		case align.OpEndOfInput:
			t.finish()
		}
	}
	t.prepareReport()
	return nil
}
