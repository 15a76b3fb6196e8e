package operator

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ringflow/ringflow/align"
	"github.com/ringflow/ringflow/debloat"
	"github.com/ringflow/ringflow/ring"
	"github.com/ringflow/ringflow/sched"
)

// Task runs one subtask of a chain of operators: either a source and the
// operators chained to it, or input channels feeding the chain's head. It
// implements sched.Task.
type Task struct {
	Name   string
	Ctx    *Context   // context of the chain's head, for errors of the task itself
	Ops    []Operator // the chain after the source (all of it for input tasks), a gate last if output crosses rings
	Ctxs   []*Context // the context of each of Ops
	Source SourceDriver
	Inputs []*Channel
	Ports  []Port     // the gate's output rings
	Gate   OutputGate // the gate; nil if the chain ends in a sink
	Opts   TaskOptions
	// Checkpoints connects the task to the checkpoint coordinator; nil when
	// checkpoints are off.
	Checkpoints *Checkpoints
	// OnFail, if set, is called with the error of a step that fails the
	// task, before the step returns it: the job cancels its attempt's
	// context (Context.Attempt), so that user code blocked elsewhere
	// returns.
	OnFail func(error)
	// Loop is the chain's head when it is a loop's head: the task feeds
	// its fed-back records into the chain (see LoopDriver); loopRoom is
	// t.room, made once.
	Loop     LoopDriver
	loopRoom func() bool
	tickers  []Ticker
	idleWork []func() bool // the operators' (Context.idleWork)

	wm   int64 // watermark last passed down the chain
	idle bool  // outputs marked idle
	next int   // round-robin position among Inputs
	live int   // inputs not ended
	// held is the input whose DATA frame (Channel.cur) a step stopped in
	// part-way (see pushHeld); nil if none. cuts says steps may stop
	// part-way through a frame: the task's checkpoints may be unaligned.
	held      *Channel
	cuts      bool
	opened    bool
	finishing bool // END passed down the chain; waiting for the frames to drain
	dirtyAt   time.Time
	sourceDue time.Time
	steps     int64
	replayed  bool

	// The accounting of the task's time (see Metrics.BusyNs): the
	// counters of its operators, when its last step began and what the
	// task did from then on, and whether this step stopped for lack of
	// room downstream.
	accts     []*Metrics
	lastStep  time.Time
	lastState stepState
	blocked   bool

	// Buffer debloating (TaskOptions.Debloat): the controller of the
	// input rings' limits, when the task was opened, its time not idle
	// since (busy or backpressured), and the inputs' read positions.
	debloat  *debloat.Controller
	openedAt time.Time
	active   time.Duration
	consumed []uint64
}

// stepState is what a task did from one step to the next.
type stepState uint8

const (
	stepIdle stepState = iota
	stepBusy
	stepBackpressured
)

// account adds the time since the last step to the counter of what the
// task did meanwhile, for every operator of the chain.
func (t *Task) account(now time.Time) {
	// NB: now is the stepping worker's round start; a peer that steps the
	// task (its thread away) may have begun its round before the last
	// step: the clock never goes back.
	d := int64(now.Sub(t.lastStep))
	if d <= 0 {
		return
	}
	if !t.lastStep.IsZero() {
		if t.lastState != stepIdle {
			t.active += time.Duration(d)
		}
		for _, m := range t.accts {
			switch t.lastState {
			case stepBusy:
				m.BusyNs.Add(d)
			case stepBackpressured:
				m.BackpressuredNs.Add(d)
			default:
				m.IdleNs.Add(d)
			}
		}
	}
	t.lastStep = now
}

// openDebloat starts the controller of the input rings' limits, if
// TaskOptions.Debloat asks for one.
func (t *Task) openDebloat() error {
	if t.Opts.Debloat <= 0 || len(t.Inputs) == 0 {
		return nil
	}
	// NB: the rings are new, so each one's limit is its usable capacity.
	maxLimit := t.Inputs[0].Reader.Limit()
	for _, ch := range t.Inputs[1:] {
		maxLimit = min(maxLimit, ch.Reader.Limit())
	}
	// NB: started at Min, the rings do not fill before the first
	// measurement (see debloat.Config.Start).
	c, err := debloat.New(debloat.Config{Target: t.Opts.Debloat, Min: ring.MinLimit, Max: uint64(maxLimit),
		Start: ring.MinLimit}, len(t.Inputs))
	if err != nil {
		return err
	}
	t.debloat, t.openedAt, t.consumed = c, time.Now(), make([]uint64, len(t.Inputs))
	for i, ch := range t.Inputs {
		ch.Reader.SetLimit(int(c.Limit(i)))
	}
	return nil
}

// observeInputs feeds the debloat controller the task's time not idle and
// how far it has read each input, and sets the rings' limits when they
// change.
func (t *Task) observeInputs() {
	for i, ch := range t.Inputs {
		t.consumed[i] = ch.Reader.Pos()
	}
	// NB: lastStep, not now: account moves it forward only (see there).
	if !t.debloat.Observe(t.lastStep.Sub(t.openedAt), t.active, t.consumed) {
		return
	}
	for i, ch := range t.Inputs {
		ch.Reader.SetLimit(int(t.debloat.Limit(i)))
	}
}

// endState records what the step that returned st leaves the task doing.
func (t *Task) endState(st sched.Status) {
	switch {
	case st == sched.Progress || st == sched.Backlogged:
		t.lastState = stepBusy
	case t.blocked:
		t.lastState = stepBackpressured
	default:
		t.lastState = stepIdle
	}
}

// maxStep bounds the time one step of a task with inputs takes (checked
// every few frames, and between the pieces of a frame: see pushHeld).
const maxStep = time.Millisecond

// SourcePoll is how often a source that has nothing to read, and does not
// say when it will, is asked again.
const SourcePoll = time.Millisecond

// OutputGate is the part of a gate a task drives directly.
type OutputGate interface {
	Idle(wm int64)
	Barrier(b ring.Barrier)
	BarrierFirst(b ring.Barrier)
	SnapshotOutputs() map[int][]byte
	Replay(edge, target int, state []byte) error
}

// TaskOptions tune a task's batching.
type TaskOptions struct {
	// MaxDelay bounds how long a record may wait in a partly filled frame
	// while the task keeps finding input.
	MaxDelay time.Duration
	// Quantum is the number of input frames one Step handles at most.
	Quantum int
	// Debloat is the target time of buffer debloating: each input ring
	// holds at most what the task consumes from it in this much of its
	// busy time (package debloat); 0: off.
	Debloat time.Duration
}

var _ sched.Task = (*Task)(nil)

// Open opens every operator of the chain, head first.
func (t *Task) Open() error {
	// NB: its time is split from now: until its first step it is idle.
	t.lastStep = time.Now()
	t.wm = MinWatermark
	t.live = len(t.Inputs)
	if t.Opts.Quantum == 0 {
		t.Opts.Quantum = 16
	}
	if t.Source != nil {
		if err := t.Source.Open(t.Ctx); err != nil {
			return attribute(t.Ctx, err)
		}
	}
	for i, op := range t.Ops {
		if err := op.Open(t.Ctxs[i]); err != nil {
			return attribute(t.Ctxs[i], fmt.Errorf("open: %w", err))
		}
		if tk, ok := op.(Ticker); ok {
			t.tickers = append(t.tickers, tk)
		}
		t.idleWork = append(t.idleWork, t.Ctxs[i].idleWork...)
	}
	if err := t.openDebloat(); err != nil {
		return attribute(t.Ctx, err)
	}
	t.bindLoop()
	t.prepareReport()
	t.opened = true
	for _, c := range append([]*Context{t.Ctx}, t.Ctxs...) {
		if c != nil && c.Metrics != nil && !slices.Contains(t.accts, c.Metrics) {
			t.accts = append(t.accts, c.Metrics)
		}
	}
	return nil
}

// Close closes every operator, head first, and returns the first error.
func (t *Task) Close() error {
	// NB: the task's time is split up to now: after its last step it
	// stayed in the state that step left it in.
	t.account(time.Now())
	var errs []error
	if c := t.Checkpoints; c != nil && c.probe != nil {
		c.probe.Close()
	}
	if t.Source != nil {
		if err := t.Source.Close(); err != nil {
			errs = append(errs, attribute(t.Ctx, fmt.Errorf("close: %w", err)))
		}
	}
	for i, op := range t.Ops {
		if err := op.Close(); err != nil {
			errs = append(errs, attribute(t.Ctxs[i], fmt.Errorf("close: %w", err)))
		}
		for _, close := range t.Ctxs[i].closers {
			close()
		}
	}
	return errors.Join(errs...)
}

// attribute returns err as an *Error of ctx's operator instance, unless it
// already names one (a panic recovered further down the chain).
func attribute(ctx *Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Operator: ctx.Operator, Subtask: ctx.Subtask, Err: err}
}

// Step implements sched.Task.
func (t *Task) Step(now time.Time) (st sched.Status, err error) {
	defer t.recover(&st, &err)
	t.account(now)
	if t.debloat != nil {
		t.observeInputs()
	}
	t.blocked = false
	t.steps++
	if t.Checkpoints != nil && t.Checkpoints.hasMail.Load() {
		if err := t.handleMail(now); err != nil {
			return sched.Idle, err
		}
		if t.Checkpoints.stopped {
			return sched.Done, nil // see Stop
		}
	}
	if c := t.Checkpoints; c != nil && c.Aligner != nil {
		if err := t.checkpointChores(now); err != nil {
			return sched.Idle, err
		}
	}
	if !t.drain() {
		t.blocked = true
		return sched.Idle, nil
	}
	if t.finishing {
		t.flushAll()
		if t.Checkpoints != nil && !t.Checkpoints.committed() {
			return sched.Idle, nil // the final checkpoint commits the output
		}
		return sched.Done, nil
	}
	for _, tk := range t.tickers {
		tk.Tick(now)
	}
	if t.Source != nil {
		return t.stepSource(now)
	}
	return t.stepInputs(now)
}

// recover turns a panic raised by the runtime on behalf of the task (not by
// an operator, which raises *Error itself), and an error the step returns,
// into an *Error naming the head.
func (t *Task) recover(st *sched.Status, errp *error) {
	t.endState(*st)
	defer func() {
		if *errp != nil && t.OnFail != nil {
			t.OnFail(*errp)
		}
	}()
	r := recover()
	if r == nil {
		if *errp != nil {
			*errp = attribute(t.Ctx, *errp)
		}
		return
	}
	if e, ok := r.(*Error); ok {
		*errp = e
		return
	}
	err, ok := r.(error)
	if !ok {
		panic(r)
	}
	*errp = &Error{Operator: t.Ctx.Operator, Subtask: t.Ctx.Subtask, Err: err}
}

// drain writes frames that waited for room and reports whether all went.
func (t *Task) drain() bool {
	ok := true
	for _, p := range t.Ports {
		ok = p.Drain() && ok
	}
	return ok
}

// room reports whether every output can take a full frame.
func (t *Task) room() bool {
	for _, p := range t.Ports {
		if !p.Room() {
			return false
		}
	}
	return true
}

func (t *Task) stepSource(now time.Time) (sched.Status, error) {
	if c := t.Checkpoints; c != nil && (c.srcDone || c.stopping) {
		// Waiting for the final checkpoint's trigger, or, stopping, to
		// be stopped. NB: what drain wrote (the last records and the
		// barrier, if they waited for room) is published here: nothing
		// else will publish it.
		t.flushAll()
		return sched.Idle, nil
	}
	if !t.sourceDue.IsZero() && now.Before(t.sourceDue) {
		return t.idleStatus(), nil
	}
	if !t.room() {
		t.blocked = true
		t.flushAll()
		return sched.Idle, nil
	}
	n, err := t.Source.Read(now, t.batchBound())
	t.sourceDue = time.Time{}
	if n > 0 {
		t.markDirty(now)
	}
	wm, idle := t.Source.EventTime(now)
	t.advance(wm, idle)
	if errors.Is(err, io.EOF) {
		if c := t.Checkpoints; c != nil {
			// Output ends only after the final checkpoint, so that
			// everything emitted is committed; event time ends before
			// it, so that what the last windows and timers emit is in it.
			t.advance(MaxWatermark, false)
			c.srcDone = true
			t.flushAll()
			c.Coord.SourceFinished(t)
			return sched.Progress, nil
		}
		t.finish()
		return sched.Progress, nil
	}
	if n == 0 {
		// Nothing now: ask again when a paced source says, or poll.
		if t.sourceDue = t.Source.NextReady(); t.sourceDue.IsZero() {
			t.sourceDue = now.Add(SourcePoll)
		}
		t.flushAll() // records should not wait for more that is not coming
		return t.idleStatus(), nil
	}
	if due := t.Source.NextReady(); !due.IsZero() && due.After(now) {
		// A paced source has produced all that is due: its input has run
		// dry, so its records go now rather than after the next poll.
		t.sourceDue = due
		t.flushAll()
		return sched.Progress, nil
	}
	// More is due than one read takes, or the source is not paced: it is
	// ahead of this worker.
	t.publish(now)
	return sched.Backlogged, nil
}

// batchBound returns the most records a source should read at once, 0 for
// its batch size: with debloating, what the smallest of its output rings
// holds within its limit. NB: a source partitions each batch among its
// rings; a batch larger than a limit waits in Go memory for its ring's
// consumer, and the source reads nothing more until it has gone, however
// empty its other rings run (a slow sink's rings of ~6 KB behind 32 KB
// batches: 10% less throughput on a skewed job).
func (t *Task) batchBound() int {
	if t.Opts.Debloat <= 0 {
		return 0
	}
	bound := 0
	for _, p := range t.Ports {
		if n := p.Fits(); n > 0 && (bound == 0 || n < bound) {
			bound = n
		}
	}
	return bound
}

func (t *Task) stepInputs(now time.Time) (sched.Status, error) {
	handled, dry := 0, false
	var start time.Time // when the step began to push a frame it may cut; see pushHeld
	for handled < t.Opts.Quantum {
		if lp := t.Loop; lp != nil && t.held == nil {
			fed := lp.Pump(t.loopRoom)
			if fed > 0 {
				t.markDirty(now)
				handled++
			}
			if lp.Backlogged() {
				if fed == 0 || !t.drain() {
					t.blocked = fed > 0 || !t.room()
					break
				}
				continue
			}
		}
		if t.held == nil {
			c, f, err := t.nextFrame()
			if err != nil {
				return sched.Idle, err
			}
			if c == nil {
				dry = true
				break
			}
			if err := t.handle(c, f, now); err != nil {
				return sched.Idle, err
			}
			if t.held == nil {
				c.Reader.Release(f)
			}
		}
		if t.held != nil && !t.pushHeld(now, &start) {
			break // the step's time ran out part-way through a frame
		}
		handled++
		if t.finishing {
			break
		}
		if !t.drain() {
			t.blocked = true
			break
		}
		// A step is short in time too, so that barriers, coordinator
		// messages and timeouts are looked at often behind slow operators.
		// NB: now is when the worker's round began, and other tasks' steps
		// may have used it up: only every few frames, so that this task
		// still makes headway in a long round.
		if !start.IsZero() && time.Since(start) > maxStep || handled%4 == 0 && time.Since(now) > maxStep {
			break
		}
	}
	if dry {
		t.flushAll()
	} else {
		t.publish(now)
	}
	if handled == 0 && t.held == nil {
		return t.idleStatus(), nil
	}
	if !dry {
		return sched.Backlogged, nil // the step's budget ran out first
	}
	return sched.Progress, nil
}

// firstPiece is how many records of a DATA frame a step pushes before it
// first looks at the time; each later piece of the same frame is twice as
// large. A frame of fast records goes in a few pieces, and one of at most
// firstPiece records in one, without a look at the clock; one whose
// records take tens of microseconds each (a slow sink) is cut after about
// maxStep, so that a barrier behind it, a checkpoint's unaligned snapshot
// or the worker's other tasks do not wait for the whole frame.
const firstPiece = 16

// pushHeld pushes the records of the DATA frame the task holds, in pieces,
// until all are pushed (it then releases the frame and reports true) or
// the step has spent maxStep since *start (the frame stays held, and the
// next step goes on with it before reading anything else). *start is set
// when the step first pushes a frame of more than firstPiece records left.
//
// Only a task whose checkpoints may be unaligned cuts its frames: there a
// barrier is taken before the data in front of it, and its snapshot
// should not wait for the rest of a frame; an aligned barrier waits for
// that data anyway. Others push a frame whole, as one piece: cut steps
// also make more, shorter rounds, and at light load, after a barrier,
// the load review reads those as load and wakes a resting worker.
func (t *Task) pushHeld(now time.Time, start *time.Time) bool {
	c := t.held
	n := c.cur.Count
	if !t.cuts {
		c.dec.push(c.done, n)
		t.Ctx.Metrics.RecordsIn.Add(int64(n - c.done))
		return t.releaseHeld(now)
	}
	if n-c.done > firstPiece && start.IsZero() {
		*start = time.Now()
	}
	piece := firstPiece
	for c.done < n {
		to := min(c.done+piece, n)
		c.dec.push(c.done, to)
		t.Ctx.Metrics.RecordsIn.Add(int64(to - c.done))
		c.done = to
		if c.done < n && time.Since(*start) > maxStep {
			t.Ctx.Metrics.StepsCut.Add(1)
			t.markDirty(now)
			return false
		}
		piece *= 2
	}
	return t.releaseHeld(now)
}

// releaseHeld lets go of the frame the task held, all of it pushed.
func (t *Task) releaseHeld(now time.Time) bool {
	c := t.held
	c.dec.close()
	c.Reader.Release(c.cur)
	c.cur, c.done, t.held = ring.Frame{}, 0, nil
	t.markDirty(now)
	return true
}

// idleStatus is the status of a step that found no records: it does a
// piece of the operators' idle work, if they have any, and reports
// Progress if it did, so that the worker steps the task again rather than
// idling while there is more. The pieces are the page copies the first
// writes after a checkpoint would otherwise make, and the completion of the
// pages those writes copied only in part (cow.Map.CopyAhead): made in time
// the task had no records, they do not delay the records that would have
// made them, nor the records queued behind those.
func (t *Task) idleStatus() sched.Status {
	for _, work := range t.idleWork {
		if work() {
			return sched.Progress
		}
	}
	return sched.Idle
}

// nextFrame returns the next frame of the next input that has one, taking
// inputs in turn so that none starves.
func (t *Task) nextFrame() (*Channel, ring.Frame, error) {
	n := len(t.Inputs)
	for k := 0; k < n; k++ {
		i := t.next + k
		if i >= n {
			i -= n
		}
		c := t.Inputs[i]
		if c.ended || c.blocked {
			continue
		}
		f, err := c.Reader.Next()
		if err == ring.ErrEmpty {
			continue
		}
		if err != nil {
			return nil, f, fmt.Errorf("input channel %d: %w", c.Index, err)
		}
		t.next = i + 1
		if t.next == n {
			t.next = 0
		}
		return c, f, nil
	}
	return nil, ring.Frame{}, nil
}

func (t *Task) handle(c *Channel, f ring.Frame, now time.Time) error {
	switch f.Type {
	case ring.FrameData:
		c.record(f)
		n, err := c.dec.open(f)
		if err != nil {
			return fmt.Errorf("input channel %d: %w", c.Index, err)
		}
		if n > 0 {
			// Pushed by pushHeld, in pieces.
			c.cur, c.done, t.held = f, 0, c
		}
	case ring.FrameWatermark:
		c.wm, c.idle = max(c.wm, f.Watermark()), f.Idle()
		t.combineWatermarks()
	case ring.FrameEnd:
		c.ended = true
		t.live--
		if t.live > 0 {
			t.combineWatermarks()
		}
		if t.Checkpoints != nil {
			return t.step(align.Input{Type: align.InputEnd, Channel: c.Index, NowNs: now.UnixNano()}, now)
		}
		if t.live == 0 {
			t.finish()
		}
	case ring.FrameBarrier:
		if t.Checkpoints == nil {
			return fmt.Errorf("input channel %d: checkpoint barrier %d, but checkpoints are not enabled",
				c.Index, f.Barrier().ID)
		}
		return t.onBarrier(c, f.Barrier(), now)
	}
	return nil
}

// combineWatermarks passes down the minimum watermark of the inputs that are
// neither ended nor idle; if every live input is idle, the output is idle.
func (t *Task) combineWatermarks() {
	wm, active := int64(MaxWatermark), false
	for _, c := range t.Inputs {
		if !c.ended && !c.idle {
			wm, active = min(wm, c.wm), true
		}
	}
	if !active {
		t.advance(t.wm, true)
		return
	}
	t.advance(wm, false)
}

// advance passes watermark wm down the chain if it moved, and marks the
// output idle or active as idle says.
func (t *Task) advance(wm int64, idle bool) {
	if wm > t.wm {
		t.wm = wm
		for _, op := range t.Ops {
			op.Watermark(wm)
		}
		for _, m := range t.accts {
			m.Watermark.Store(wm)
		}
		t.idle = false
	}
	if idle != t.idle {
		t.idle = idle
		if idle && t.Gate != nil {
			t.Gate.Idle(t.wm)
		}
		if idle {
			// NB: a chain with no output of its own (it ends in a sink)
			// tells operators that pass idleness on elsewhere.
			for _, op := range t.Ops {
				if l, ok := op.(IdleListener); ok {
					l.Idle(t.wm)
				}
			}
		}
	}
}

// IdleListener is an operator that passes its input's idleness on by
// itself: the sink that writes a distributed job's repartition topic.
// Idle says the input is idle at watermark wm; it is active again with
// the next record or watermark.
type IdleListener interface {
	Idle(wm int64)
}

// finish ends the chain: every window and timer fires, then END goes out.
func (t *Task) finish() {
	if t.finishing {
		return
	}
	t.advance(MaxWatermark, false)
	for _, op := range t.Ops {
		op.End()
	}
	t.finishing = true
	t.flushAll()
}

func (t *Task) markDirty(now time.Time) {
	if t.dirtyAt.IsZero() {
		t.dirtyAt = now
	}
}

// flushAll closes every partly filled frame and publishes.
func (t *Task) flushAll() {
	for _, p := range t.Ports {
		p.Flush()
	}
	t.dirtyAt = time.Time{}
}

// publish publishes full frames, and partly filled ones too once the oldest
// record in them has waited MaxDelay.
func (t *Task) publish(now time.Time) {
	if !t.dirtyAt.IsZero() && now.Sub(t.dirtyAt) >= t.Opts.MaxDelay {
		t.flushAll()
		return
	}
	for _, p := range t.Ports {
		p.Publish()
	}
}

// PrepareToPark implements sched.Task.
func (t *Task) PrepareToPark() bool {
	if t.held != nil && t.room() {
		return false // a frame a step stopped in has records left
	}
	// NB: the worker clears its doorbell before asking; a message posted
	// before that is seen here, one posted after rings the doorbell again.
	if t.Checkpoints != nil && t.Checkpoints.hasMail.Load() {
		return false
	}
	if t.Loop != nil && t.Loop.Pending() && t.room() {
		return false // fed-back records wait
	}
	for i, p := range t.Ports {
		if !p.Room() {
			// Blocked on output: wait for room, not for input.
			if !p.PrepareToPark() {
				t.unparkPorts(i)
				return false
			}
		}
	}
	if t.Source != nil || t.finishing {
		return true // waits for a deadline or for the coordinator's mail
	}
	for i, c := range t.Inputs {
		if c.ended || c.blocked {
			continue
		}
		if !c.Reader.PrepareToPark() {
			t.unparkInputs(i)
			t.unparkPorts(len(t.Ports))
			return false
		}
	}
	return true
}

func (t *Task) unparkPorts(n int) {
	for _, p := range t.Ports[:n] {
		p.Unpark()
	}
}

func (t *Task) unparkInputs(n int) {
	for _, c := range t.Inputs[:n] {
		c.Reader.Unpark()
	}
}

// Unpark implements sched.Task.
func (t *Task) Unpark() {
	t.unparkPorts(len(t.Ports))
	t.unparkInputs(len(t.Inputs))
}

// Ready implements sched.Readier: whether a Step now would find work. It
// changes nothing, and costs a load per input ring and output port.
func (t *Task) Ready(now time.Time) bool {
	if t.Checkpoints != nil && t.Checkpoints.hasMail.Load() {
		return true
	}
	if d := t.Deadline(); !d.IsZero() && !now.Before(d) {
		return true
	}
	if t.finishing || !t.room() {
		return false
	}
	if t.held != nil || t.Loop != nil && t.Loop.Pending() {
		return true
	}
	if t.Source != nil {
		// An unpaced source always has records; a paced one said when
		// (its due time is part of the deadline above).
		return t.sourceDue.IsZero() && (t.Checkpoints == nil || !t.Checkpoints.srcDone && !t.Checkpoints.stopping)
	}
	for _, c := range t.Inputs {
		if !c.ended && !c.blocked && c.Reader.Ready() {
			return true
		}
	}
	return false
}

// Deadline implements sched.Task.
func (t *Task) Deadline() time.Time {
	d := t.sourceDue
	if c := t.Checkpoints; c != nil && c.Aligner != nil {
		if ns, ok := c.Aligner.Deadline(); ok {
			if ad := time.Unix(0, ns); d.IsZero() || ad.Before(d) {
				d = ad
			}
		}
	}
	for _, tk := range t.tickers {
		if td := tk.Deadline(); !td.IsZero() && (d.IsZero() || td.Before(d)) {
			d = td
		}
	}
	return d
}

// bindLoop connects a loop's head to the task, if the chain's head is
// one.
func (t *Task) bindLoop() {
	if len(t.Ops) == 0 || t.Checkpoints == nil {
		return
	}
	lp, ok := t.Ops[0].(LoopDriver)
	if !ok {
		return
	}
	t.Loop, t.loopRoom = lp, t.room
	lp.Bind(t.Checkpoints.Waker, func(r *SnapshotReport) { t.Checkpoints.Coord.Snapshotted(t, r) })
}

// checkpointChores runs before a task with inputs reads anything: restored
// channel state is replayed first; the aligner's clock ticks; and, when
// checkpoints may be unaligned, barriers are looked for ahead of the read
// positions.
func (t *Task) checkpointChores(now time.Time) error {
	a := t.Checkpoints.Aligner
	if !t.replayed {
		t.replayed = true
		t.cuts = a.Config().AlignmentTimeout >= 0
		if err := t.replay(); err != nil {
			return err
		}
	}
	if ns, ok := a.Deadline(); ok && now.UnixNano() >= ns {
		if err := t.step(align.Input{Type: align.InputTick, NowNs: now.UnixNano()}, now); err != nil {
			return err
		}
	}
	if a.Config().AlignmentTimeout >= 0 {
		return t.scanBarriers(now)
	}
	return nil
}
