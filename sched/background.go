package sched

import (
	"fmt"
	"iter"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

// Slice is the handle a piece of background work uses to hand its worker's
// thread back (see Worker.Background).
type Slice struct {
	end     time.Time
	yield   func(struct{}) bool // nil when the work runs outside a coroutine
	stopped bool
	w       *Worker
	pool    *Pool // set for work on the pool's own thread
	idle    bool  // the slice runs in the tasks' idle time: a ready task ends it
}

// Pause returns the thread to the worker's tasks if the current slice is
// used up, and comes back when the worker next has time for background
// work. It reports false once the pool is stopping: the work should then be
// abandoned, and Pause returns false at once from then on. Call it often
// (every few microseconds of work): a slice lasts until the first Pause after
// its time is up, or, when it runs in the tasks' idle time, after one of them
// becomes ready (see Readier). Work on the pool's own thread has no slices:
// there Pause only says whether to go on.
func (s *Slice) Pause() bool {
	if s.stopped {
		return false
	}
	if s.yield == nil {
		if s.pool != nil && s.pool.stopped.Load() {
			s.stopped = true
		}
		return !s.stopped
	}
	if now := time.Now(); now.Before(s.end) && !(s.idle && s.w.ready(now)) {
		return true
	}
	if !s.yield(struct{}{}) {
		s.stopped = true
	}
	return !s.stopped
}

// background is a worker's queue of background work and the piece it is
// in the middle of.
type background struct {
	mu struct {
		sync.Mutex
		queue  []func(*Slice)
		closed bool // the worker has exited; Background refuses work
	}
	pending atomic.Int32 // queued or running jobs
	exited  atomic.Bool  // mu.closed, readable without the lock
	// Worker 0 only: forwarded counts the jobs passed to a resting worker,
	// fwdTo, and not yet finished there; until they are, later jobs go
	// the same way, so that they still run in the order queued.
	forwarded atomic.Int32
	fwdTo     *Worker // under mu
	// queued is when a job was last queued with none pending (see
	// sinceEpoch).
	queued atomic.Int64

	// offloaded counts the jobs handed to the pool's thread and not yet
	// finished there; until they are, later jobs go the same way, so that
	// they still run in the order queued.
	offloaded atomic.Int32
	// saturated is policy.saturated(), published for Background and
	// Pool.Saturated.
	saturated atomic.Bool

	// Worker-only.
	policy bgPolicy
	next   func() (struct{}, bool) // resumes the running job; nil if none
	stop   func()
	cur    *Slice
}

// Background queues job to run for the worker: in slices of about 20µs
// on its own thread between the steps of its tasks, whenever they are
// idle (and, once the work has waited the pool's patience, every ~80µs
// when they are not), or, when the tasks leave the worker too little idle
// time, on the pool's own thread (see the package doc, "Background
// work"). job calls s.Pause between small pieces of its work; when Pause
// reports false the pool is stopping and job should return. Jobs run one
// at a time, in the order queued.
//
// This is where a task's work that must not delay its records goes (the
// write-out of a checkpoint).
//
// job may block only briefly (a mutex), never on I/O. It must not touch
// what the worker's tasks own without synchronising with them: it may run
// on another thread while the tasks step (a resting or lent worker's, to
// which worker 0 passes its jobs, or the pool's own), and a peer worker
// may step the tasks during a slice. Background returns false, and does
// not run job, once the worker has exited.
func (w *Worker) Background(job func(s *Slice)) bool {
	b := &w.bg
	// NB: a loop, not a recursion: a worker the job is passed to may have
	// exited (its tasks ended) while still marked resting or lent; it is
	// then never chosen again, so the loop ends within len(workers) turns.
	for {
		b.mu.Lock()
		if b.mu.closed {
			b.mu.Unlock()
			return false
		}
		to := w.forwardTo()
		if to == nil && (b.offloaded.Load() > 0 || b.saturated.Load() && !w.pool.spare()) {
			w.offloadLocked(job)
			b.mu.Unlock()
			return true
		}
		if to == nil {
			break // b.mu still held
		}
		b.forwarded.Add(1)
		b.mu.Unlock()
		if to.Background(func(s *Slice) {
			defer b.forwarded.Add(-1)
			job(s)
		}) {
			return true
		}
		b.forwarded.Add(-1)
		b.mu.Lock()
		if b.fwdTo == to {
			b.fwdTo = nil
		}
		b.mu.Unlock()
	}
	b.mu.queue = append(b.mu.queue, job)
	// NB: stored before pending rises, so the worker never sees the new
	// job with an old time; and again if the worker's last job ended
	// meanwhile.
	now := sinceEpoch(time.Now())
	if b.pending.Load() == 0 {
		b.queued.Store(now)
	}
	if b.pending.Add(1) == 1 {
		b.queued.Store(now)
	}
	b.mu.Unlock()
	w.Wake()
	if w.resting.Load() {
		w.wakeRest() // a resting worker runs its background work
	}
	return true
}

// forwardTo returns the worker that should run a job queued on w, if not
// w itself: for worker 0, a resting or lent worker that has not exited (or
// the one it passed its earlier jobs to, while they are not finished).
// Called under w.bg.mu.
func (w *Worker) forwardTo() *Worker {
	b := &w.bg
	if b.forwarded.Load() > 0 && b.fwdTo != nil && !b.fwdTo.bg.exited.Load() {
		return b.fwdTo
	}
	b.fwdTo = nil
	if w.id != 0 {
		return nil
	}
	for _, g := range w.pool.workers[1:] {
		if (g.guest() || g.lent.Load()) && !g.bg.exited.Load() {
			b.fwdTo = g
			return g
		}
	}
	return nil
}

// BackgroundPending returns how many background jobs are queued or running.
func (w *Worker) BackgroundPending() int { return int(w.bg.pending.Load()) }

// backgroundSlice asks the background policy what the worker does with
// its pending work in this round (see bgPolicy.next): progress says a
// task made progress this round, rest that the worker rests. It hands
// the queued jobs to the pool's thread itself if the policy says so; it
// returns the length of the slice to run, or ok false for none. The
// caller lets go of the tasks' lock before it runs the slice (the work
// does not touch what the tasks own, so a peer may step them meanwhile).
func (w *Worker) backgroundSlice(now time.Time, progress, rest bool) (d time.Duration, idle, ok bool) {
	b := &w.bg
	r := bgRound{now: time.Duration(sinceEpoch(now)), progress: progress, resting: rest,
		running: b.next != nil, spare: w.pool.spare(),
		patientFrom: time.Duration(sinceEpoch(w.patientFrom()))}
	a := b.policy.next(r)
	switch a {
	case bgNone:
		return 0, false, false
	case bgOffload:
		w.offloadQueue()
		return 0, false, false
	}
	var cpu time.Duration
	if a == bgBusy {
		cpu = affinity.ThreadCPU()
	}
	return b.policy.slice(r, a, cpu), a == bgIdle, true
}

// runSlice runs one slice of background work of length d, starting the
// next queued job if none is running; idle says it runs in the tasks'
// idle time (a ready task ends it).
func (w *Worker) runSlice(now time.Time, d time.Duration, idle bool) {
	b := &w.bg
	if b.next == nil {
		job := b.pop()
		if job == nil {
			return
		}
		s := &Slice{w: w}
		// NB: iter.Pull runs the job as a coroutine: resuming it and
		// pausing it are direct switches on this thread (the coroutine
		// inherits the worker's thread lock), not hand-offs through the Go
		// scheduler or the kernel.
		b.cur = s
		b.next, b.stop = iter.Pull(func(yield func(struct{}) bool) {
			s.yield = yield
			w.runJob(job, s)
		})
	}
	b.cur.end = now.Add(d)
	b.cur.idle = idle
	if _, more := b.next(); !more {
		b.finishJob()
	}
}

// observeLoad feeds the worker's busy time to its background policy and
// publishes whether it is saturated (worker's thread only).
func (w *Worker) observeLoad(now time.Time) {
	b := &w.bg
	if b.policy.observe(time.Duration(sinceEpoch(now)), time.Duration(w.busyNs.Load())) {
		b.saturated.Store(b.policy.saturated())
	}
}

// offloadQueue hands the worker's queued jobs, none of them started, to
// the pool's thread (the worker is saturated: see bgPolicy).
func (w *Worker) offloadQueue() {
	b := &w.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	queue := b.mu.queue
	b.mu.queue = nil
	for _, job := range queue {
		w.offloadLocked(job)
		if b.pending.Add(-1) == 0 {
			b.policy.drained()
		}
	}
}

// offloadLocked passes job to the pool's thread, counting it in
// w.bg.offloaded until it ends. Called under w.bg.mu.
func (w *Worker) offloadLocked(job func(*Slice)) {
	b := &w.bg
	b.offloaded.Add(1)
	w.pool.off.add(offJob{batch: true, run: func(s *Slice) {
		defer b.offloaded.Add(-1)
		job(s)
	}})
}

// patient reports whether the pending work has waited the pool's
// patience, and may take slices from busy tasks.
func (w *Worker) patient(now time.Time) bool { return !now.Before(w.patientFrom()) }

// patientFrom is when the pending work will have waited the pool's
// patience.
func (w *Worker) patientFrom() time.Time {
	return epoch.Add(time.Duration(w.bg.queued.Load()) + w.pool.patience)
}

// epoch is the origin of the times workers publish in atomics
// (background.queued, Worker.seen and wakeAt).
var epoch = time.Now()

// sinceEpoch returns t as nanoseconds since epoch, on the monotonic clock.
func sinceEpoch(t time.Time) int64 { return int64(t.Sub(epoch)) }

func (b *background) pop() func(*Slice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.mu.queue) == 0 {
		return nil
	}
	job := b.mu.queue[0]
	b.mu.queue[0] = nil
	b.mu.queue = b.mu.queue[1:]
	return job
}

func (b *background) finishJob() {
	b.stop()
	b.next, b.stop, b.cur = nil, nil, nil
	if b.pending.Add(-1) == 0 {
		// The time until the next job is queued is not time the work
		// waited: its first busy slice must not be a share of it.
		b.policy.drained()
	}
}

// runJob runs job; a panic in it stops the pool.
func (w *Worker) runJob(job func(*Slice), s *Slice) {
	defer func() {
		if r := recover(); r != nil {
			s.stopped = true
			w.pool.fail(fmt.Errorf("sched: worker %d: background work: %w", w.id,
				&PanicError{Value: r, Stack: debug.Stack()}))
		}
	}()
	job(s)
}

// closeBackground runs when the worker exits: it refuses new work and lets
// every job it still has see a stopped Slice (the running one at its Pause,
// queued ones from the start) so that each can let go of what it holds.
func (w *Worker) closeBackground() {
	b := &w.bg
	b.mu.Lock()
	b.mu.closed = true
	b.exited.Store(true)
	b.mu.Unlock()
	if b.next != nil {
		b.cur.stopped = true
		b.finishJob() // stop resumes the job, whose Pause reports false
	}
	for job := b.pop(); job != nil; job = b.pop() {
		w.runJob(job, &Slice{stopped: true})
		b.pending.Add(-1)
	}
}
