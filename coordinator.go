package ringflow

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/sched"
	"github.com/ringflow/ringflow/snapshot"
)

// CheckpointStats describe one checkpoint.
type CheckpointStats struct {
	ID           uint64
	Trigger      time.Time
	Duration     time.Duration // trigger to completion (or failure)
	BytesWritten uint64
	BytesReused  uint64 // referenced from earlier checkpoints instead of written
	// Status is "completed", "failed: <why>", or "aborted: <why>" for a
	// checkpoint still in flight when its attempt ended (a task failed,
	// or the job stopped).
	Status string
	Final  bool // taken at the end of input
	// Stop says the checkpoint stopped the job (Job.Stop,
	// Job.StopWithSavepoint, Config.StopOnCancel); Savepoint that it was
	// taken for a savepoint (Job.Savepoint, Job.StopWithSavepoint). Both
	// are aligned whatever the settings.
	Stop, Savepoint bool
	// SavepointPath is the directory a completed checkpoint taken for a
	// savepoint is written out to, the one Job.Savepoint or
	// Job.StopWithSavepoint returns; "" for other checkpoints. It is
	// chosen as the checkpoint completes, and the savepoint is written
	// after (Config.Logger says when): if that fails, the caller gets the
	// error, and Job.Checkpoints lists the checkpoint without the path.
	SavepointPath string
	// Written is the time from the trigger until every subtask's part was
	// written; the rest of Duration is the commit (Prepare, then the sync
	// that makes the checkpoint durable).
	Written  time.Duration
	Subtasks []SubtaskCheckpointStats
}

// SubtaskCheckpointStats describe one task's part of a checkpoint, named by
// the head operator of its chain.
type SubtaskCheckpointStats struct {
	Operator   string
	Subtask    int
	StartDelay time.Duration // trigger to the first barrier seen (0 for sources)
	Alignment  time.Duration // first barrier read to snapshot
	Sync       time.Duration // synchronous part of the snapshot
	SyncCPU    time.Duration // of Sync, the time its thread was on its core
	Async      time.Duration // background write of the snapshot
	Bytes      uint64        // state bytes this subtask wrote
	Unaligned  bool
	// SyncCause, when Sync was longer than Config.StallBound, says where
	// its time went (a Stall's Cause: "preempted", "stolen", "gc pause",
	// ...; the part is also among Job.Stalls); "" otherwise.
	SyncCause string
	// InflightBytes is the in-flight data an unaligned snapshot persisted.
	InflightBytes uint64
	// LoopRecords is, for the head of an iteration (Iterate), the number
	// of records in transit on its back edge that its snapshot logged;
	// LoopTimers the number of timers the operators of the loop's body, all
	// their subtasks, held pending at their snapshots (each subtask of a
	// head reports the same count). A final checkpoint ends the job only
	// if both are zero at every head.
	LoopRecords, LoopTimers int
	// WaitedOn is the input channel whose barrier came last (the one the
	// subtask waited for longest); -1 for sources.
	WaitedOn int
	// The subtask's timeline, as offsets from the trigger: Snapshot is
	// when the synchronous part began (alignment ended), Forwarded when
	// the barrier left for the subtask's outputs (0 for a sink), Acked
	// when the part was written and acknowledged.
	Snapshot, Forwarded, Acked time.Duration
	// Inputs are the subtask's input channels, by index (as WaitedOn);
	// none for sources.
	Inputs []ChannelBarrierStats
}

// ChannelBarrierStats describe a checkpoint's barrier in one input channel
// of a subtask, as offsets from the trigger.
type ChannelBarrierStats struct {
	// From and FromSubtask name the upstream subtask by the head
	// operator of its chain, as SubtaskCheckpointStats do.
	From        string
	FromSubtask int
	// Arrived is when the subtask first saw the barrier: read, or found
	// ahead of its read position by an unaligned checkpoint. Done is when
	// the channel was done with the checkpoint: the barrier read (an
	// aligned channel is then blocked until the snapshot) or, for a channel
	// an unaligned snapshot recorded, reached by the recording. Both are
	// -1 when the channel ended before its barrier came.
	Arrived, Done time.Duration
	// InflightBytes is the channel's in-flight data the checkpoint
	// persisted (unaligned only).
	InflightBytes uint64
}

// Unaligned reports whether any subtask took its snapshot unaligned.
func (s CheckpointStats) Unaligned() bool {
	for _, st := range s.Subtasks {
		if st.Unaligned {
			return true
		}
	}
	return false
}

// PathStep is one subtask on a checkpoint's critical path and the input
// channel it waited on (-1 at a source).
type PathStep struct {
	Operator string
	Subtask  int
	Channel  int
}

// CriticalPath returns the chain of waits that decided when the
// checkpoint's parts were all written: from the subtask acknowledged last
// back along the channel each subtask's barrier came last on (WaitedOn) to
// a source, listed from the source. It is empty when the checkpoint has no
// subtask statistics (one that failed).
func (s CheckpointStats) CriticalPath() []PathStep {
	type key struct {
		op  string
		sub int
	}
	byKey := make(map[key]*SubtaskCheckpointStats, len(s.Subtasks))
	var last *SubtaskCheckpointStats
	for i := range s.Subtasks {
		st := &s.Subtasks[i]
		byKey[key{st.Operator, st.Subtask}] = st
		if last == nil || st.Acked > last.Acked {
			last = st
		}
	}
	var path []PathStep
	for st := last; st != nil && len(path) <= len(s.Subtasks); {
		step := PathStep{Operator: st.Operator, Subtask: st.Subtask, Channel: -1}
		var next *SubtaskCheckpointStats
		if c := st.WaitedOn; c >= 0 && c < len(st.Inputs) {
			step.Channel = c
			next = byKey[key{st.Inputs[c].From, st.Inputs[c].FromSubtask}]
		}
		path = append(path, step)
		st = next
	}
	slices.Reverse(path)
	return path
}

// Checkpoints returns the statistics of the checkpoints the job has
// finished, completed, failed or aborted, oldest first: the latest 1000
// of them (keptCheckpoints; Metrics and the Prometheus collector count
// and sum up all of them).
func (j *Job) Checkpoints() []CheckpointStats {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	return append([]CheckpointStats(nil), j.checkpoints...)
}

// forgetSavepoint takes path off the statistics of checkpoint id, whose
// savepoint could not be written there.
func (j *Job) forgetSavepoint(id uint64, path string) {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	for i := len(j.checkpoints) - 1; i >= 0; i-- {
		if c := &j.checkpoints[i]; c.ID == id && c.SavepointPath == path {
			c.SavepointPath = ""
			return
		}
	}
}

// keptCheckpoints is how many of its latest checkpoints a job keeps the
// statistics of: a job that runs for weeks takes a million checkpoints.
const keptCheckpoints = 1000

// checkpointSummary sums up every checkpoint a job recorded: its counts by
// outcome, the histograms of the completed ones' parts, the last completed
// one, and the highest id.
type checkpointSummary struct {
	completed, failed, aborted                   int
	duration, startDelay, alignment, sync, async histogram
	last                                         *CheckpointStats
	maxID                                        uint64
}

func (c *checkpointSummary) add(s *CheckpointStats) {
	c.maxID = max(c.maxID, s.ID)
	switch {
	case s.Status == "completed":
		c.completed++
	case strings.HasPrefix(s.Status, "aborted"):
		c.aborted++
		return
	default:
		c.failed++
		return
	}
	last := *s
	c.last = &last
	c.duration.observe(s.Duration)
	for _, st := range s.Subtasks {
		c.startDelay.observe(st.StartDelay)
		c.alignment.observe(st.Alignment)
		c.sync.observe(st.Sync)
		c.async.observe(st.Async)
	}
}

// checkpointSummary returns a copy of the job's checkpoint summary.
func (j *Job) checkpointSummary() checkpointSummary {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	c := j.ckSummary
	for _, h := range []*histogram{&c.duration, &c.startDelay, &c.alignment, &c.sync, &c.async} {
		h.counts = maps.Clone(h.counts)
	}
	if c.last != nil {
		last := *c.last
		c.last = &last
	}
	return c
}

// lastCheckpointID returns the highest id the job recorded, 0 if none.
func (j *Job) lastCheckpointID() uint64 {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	return j.ckSummary.maxID
}

func (j *Job) recordCheckpoint(s CheckpointStats) {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	if len(j.checkpoints) == keptCheckpoints {
		j.checkpoints = append(j.checkpoints[:0], j.checkpoints[1:]...)
	}
	j.checkpoints = append(j.checkpoints, s)
	j.ckSummary.add(&j.checkpoints[len(j.checkpoints)-1])
}

// coordinator triggers checkpoints at the sources, has the tasks' snapshots
// written to the store in the background, commits each checkpoint when
// every task's part is written, and tells the tasks.
//
// A task's part is written by its own worker, as background work in the
// worker's spare time (sched.Worker.Background): serializing frozen state
// is CPU work, and on a machine whose cores the pinned workers keep, any
// other thread doing it takes a worker's core for a kernel time slice while
// that worker's records wait. The commit (sstables, Pebble ingest, fsync)
// blocks on I/O, so it runs on the coordinator's writer goroutine, as do
// the writes of tasks without a worker.
type coordinator struct {
	job     *Job
	cfg     CheckpointConfig
	ident   identity // the job's, when the attempt began
	store   *snapshot.Store
	tasks   []*operator.Task
	sources []*operator.Task
	workers map[*operator.Task]*sched.Worker // nil entries: the writer goroutine writes
	fail    func(error)                      // stops the job with the error
	// wake asks resting workers to step their own tasks for a while
	// (sched.Pool.WakeFor).
	wake func(time.Duration)
	// at runs fn on a worker's thread at t (sched.Pool.At): the periodic
	// triggers go through it.
	at func(t time.Time, fn func(now time.Time) bool)
	// saturated reports whether the workers have less idle time than
	// background work is guaranteed (sched.Pool.Saturated), and offload
	// runs a function on the pool's own thread (sched.Pool.Offload); nil:
	// the writer goroutine commits.
	saturated func() bool
	offload   func(func(*sched.Slice))

	mu struct {
		sync.Mutex
		nextID   uint64
		inflight map[uint64]*inflight
		lastEnd  time.Time // when the last checkpoint ended, for MinPause
		// lastTrigger is when the last checkpoint was triggered.
		lastTrigger time.Time
		failures    int         // failed checkpoints in a row
		finished    int         // sources that read all their input
		final       uint64      // the final checkpoint, once triggered
		queue       []writeJob  // for the writer goroutine
		commits     []*inflight // written in full, to commit
		stopped     bool
		// probeAt is when the next final checkpoint may come, after one
		// found only timers pending in a loop's body (see probeLater).
		probeAt    time.Time
		probeTimer *time.Timer // pokes the trigger loop at probeAt
	}
	yield *cpuYielder   // used by the writer goroutine only
	work  chan struct{} // pokes the writer goroutine
	poke  chan struct{} // pokes the trigger loop
	done  chan struct{} // closed by stop
	wg    sync.WaitGroup
	syncs sync.WaitGroup // every part's BeforeCommit work still running
	// exports are the savepoints being written (see export).
	exports sync.WaitGroup
}

type inflight struct {
	id       uint64
	trigger  time.Time
	pending  *snapshot.Pending
	acks     int
	final    bool
	ops      map[string]int // store operator ids → parallelism, for the manifest
	subtasks []SubtaskCheckpointStats
	written  time.Time // when the last part was written
	timeout  *time.Timer
	// loopRecords are the records in transit on the loops' back edges
	// that their heads logged in the checkpoint, loopTimers the timers
	// they found pending in the loops' bodies (the earliest
	// processing-time one due at loopDue): with either, a final one did
	// not find the loops quiescent (operator.JudgeLoops), and notFinal
	// says that it was taken for an ordinary one (see commit).
	loopRecords, loopTimers int
	loopDue                 time.Time
	notFinal                bool
	// ended is set by whichever of commit, failed and stop reports the
	// checkpoint's end (EventListener), so that exactly one does.
	ended atomic.Bool
	// syncs counts the parts' BeforeCommit work still running; syncErr is
	// the first error it returned.
	syncs   sync.WaitGroup
	syncErr atomic.Pointer[error]

	// trig is what the checkpoint is for; savepoints are the requests it
	// serves (see control.take).
	trig       operator.TriggerKind
	savepoints []*savepointRequest
}

type writeJob struct {
	task   *operator.Task
	report *operator.SnapshotReport
}

func newCoordinator(j *Job, store *snapshot.Store, tasks []*operator.Task,
	workers map[*operator.Task]*sched.Worker, fail func(error)) *coordinator {
	c := &coordinator{job: j, cfg: j.cfg.Checkpoint, ident: j.identity, store: store, tasks: tasks, workers: workers, fail: fail,
		yield: newCPUYielder(),
		work:  make(chan struct{}, 1), poke: make(chan struct{}, 1), done: make(chan struct{})}
	for _, t := range tasks {
		if t.Source != nil {
			c.sources = append(c.sources, t)
		}
	}
	// NB: ids are never reused, also those of checkpoints an earlier
	// attempt aborted, which the store never saw committed: statistics,
	// events and the status page name checkpoints by id. Nor is the id
	// of the checkpoint the attempt restored, which, restored from a
	// savepoint (Config.RestoreFrom), the store has not seen: a table
	// restored from it offers to reuse its blobs, which must fail.
	c.mu.nextID = max(store.MaxID(), j.lastCheckpointID(), j.restored.Load()) + 1
	c.mu.inflight = map[uint64]*inflight{}
	c.mu.lastEnd = time.Now()
	c.mu.lastTrigger = c.mu.lastEnd // the first checkpoint comes one interval after the start
	return c
}

func (c *coordinator) start() {
	c.wg.Add(2)
	go c.triggerLoop()
	go c.writeLoop()
	signal(c.poke) // a savepoint or a stop may have been asked for already
}

// stop ends the coordinator's goroutines and aborts what is in flight,
// because of cause (nil: the job stopped without a failure).
func (c *coordinator) stop(cause error) {
	c.mu.Lock()
	c.mu.stopped = true
	if c.mu.probeTimer != nil {
		c.mu.probeTimer.Stop()
	}
	var aborted []*inflight
	for _, f := range c.mu.inflight {
		f.timeout.Stop()
		f.pending.Abort()
		aborted = append(aborted, f)
	}
	c.mu.inflight = nil
	for _, f := range aborted {
		failRequests(f.savepoints, f.id, fmt.Errorf("aborted: %w", cmp.Or(cause, ErrAborted)))
	}
	for _, w := range c.mu.queue {
		w.report.Release()
	}
	c.mu.queue, c.mu.commits = nil, nil
	c.mu.Unlock()
	// NB: poke and work are never closed: commits and failures signal them
	// from other goroutines, possibly after this point.
	close(c.done)
	c.wg.Wait()
	c.syncs.Wait()
	c.exports.Wait()
	// NB: after the writer goroutine has exited: a commit it was making
	// has reported its checkpoint completed by now.
	if cause == nil {
		cause = ErrAborted
	}
	slices.SortFunc(aborted, func(a, b *inflight) int { return cmp.Compare(a.id, b.id) })
	for _, f := range aborted {
		if f.ended.CompareAndSwap(false, true) {
			c.job.recordCheckpoint(CheckpointStats{ID: f.id, Trigger: f.trigger, Duration: time.Since(f.trigger),
				Status: "aborted: " + cause.Error(), Final: f.final, Stop: f.trig == operator.TriggerStop,
				Savepoint: len(f.savepoints) > 0})
			c.job.events.checkpointFailed(CheckpointFailedInfo{ID: f.id, Trigger: f.trigger, Final: f.final,
				Aborted: true, Err: cause})
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *coordinator) triggerLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.poke:
			c.maybeTrigger(time.Now())
		case <-tick.C:
			if c.job.paused.Load() {
				continue // Job.PauseCheckpoints: no wake, no trigger
			}
			// NB: the checkpoint is registered before the resting
			// workers are woken, while this goroutine's thread still has
			// a core to itself.
			c.triggerAt(time.Now().Add(sched.WakeLead))
			// A barrier's synchronous snapshots and the copy-on-write
			// after it are a burst of work on every subtask: resting
			// workers share it, woken a little before the trigger.
			c.wake(sched.WakeLead + sched.WakeBurst)
		}
	}
}

// maybeTrigger starts a checkpoint if the settings allow one now: the final
// one once every source has finished, otherwise a periodic one.
func (c *coordinator) maybeTrigger(now time.Time) {
	f := c.begin(now)
	if f == nil {
		return
	}
	c.mu.Lock()
	live := !c.mu.stopped && c.mu.inflight[f.id] == f
	if live {
		c.triggered(f)
	}
	c.mu.Unlock()
	if live {
		c.trigger(f, now)
	}
}

// triggered reports checkpoint f triggered; c.mu is held, so that the
// report comes before that of its end.
func (c *coordinator) triggered(f *inflight) {
	c.job.events.checkpointTriggered(CheckpointTriggeredInfo{ID: f.id, Trigger: f.trigger, Final: f.final})
}

// triggerAt starts a periodic checkpoint at time at, if the settings allow
// one then: it is registered now, and a worker triggers it at that time
// (c.at), so that no thread but the workers' has to run at the trigger.
// Its trigger time is when the worker posts it; its timeout runs from now.
func (c *coordinator) triggerAt(at time.Time) {
	f := c.begin(at)
	if f == nil {
		return
	}
	c.at(at, func(now time.Time) bool {
		// NB: TryLock: a worker must not park on a lock another goroutine
		// holds; it tries again at its next round.
		if !c.mu.TryLock() {
			return false
		}
		live := !c.mu.stopped && c.mu.inflight[f.id] == f
		if live {
			f.trigger, c.mu.lastTrigger = now, now
			c.triggered(f)
		}
		c.mu.Unlock()
		if live {
			c.trigger(f, now)
		}
		return true
	})
}

// trigger sends checkpoint f's trigger to every source. NB: outside c.mu,
// which a source's worker takes (Snapshotted) as soon as it has taken the
// trigger.
func (c *coordinator) trigger(f *inflight, now time.Time) {
	for _, t := range c.sources {
		t.Trigger(f.id, now, f.trig)
	}
}

// begin registers a checkpoint triggered at now, if the settings allow one
// then, and returns it; nil if they do not.
func (c *coordinator) begin(now time.Time) *inflight {
	var failedID uint64
	var failure error
	defer func() { c.logFailed(failedID, failure) }() // after the unlock below
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.stopped || c.mu.final != 0 {
		return nil
	}
	final := c.mu.finished == len(c.sources)
	trig := operator.TriggerFinal
	if !final {
		trig = c.job.ctl.wants() // a stop, a savepoint, or periodic
	}
	special := trig != operator.TriggerPeriodic
	switch {
	case final && now.Before(c.mu.probeAt):
		return nil // a timer of a loop's body is not due yet
	case special && len(c.mu.inflight) > 0:
		// The final checkpoint waits for the others to end; so do a stop
		// and a savepoint, which must be aligned.
		return nil
	case special:
	case c.job.paused.Load():
		return nil // Job.PauseCheckpoints holds periodic checkpoints back
	case len(c.mu.inflight) >= c.cfg.MaxConcurrent || now.Sub(c.mu.lastEnd) < c.cfg.MinPause:
		return nil
	case now.Sub(c.mu.lastTrigger) < c.cfg.Interval*9/10:
		return nil // a poke, not the interval: only a final checkpoint goes early
	}
	c.mu.lastTrigger = now
	id := c.mu.nextID
	c.mu.nextID++
	p, err := c.store.Begin(id)
	if err != nil {
		failedID, failure = id, fmt.Errorf("begin: %w", err)
		c.job.events.checkpointFailed(CheckpointFailedInfo{ID: id, Trigger: now, Final: final, Err: failure})
		c.failLocked(id, now, failure, final)
		return nil
	}
	f := &inflight{id: id, trigger: now, pending: p, final: final, trig: trig, ops: map[string]int{}}
	if special {
		f.savepoints = c.job.ctl.take(trig)
	}
	f.timeout = time.AfterFunc(c.cfg.Timeout, func() {
		c.failed(id, fmt.Errorf("timed out after %v", c.cfg.Timeout))
	})
	c.mu.inflight[id] = f
	if final || trig == operator.TriggerStop {
		c.mu.final = id
	}
	return f
}

// probeLater holds the next final checkpoint back until the earliest
// timer pending in a loop's body at f, the last one, is due: nothing went
// round the loops at f, so nothing happens in them before a timer fires,
// and a final checkpoint taken sooner would find the same. c.mu is held.
func (c *coordinator) probeLater(f *inflight, now time.Time) {
	at := now
	if !f.loopDue.IsZero() {
		at = f.loopDue
	}
	// NB: a timer due at t fires at its task's first step at or after t:
	// a probe at t itself would mostly find it still pending.
	at = at.Add(timerProbeSlack)
	c.mu.probeAt = at
	if c.mu.probeTimer != nil {
		c.mu.probeTimer.Stop()
	}
	c.mu.probeTimer = time.AfterFunc(at.Sub(now), func() { signal(c.poke) })
}

// timerProbeSlack is how long after a pending timer of a loop's body is
// due the next final checkpoint comes: about a step of the timer's task.
const timerProbeSlack = time.Millisecond

// Snapshotted implements operator.Coordinator: the report is written as
// background work of the task's worker, or else by the writer goroutine.
// Work of its parts that the commit waits for and that needs nothing of
// the write-out (operator.EarlyBeforeCommit: a sink's sync) starts here.
func (c *coordinator) Snapshotted(t *operator.Task, r *operator.SnapshotReport) {
	c.mu.Lock()
	f := c.mu.inflight[r.ID]
	if c.mu.stopped || f == nil {
		c.mu.Unlock()
		r.Release()
		return
	}
	c.mu.Unlock()
	for _, part := range r.Parts {
		if e, ok := part.State.(operator.EarlyBeforeCommit); ok {
			if fn := e.TakeBeforeCommit(); fn != nil {
				c.beforeCommit(f, fn)
			}
		}
	}
	job := writeJob{t, r}
	if w := c.workers[t]; w != nil && w.Background(func(s *sched.Slice) { c.writeInSlices(s, job) }) {
		return
	}
	c.mu.Lock()
	if c.mu.stopped {
		c.mu.Unlock()
		r.Release()
		return
	}
	c.mu.queue = append(c.mu.queue, job)
	c.mu.Unlock()
	signal(c.work)
}

// writeInSlices writes job as background work of its worker.
func (c *coordinator) writeInSlices(s *sched.Slice, job writeJob) {
	if !s.Pause() {
		job.report.Release() // the job is stopping
		return
	}
	c.mu.Lock()
	f := c.mu.inflight[job.report.ID]
	c.mu.Unlock()
	c.write(f, job, slicePauser{s})
}

// Declined implements operator.Coordinator.
func (c *coordinator) Declined(t *operator.Task, id uint64, err error) {
	c.failed(id, fmt.Errorf("task %s declined: %w", t.Name, err))
}

// SourceFinished implements operator.Coordinator.
func (c *coordinator) SourceFinished(*operator.Task) {
	c.mu.Lock()
	c.mu.finished++
	c.mu.Unlock()
	signal(c.poke)
}

func (c *coordinator) writeLoop() {
	defer c.wg.Done()
	// NB: the goroutine keeps its thread locked to the end, so the thread
	// exits with it and its policy never spreads to other goroutines.
	runtime.LockOSThread()
	// NB: the writer commits checkpoints (and writes the parts of tasks
	// that have no worker); processing never waits for it, so it runs as
	// a helper of the pool (sched.HelperNice, sched.HelperYield), and asks
	// for the kernel's shortest slice (affinity.ShortSlice), so that each
	// of a commit's wake-ups from the disk runs soon and briefly. While
	// the pool is saturated a commit runs on the pool's own thread
	// instead (see commitNow). An error leaves the thread at the default
	// niceness and slice; the workers then wait longer for its turns.
	affinity.SetPolicy(affinity.Policy{Nice: sched.HelperNice, Slice: affinity.ShortSlice})
	if testOnWriterThread != nil {
		testOnWriterThread()
	}
	for {
		select {
		case <-c.done:
			return
		case <-c.work:
		}
		for {
			c.mu.Lock()
			if c.mu.stopped {
				c.mu.Unlock()
				break
			}
			if len(c.mu.commits) > 0 {
				f := c.mu.commits[0]
				c.mu.commits = c.mu.commits[1:]
				c.mu.Unlock()
				c.commitNow(f)
				continue
			}
			if len(c.mu.queue) == 0 {
				c.mu.Unlock()
				break
			}
			w := c.mu.queue[0]
			c.mu.queue = c.mu.queue[1:]
			f := c.mu.inflight[w.report.ID]
			c.mu.Unlock()
			c.write(f, w, c.yield)
		}
	}
}

// cpuYielder makes the writer give its CPU back to whatever else is
// runnable on it, the pinned worker it displaced in particular, once it has
// run sched.HelperYield since it last did. The writer goroutine calls it through
// stateWriter.Pause (after each page of a key group it serializes) when it
// writes a task that has no worker; tasks run by a worker are written by
// that worker instead (see coordinator).
//
// NB: without it the kernel let the writer run until the next scheduler
// tick (4 ms at HZ=250) before the worker it displaced got its core back,
// whatever the writer's niceness or requested slice, and the records
// waiting in that worker's rings waited as long. Measured with dfbench
// keyed-count, 1M keys, 1M records/s, 1 s checkpoints: p99 latency ~1.1-1.5
// ms without yielding, ~0.3-0.4 ms with (~0.04 ms without checkpoints);
// a checkpoint then takes ~0.8 s instead of ~0.25 s.
type cpuYielder struct{ affinity.Yielder }

func newCPUYielder() *cpuYielder {
	return &cpuYielder{affinity.Yielder{Every: sched.HelperYield}}
}

// pauser is how a write offers its thread back between small pieces of
// work: the writer goroutine's cpuYielder, or a worker's slice.
type pauser interface {
	// pause returns an error if the write should be abandoned.
	pause() error
}

func (y *cpuYielder) pause() error {
	y.MaybeYield()
	return nil
}

// slicePauser pauses background work on a worker (sched.Slice.Pause).
type slicePauser struct{ s *sched.Slice }

func (p slicePauser) pause() error {
	if !p.s.Pause() {
		return errWorkerStopped
	}
	return nil
}

// errWorkerStopped abandons a write whose worker is exiting (the job is
// stopping or restarting; the checkpoint is aborted with it).
var errWorkerStopped = errors.New("worker stopped")

// write stores one task's part of a checkpoint and acknowledges it.
func (c *coordinator) write(f *inflight, w writeJob, p pauser) {
	defer w.report.Release()
	if f == nil {
		return // aborted meanwhile
	}
	start := time.Now()
	sw := &stateWriter{c: c, f: f, p: f.pending, pauser: p}
	for _, part := range w.report.Parts {
		sw.op, sw.sub = part.Operator, part.Subtask
		if err := c.writePart(sw, part); err != nil {
			if !errors.Is(err, errWorkerStopped) {
				c.failed(f.id, fmt.Errorf("write %s subtask %d: %w", part.Operator, part.Subtask, err))
			}
			return
		}
	}
	r := w.report
	inflight, err := c.writeChannels(sw, w.task, r)
	if err != nil {
		c.failed(f.id, fmt.Errorf("write channel state of %s: %w", w.task.Name, err))
		return
	}
	st := SubtaskCheckpointStats{Operator: w.task.Ctx.Operator, Subtask: w.task.Ctx.Subtask,
		Sync: r.SyncDuration, SyncCPU: r.SyncCPU, SyncCause: r.SyncCause, Async: time.Since(start), Bytes: sw.bytes, Unaligned: r.Align.Unaligned,
		InflightBytes: inflight, LoopRecords: r.LoopRecords, LoopTimers: r.LoopTimers}
	st.WaitedOn = -1
	if r.Align.ID != 0 {
		st.StartDelay = r.Align.StartDelay()
		st.Alignment = r.Align.Alignment()
		st.WaitedOn = r.Align.WaitedOn
	}
	c.timeline(&st, w.task, r)
	if r.LoopRecords > 0 || r.LoopTimers > 0 {
		c.mu.Lock()
		f.loopRecords += r.LoopRecords
		f.loopTimers += r.LoopTimers
		if d := r.LoopTimersDue; !d.IsZero() && (f.loopDue.IsZero() || d.Before(f.loopDue)) {
			f.loopDue = d
		}
		c.mu.Unlock()
	}
	c.ack(f, st, sw.ops, p)
}

// timeline fills in st's timeline from task t's report r.
func (c *coordinator) timeline(st *SubtaskCheckpointStats, t *operator.Task, r *operator.SnapshotReport) {
	since := func(ns int64) time.Duration {
		if ns == 0 {
			return -1
		}
		return time.Duration(ns - r.TriggerTime.UnixNano())
	}
	st.Snapshot = r.SnapshotTime.Sub(r.TriggerTime)
	if !r.ForwardTime.IsZero() {
		st.Forwarded = r.ForwardTime.Sub(r.TriggerTime)
	}
	if len(r.Seen) != len(t.Inputs) || len(r.Done) != len(t.Inputs) {
		return
	}
	st.Inputs = make([]ChannelBarrierStats, len(t.Inputs))
	for i, ch := range t.Inputs {
		st.Inputs[i] = ChannelBarrierStats{From: ch.From, FromSubtask: ch.Upstream,
			Arrived: since(r.Seen[i]), Done: since(r.Done[i]),
			InflightBytes: uint64(len(r.Channels[operator.InputKey(ch.Edge, ch.Upstream)]))}
	}
}

// outputChannelBase numbers the channel state of a task's output rings
// (operator.OutputKey) after its input channels' (operator.InputKey) in the
// store.
const outputChannelBase = 1 << 30

// writeChannels stores an unaligned snapshot's in-flight data under the
// task's head operator, and returns its size.
func (c *coordinator) writeChannels(sw *stateWriter, t *operator.Task, r *operator.SnapshotReport) (uint64, error) {
	op, sub := t.Ctx.Operator, t.Ctx.Subtask
	var n uint64
	for ch, data := range r.Channels {
		if err := sw.p.PutChannelState(op, sub, ch, data); err != nil {
			return n, err
		}
		n += uint64(len(data))
	}
	for k, data := range r.Outputs {
		if len(data) == 0 {
			continue
		}
		if err := sw.p.PutChannelState(op, sub, outputChannelBase+k, data); err != nil {
			return n, err
		}
		n += uint64(len(data))
	}
	if n > 0 {
		sw.note(op)
	}
	return n, nil
}

func (c *coordinator) writePart(sw *stateWriter, part operator.OperatorSnapshot) error {
	if part.Position != nil {
		if err := sw.p.PutSourcePosition(part.Operator, part.Subtask, part.Position); err != nil {
			return err
		}
		sw.note(part.Operator)
	}
	if part.State != nil {
		return part.State.WriteTo(sw)
	}
	return nil
}

// ack records one task's written part; the last one prepares the
// checkpoint's commit (pausing with p) and queues it for the writer
// goroutine.
func (c *coordinator) ack(f *inflight, st SubtaskCheckpointStats, ops map[string]bool, p pauser) {
	c.mu.Lock()
	if c.mu.inflight[f.id] != f {
		c.mu.Unlock()
		return
	}
	f.acks++
	st.Acked = time.Since(f.trigger)
	f.subtasks = append(f.subtasks, st)
	for op := range ops {
		f.ops[op] = c.job.parallelismOf(op)
	}
	done := f.acks == len(c.tasks)
	if done {
		f.written = time.Now()
		if f.final && operator.JudgeLoops(f.loopRecords, f.loopTimers) != operator.LoopQuiescent {
			// Records were still going round a loop, or a timer of a
			// loop's body could still send one round: the job does not
			// end here, and another final checkpoint follows this one.
			f.final, f.notFinal = false, true
		}
	}
	c.mu.Unlock()
	if !done {
		return
	}
	if err := f.pending.Prepare(c.meta(f), p.pause); err != nil {
		if !errors.Is(err, errWorkerStopped) {
			c.failed(f.id, fmt.Errorf("commit: %w", err))
		}
		return
	}
	// NB: the rest of the commit waits on the disk, so it never runs on a
	// worker.
	c.mu.Lock()
	c.mu.commits = append(c.mu.commits, f)
	c.mu.Unlock()
	signal(c.work)
}

func (c *coordinator) meta(f *inflight) snapshot.Meta {
	return snapshot.Meta{MaxParallelism: c.job.cfg.MaxParallelism, Parallelism: f.ops, States: c.job.declared,
		Run: c.job.identity.run, Final: f.final, Job: c.job.clusterMeta()}
}

// commitNow commits f on the writer goroutine, or, while the pool is
// saturated, on the pool's own thread, whose share of the cores is a
// worker's (the writer waits for it, so commits stay in order).
func (c *coordinator) commitNow(f *inflight) {
	if c.offload == nil || c.saturated == nil || !c.saturated() {
		c.commit(f)
		return
	}
	done := make(chan struct{})
	c.offload(func(*sched.Slice) {
		defer close(done)
		c.commit(f)
	})
	<-done
}

func (c *coordinator) commit(f *inflight) {
	// NB: the checkpoint is complete once durable; deleting what it made
	// unreferenced (another ingestion) comes after it is reported.
	defer c.store.Tidy()
	f.syncs.Wait()
	if err := f.syncErr.Load(); err != nil {
		c.failed(f.id, fmt.Errorf("commit: %w", *err))
		return
	}
	if err := f.pending.CommitDurable(c.meta(f)); err != nil {
		c.failed(f.id, fmt.Errorf("commit: %w", err))
		return
	}
	var (
		spPath string
		pin    *snapshot.Pinned
		pinErr error
	)
	if len(f.savepoints) > 0 {
		// NB: pinned before Tidy: newer checkpoints may complete, and
		// retention drop this one, while the savepoint is written.
		pin, pinErr = c.store.Pin(f.id)
		spPath = c.savepointPath(f.id)
	}
	now := time.Now()
	stats := f.pending.Stats()
	// NB: the checkpoint is durable now, and a restore may use it, so it
	// is reported even if the job stopped meanwhile.
	cs := CheckpointStats{ID: f.id, Trigger: f.trigger, Duration: now.Sub(f.trigger),
		BytesWritten: stats.BytesWritten, BytesReused: stats.BytesReused, Status: "completed",
		Final: f.final, Stop: f.trig == operator.TriggerStop, Savepoint: len(f.savepoints) > 0,
		SavepointPath: spPath, Written: f.written.Sub(f.trigger), Subtasks: f.subtasks}
	c.job.recordCheckpoint(cs)
	if len(f.savepoints) > 0 {
		// NB: after the checkpoint is recorded, so that a failed export
		// finds the record to take its path off.
		c.exports.Add(1)
		go c.export(f, spPath, pin, pinErr)
	}
	c.mu.Lock()
	if f.ended.CompareAndSwap(false, true) {
		c.job.events.checkpointCompleted(cs)
	}
	if c.mu.inflight[f.id] != f {
		c.mu.Unlock()
		return
	}
	f.timeout.Stop()
	delete(c.mu.inflight, f.id)
	c.mu.lastEnd, c.mu.failures = now, 0
	if f.notFinal {
		c.mu.final = 0
		if operator.JudgeLoops(f.loopRecords, f.loopTimers) == operator.LoopWaiting {
			c.probeLater(f, now)
		}
	}
	c.mu.Unlock()
	signal(c.poke) // a final checkpoint may be waiting for this one to end
	if f.notFinal {
		// NB: before Complete, in each source's mailbox: the source must
		// not end its output on this checkpoint.
		for _, t := range c.sources {
			t.NotFinal(f.id)
		}
	}
	for _, t := range c.tasks {
		t.Complete(f.id)
	}
	if f.trig == operator.TriggerStop {
		// NB: after Complete, in each task's mailbox: every sink commits
		// what the checkpoint covers before its task ends.
		for _, t := range c.tasks {
			t.Stop()
		}
	}
}

// failed aborts checkpoint id; too many failures in a row, or a failed
// final checkpoint, fail the job.
func (c *coordinator) failed(id uint64, err error) {
	c.mu.Lock()
	f := c.mu.inflight[id]
	if f == nil {
		c.mu.Unlock()
		return
	}
	f.timeout.Stop()
	f.pending.Abort()
	delete(c.mu.inflight, id)
	signal(c.poke)
	if f.ended.CompareAndSwap(false, true) {
		c.job.events.checkpointFailed(CheckpointFailedInfo{ID: id, Trigger: f.trigger, Final: f.final, Err: err})
	}
	failRequests(f.savepoints, id, err)
	if f.trig == operator.TriggerStop {
		c.mu.final = 0 // another stop checkpoint is triggered, if tolerated
	}
	c.failLocked(id, f.trigger, err, f.final || f.notFinal)
	for _, t := range c.tasks {
		t.Abort(id)
	}
	c.mu.Unlock()
	c.logFailed(id, err)
}

// logFailed logs that checkpoint id failed with err, if err is not nil.
// NB: outside c.mu, which workers take: the handler is the user's code.
func (c *coordinator) logFailed(id uint64, err error) {
	if err != nil {
		c.job.cfg.Logger.Warn("ringflow: checkpoint failed", "checkpoint", id, "err", err)
	}
}

func (c *coordinator) failLocked(id uint64, trigger time.Time, err error, final bool) {
	now := time.Now()
	c.mu.lastEnd = now
	c.mu.failures++
	c.job.recordCheckpoint(CheckpointStats{ID: id, Trigger: trigger, Duration: now.Sub(trigger),
		Status: "failed: " + err.Error(), Final: final})
	if final {
		c.mu.final = 0 // a new final checkpoint is triggered, if tolerated
		signal(c.poke)
	}
	switch {
	case c.mu.failures > c.cfg.TolerableFailures:
		c.fail(fmt.Errorf("%w: checkpoint %d: %v (%d failed in a row, %d tolerated)",
			ErrCheckpoint, id, err, c.mu.failures, c.cfg.TolerableFailures))
	}
}

// ErrCheckpoint is wrapped by the error of a job that failed because its
// checkpoints did.
var ErrCheckpoint = errors.New("ringflow: checkpoint failed")

// stateWriter scopes an operator instance's state into the store: state s
// of operator op is stored as operator id "op/s".
type stateWriter struct {
	c      *coordinator
	f      *inflight
	p      *snapshot.Pending
	pauser pauser
	op     string
	sub    int
	bytes  uint64
	ops    map[string]bool
}

func (w *stateWriter) id(state string) string {
	id := w.op + "/" + state
	w.note(id)
	return id
}

func (w *stateWriter) note(id string) {
	if w.ops == nil {
		w.ops = map[string]bool{}
	}
	w.ops[id] = true
}

// Pause implements operator.StateWriter.
func (w *stateWriter) Pause() error { return w.pauser.pause() }

// BeforeCommit implements operator.StateWriter. fn runs on a goroutine of
// its own: it waits on the disk, and on a worker or the pool's thread it
// would hold up the tasks or the other parts' writes as long. The
// checkpoint's commit waits for it (see commit).
func (w *stateWriter) BeforeCommit(fn func() error) { w.c.beforeCommit(w.f, fn) }

// beforeCommit runs fn, work checkpoint f's commit waits for, on a
// goroutine of its own.
func (c *coordinator) beforeCommit(f *inflight, fn func() error) {
	f.syncs.Add(1)
	c.syncs.Add(1)
	go func() {
		defer c.syncs.Done()
		defer f.syncs.Done()
		if err := fn(); err != nil {
			f.syncErr.CompareAndSwap(nil, &err)
		}
	}()
}

// testOnWriterThread, if set (by tests), is called on the writer
// goroutine's thread when it starts.
var testOnWriterThread func()

// testOnPutKeyGroup, if set (by tests), is called by every PutKeyGroup.
var testOnPutKeyGroup func()

func (w *stateWriter) PutKeyGroup(state string, kg int, blob []byte) error {
	if err := w.Pause(); err != nil {
		return err
	}
	if testOnPutKeyGroup != nil {
		testOnPutKeyGroup()
	}
	w.bytes += uint64(len(blob))
	return w.p.PutKeyGroup(w.id(state), kg, blob)
}

func (w *stateWriter) ReuseKeyGroup(state string, kg int, from uint64) error {
	return w.p.ReuseKeyGroup(w.id(state), kg, from)
}

func (w *stateWriter) AppendKeyGroupDelta(state string, kg int, blob []byte) error {
	if err := w.Pause(); err != nil {
		return err
	}
	w.bytes += uint64(len(blob))
	return w.p.AppendKeyGroupDelta(w.id(state), kg, blob)
}

func (w *stateWriter) PutSubtask(state string, blob []byte) error {
	w.bytes += uint64(len(blob))
	return w.p.PutSinkTxn(w.id(state), w.sub, blob)
}

// stateReader gives an operator instance its state from a checkpoint.
type stateReader struct {
	cp *snapshot.Checkpoint
	op string
}

func (r stateReader) KeyGroup(state string, kg int) ([]byte, [][]byte, bool) {
	id := r.op + "/" + state
	base, ok := r.cp.KeyGroup(id, kg)
	if !ok {
		return nil, nil, false
	}
	return base, r.cp.KeyGroupDeltas(id, kg), true
}

func (r stateReader) Checkpoint() uint64 { return r.cp.ID() }

func (r stateReader) Subtask(state string) [][]byte {
	var out [][]byte
	for _, s := range r.cp.SinkTxns(r.op + "/" + state) {
		out = append(out, s.Data)
	}
	return out
}
