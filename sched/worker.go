package sched

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/futex"
	"golang.org/x/sys/cpu"
)

// Worker runs its tasks on one locked (and normally pinned) thread. It is
// also the doorbell that wakes that thread: pass it as the ring.Waker of
// every ring its tasks wait on.
type Worker struct {
	pool  *Pool
	id    int
	tasks []Task
	bell  atomic.Uint32 // 1: rung since the worker last looked
	bg    background

	// held is the tasks' lock: whoever steps them holds it — the
	// worker's own thread, or a peer while that thread is away or busy
	// with background work (see steal).
	held atomic.Bool
	live []Task      // the tasks not yet Done; under held
	done atomic.Bool // live is empty

	// Stalls (see stall.go): steps longer than stallBound are recorded
	// with the counters read since stallBase, which the thread reads
	// every stallBound/stallReads of its rounds.
	stallBound    time.Duration
	stallBase     Counters
	stallCounters *counterReader

	// The worker's thread publishes where it is, for peers deciding
	// whether it is away: seen is when it last went round its loop;
	// parked is set while it sleeps on its doorbell, until wakeAt at the
	// latest (see sinceEpoch).
	_      cpu.CacheLinePad
	seen   atomic.Int64
	parked atomic.Bool
	wakeAt atomic.Int64
	_      cpu.CacheLinePad

	// Resting (rest.go): restWanted is worker 0's request; resting is set
	// while the thread sleeps on restBell, a futex word no ring rings, and
	// worker 0 steps the tasks. backlogNs, written by the worker's thread
	// only, is the time it spent in rounds where a task was Backlogged.
	restWanted atomic.Bool
	resting    atomic.Bool
	restBell   atomic.Uint32
	lent       atomic.Bool // awake for Pool.WakeFor: still runs worker 0's background work
	backlogNs  atomic.Int64
	busyNs     atomic.Int64 // time in rounds where a task made progress
	busyRounds atomic.Int64 // and how many
	_          cpu.CacheLinePad

	// Statistics.
	parks    atomic.Int64
	steals   atomic.Int64 // polls of this worker's tasks by a peer
	rests    atomic.Int64
	restNs   atomic.Int64
	timeouts int       // sleeps in a row that ended by the clock; worker-only
	looked   time.Time // when the worker last looked at its peers; worker-only
	// preempted: the thread's involuntary context switches since the
	// worker started, read every preemptCheck; worker-only but for loads.
	preempted   atomic.Int64
	preemptBase int64
	preemptAt   time.Time

	// Worker-only: the current round of the loop, for backlogNs; the
	// tasks a park announces on (its own and its guests').
	roundStart   time.Time
	roundBacklog bool
	roundBusy    bool
	parkTasks    []Task
	parkGuests   []*Worker
}

// Add assigns t to the worker. Call before Pool.Run.
func (w *Worker) Add(t Task) { w.tasks = append(w.tasks, t) }

// ID returns the worker's index in the pool.
func (w *Worker) ID() int { return w.id }

// Parks returns how often the worker has slept on its doorbell.
func (w *Worker) Parks() int64 { return w.parks.Load() }

// Stolen returns how often a peer has run the worker's tasks while its
// thread was away.
func (w *Worker) Stolen() int64 { return w.steals.Load() }

// Preempted returns how often the worker's thread was switched out while
// it could still run: its core taken by another process, a kernel thread
// or the Go runtime preempting the worker's goroutine, or given to another
// runnable thread by the worker's own yield when idle. It is read from the
// kernel every 100ms and when the worker exits.
func (w *Worker) Preempted() int64 { return w.preempted.Load() }

// notePreemptions publishes the thread's involuntary context switches
// since the worker started. Called on the worker's thread.
func (w *Worker) notePreemptions(now time.Time) {
	w.preemptAt = now
	if n := affinity.Preemptions(); n >= 0 {
		w.preempted.Store(n - w.preemptBase)
	}
}

// Wake rings the doorbell: the worker, if asleep, wakes and polls its tasks.
// While the worker rests, the ring is passed on to worker 0, which steps
// its tasks meanwhile.
func (w *Worker) Wake() {
	if w.bell.Swap(1) == 0 {
		futex.Wake((*uint32)(unsafe.Pointer(&w.bell)))
	}
	if w.resting.Load() {
		w.pool.workers[0].Wake()
	}
}

func (w *Worker) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if w.pool.cpus != nil {
		unpin, err := affinity.Pin(w.pool.cpus[w.id%len(w.pool.cpus)])
		if err != nil {
			w.pool.fail(err)
			return
		}
		defer unpin()
	}
	defer w.closeBackground()
	if w.stallCounters != nil {
		defer w.stallCounters.close()
	}
	// NB: the thread may have run other goroutines before; count from here.
	w.preemptBase = max(affinity.Preemptions(), 0)
	defer func() { w.notePreemptions(time.Now()) }()
	// NB: the thread keeps the tasks' lock while they make progress, and
	// lets go of it when they are idle and while it runs background work:
	// a peer can then run the tasks if this thread loses its core or is in
	// a slice of background work (see steal). Under full load that costs
	// nothing: no atomic read-modify-write per poll.
	held := false
	defer func() {
		// An exited worker keeps its lock: no peer runs its tasks, and its
		// background work, stopped next, has their state to itself.
		if !held {
			w.lockTasks()
		}
	}()
	var idle idleLadder
	for {
		if w.id == 0 && w.done.Load() && !w.pool.rest.off {
			w.stopHosting()
		}
		if w.done.Load() && w.bg.pending.Load() == 0 || w.pool.stopped.Load() {
			break
		}
		now := time.Now()
		w.seen.Store(sinceEpoch(now))
		if now.Sub(w.preemptAt) >= preemptCheck {
			w.notePreemptions(now)
		}
		if w.stallBound > 0 && now.Sub(w.stallBase.At) >= w.stallBound/stallReads {
			w.stallCounters.read(&w.stallBase, now)
		}
		if w.roundBacklog {
			w.backlogNs.Store(w.backlogNs.Load() + int64(now.Sub(w.roundStart)))
		}
		if w.roundBusy {
			w.busyNs.Store(w.busyNs.Load() + int64(now.Sub(w.roundStart)))
			w.busyRounds.Store(w.busyRounds.Load() + 1)
		}
		w.roundStart, w.roundBacklog, w.roundBusy = now, false, false
		if w.restWanted.Load() {
			if held {
				w.held.Store(false)
				held = false
			}
			w.rest()
			idle = 0
			continue
		}
		w.pool.ringAlarm(now)
		if w.id == 0 {
			w.reviewLoad(now)
		}
		if !held {
			if held = w.held.CompareAndSwap(false, true); !held {
				// A peer is running the tasks; it lets go after one poll.
				if w.bg.pending.Load() > 0 {
					if d, idle, ok := w.backgroundSlice(time.Now(), false, false); ok {
						w.runSlice(time.Now(), d, idle)
						continue
					}
				}
				w.idleRung(idle)
				continue
			}
		}
		progress, backlog, err := w.poll(now, w)
		if err == nil && w.hosting() {
			var got, behind bool
			got, behind, err = w.pollGuests(now)
			progress, backlog = progress || got, backlog || behind
		}
		if err != nil {
			w.pool.fail(err)
			return
		}
		w.roundBacklog, w.roundBusy = backlog, progress
		// A peer's records come before this worker's background work and
		// its idling, and a worker that has records of its own at every
		// poll (a paced source) is often lightly loaded; a peer's thread is
		// rarely away, so look every stealCheck.
		if lookDue(now.Sub(w.looked)) {
			w.looked = now
			if w.steal(now) {
				progress = true
			}
		}
		w.observeLoad(now)
		if w.bg.pending.Load() > 0 {
			if d, idleSlice, ok := w.backgroundSlice(time.Now(), progress, false); ok {
				// NB: background work does not touch the tasks' state (a
				// checkpoint's write-out reads frozen snapshots, which any
				// thread may read while the tasks write), so the lock is
				// free for a peer meanwhile.
				w.held.Store(false)
				held = false
				w.runSlice(time.Now(), d, idleSlice)
				idle = 0
				continue
			}
		}
		r := idle.next(progress, w.pool.spin)
		switch r {
		case rungPoll:
			continue
		case rungPark:
			w.park() // lets go of the lock
			held = false
			continue
		}
		w.held.Store(false)
		held = false
		w.idleWait(r)
	}
}

// idleRung waits a little without a poll of the worker's own, as the idle
// ladder's rung says (see idleLadder.wait).
func (w *Worker) idleRung(idle idleLadder) { w.idleWait(idle.wait(w.pool.spin)) }

// idleWait carries out a spin or yield rung of the idle ladder, with its
// tasks' lock free.
func (w *Worker) idleWait(r rung) {
	relax(r)
	if awayHook != nil {
		awayHook(w, false)
	}
}

// relax carries out a spin rung (PAUSE) or a yield rung (sched_yield).
func relax(r rung) {
	if r == rungSpin {
		cpuRelax()
	} else {
		affinity.Yield()
	}
}

// awayHook, when a test sets it, is called where a worker's thread may
// lose its core without holding its tasks' lock: between idle polls, and
// (asleep true) after a sleep, with the worker still marked parked.
var awayHook func(w *Worker, asleep bool)

// steal runs, once, the tasks of each peer whose thread is away, and
// reports whether any made progress.
//
// A worker's thread is away when the kernel has given its core to another
// thread — on a machine whose cores the workers keep, a thread of the
// checkpoint's commit doing a file system call, the Go runtime, another
// process — when it has been woken and not yet run, or while it is in a
// piece of background work. Until it is back (up to a scheduler tick, 4ms
// at HZ=250, or until the other thread blocks), the records queued for its
// tasks would wait; a peer runs them between its own polls instead. Only
// a worker whose tasks' lock is free (its tasks were idle, or it is in
// background work; no task half-way through a step) can be taken over,
// and the lock keeps each worker's tasks to one thread at a time, so they
// see their steps in order as before.
func (w *Worker) steal(now time.Time) bool {
	if w.pool.noSteal {
		return false
	}
	progress := false
	for _, p := range w.pool.workers {
		if p == w || !p.away(now) || !p.held.CompareAndSwap(false, true) {
			continue
		}
		got, _, err := p.poll(now, w)
		if got && p.parked.Load() {
			// Its announcements on the rings may no longer say what the
			// tasks wait for; it re-polls and announces anew.
			p.Wake()
		}
		p.held.Store(false)
		p.steals.Add(1)
		if err != nil {
			w.pool.fail(err)
			return false
		}
		progress = progress || got
	}
	return progress
}

// away reports whether p's thread is away from its tasks while they may
// have work (see steal and judgeAway).
func (p *Worker) away(now time.Time) bool {
	return judgeAway(published{p}, time.Duration(sinceEpoch(now))).away()
}

// published reads what a worker's thread publishes for its peers, for the
// away rule.
type published struct{ w *Worker }

func (p published) held() bool              { return p.w.held.Load() }
func (p published) finished() bool          { return p.w.done.Load() }
func (p published) resting() bool           { return p.w.resting.Load() }
func (p published) parked() bool            { return p.w.parked.Load() }
func (p published) rung() bool              { return p.w.bell.Load() != 0 }
func (p published) wakeAt() time.Duration   { return time.Duration(p.w.wakeAt.Load()) }
func (p published) lastSeen() time.Duration { return time.Duration(p.w.seen.Load()) }

// ready reports whether one of the live tasks, or of the resting workers'
// when this is worker 0, says it has work (see Readier).
func (w *Worker) ready(now time.Time) bool {
	if w.tasksReady(now) {
		return true
	}
	if w.hosting() {
		for _, g := range w.pool.workers[1:] {
			if g.guest() && g.tasksReady(now) {
				return true
			}
		}
	}
	return false
}

// tasksReady reports whether one of the worker's live tasks says it has
// work; false while another thread is running them.
func (w *Worker) tasksReady(now time.Time) bool {
	if !w.held.CompareAndSwap(false, true) {
		return false
	}
	defer w.held.Store(false)
	for _, t := range w.live {
		if r, ok := t.(Readier); ok && r.Ready(now) {
			return true
		}
	}
	return false
}

// poll steps every live task once and drops the ones that are done; it
// reports whether any made progress and whether any was Backlogged. The
// caller holds the tasks' lock; by is the worker whose thread runs the
// steps (w, or a peer taking over), which times them for stalls.
func (w *Worker) poll(now time.Time, by *Worker) (progress, backlog bool, err error) {
	start := now
	if by.stallBound > 0 {
		// NB: now may be a round's, read before the thread's own poll (a
		// peer's tasks, guests) or before other work of the round: the
		// first step is timed from here.
		start = time.Now()
	}
	for i := 0; i < len(w.live); {
		t := w.live[i]
		st, err := step(t, now)
		if err != nil {
			return false, false, err
		}
		if by.stallBound > 0 {
			// NB: Since reads only the monotonic clock, half the cost of
			// Now; start keeps its monotonic reading through Add.
			d := time.Since(start)
			start = start.Add(d)
			if d > by.stallBound {
				by.recordStall(t, d, start)
			}
		}
		switch st {
		case Done:
			w.live = append(w.live[:i], w.live[i+1:]...)
			if len(w.live) == 0 {
				w.done.Store(true)
			}
			progress = true
			continue
		case Progress:
			progress = true
		case Backlogged:
			progress, backlog = true, true
		}
		i++
	}
	return progress, backlog, nil
}

func step(t Task, now time.Time) (st Status, err error) {
	defer Recover(&err)
	return t.Step(now)
}

// park sleeps until a ring rings the doorbell, a task's deadline, or the
// pool stops; it returns at once if a task turns out to have work. It is
// called holding the tasks' lock and returns without it; while the thread
// sleeps, the lock is free, so that a peer can run the tasks if the thread
// is slow to come back after its doorbell or its deadline (see steal).
//
// Worker 0 sleeps with the announcements of its guests' tasks too (their
// doorbells pass rings on to its own), holding their locks until it is
// back: only it steps them while they rest.
func (w *Worker) park() {
	defer w.held.Store(false)
	w.parkGuests = w.lockGuests(w.parkGuests[:0])
	defer func() {
		for _, g := range w.parkGuests {
			g.held.Store(false)
		}
	}()
	tasks := append(w.parkTasks[:0], w.live...)
	for _, g := range w.parkGuests {
		tasks = append(tasks, g.live...)
	}
	w.parkTasks = tasks
	w.bell.Store(0)
	var deadline time.Time
	for i, t := range tasks {
		if !t.PrepareToPark() {
			for _, u := range tasks[:i] {
				u.Unpark()
			}
			return
		}
		if d := t.Deadline(); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	if a := w.pool.alarmAt(); !a.IsZero() && (deadline.IsZero() || a.Before(deadline)) {
		deadline = a
	}
	// NB: a worker never sleeps longer than maxPark. Wake-ups are not
	// lost by design (see the package doc); the bound keeps an unforeseen
	// lost one from hanging a job, at the cost of a poll every maxPark.
	wait := maxPark
	if !deadline.IsZero() {
		if wait = min(time.Until(deadline), maxPark); wait <= 0 {
			wait = -1
		}
	}
	if wait >= 0 && !w.pool.stopped.Load() {
		w.parks.Add(1)
		w.wakeAt.Store(sinceEpoch(time.Now().Add(wait)))
		w.parked.Store(true)
		w.held.Store(false)
		futex.Wait((*uint32)(unsafe.Pointer(&w.bell)), 0, wait)
		if awayHook != nil {
			awayHook(w, true)
		}
		w.lockTasks()
		w.parked.Store(false)
		if w.bell.Load() == 0 {
			w.timeouts++ // woke by the clock, not by a ring or a message
		} else {
			w.timeouts = 0
		}
		if debugStall > 0 && time.Duration(w.timeouts)*maxPark >= debugStall {
			w.timeouts = 0
			for _, t := range tasks {
				w.pool.logger.Info("sched: worker idle", "worker", w.id, "idle", debugStall, "task", fmt.Sprint(t))
			}
		}
	}
	for _, t := range tasks {
		t.Unpark()
	}
}

// lockTasks takes the tasks' lock, waiting for a peer that holds it (for
// one poll of the tasks).
func (w *Worker) lockTasks() {
	for i := idleLadder(0); !w.held.CompareAndSwap(false, true); i++ {
		relax(i.wait(w.pool.spin))
	}
}

// debugStall, set from RINGFLOW_DEBUG_STALL (a duration), makes a worker
// that sleeps that long describe its tasks through Options.Logger.
var debugStall, _ = time.ParseDuration(os.Getenv("RINGFLOW_DEBUG_STALL"))
