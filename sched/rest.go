package sched

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/futex"
)

// restControl is worker 0's side of the load review (load.go holds the
// rules): the policy, which only worker 0's thread touches, and what other
// threads tell it.
type restControl struct {
	loadPolicy
	// wakeUntil is Pool.WakeFor's latest deadline (see sinceEpoch), set by
	// any thread.
	wakeUntil atomic.Int64
	obs       []workerObs // the review's observations, reused
}

// reviewLoad, on worker 0 at every round, feeds the load review when it
// has something to do (a new Pool.WakeFor deadline, or every restCheck)
// and carries out its decision.
func (w *Worker) reviewLoad(now time.Time) {
	c := &w.pool.rest
	t, until := time.Duration(sinceEpoch(now)), time.Duration(c.wakeUntil.Load())
	if !c.due(t, until) {
		return
	}
	ws := w.pool.workers
	if c.obs == nil {
		c.obs = make([]workerObs, len(ws))
	}
	for i, p := range ws {
		c.obs[i] = workerObs{
			backlog:    time.Duration(p.backlogNs.Load()),
			busy:       time.Duration(p.busyNs.Load()),
			busyRounds: p.busyRounds.Load(),
		}
	}
	w.pool.carryOut(c.Review(t, until, c.obs))
}

// carryOut does what the load review decided, in the order of the
// decision's fields. Only worker 0's thread writes the lent flags.
func (p *Pool) carryOut(d loadDecision) {
	ws := p.workers
	if d.lendFrom > 0 {
		for _, g := range ws[d.lendFrom:] {
			g.lent.Store(true)
			g.endRest()
		}
	}
	if d.endFrom > 0 {
		for _, g := range ws[d.endFrom:] {
			g.endRest()
		}
	}
	if d.wake > 0 {
		ws[d.wake].endRest()
	}
	if d.unlend {
		for _, g := range ws {
			g.lent.Store(false)
		}
	}
	if d.rest > 0 {
		g := ws[d.rest]
		g.lent.Store(false)
		g.restWanted.Store(true)
		g.Wake() // if it sleeps on its doorbell, so that it rests now
	}
}

// WakeFor tells the pool that a burst of work for the tasks is coming that
// every core should share — a checkpoint's barrier, the synchronous
// snapshots and the copy-on-write after it: every resting worker steps its
// own tasks again from worker 0's next round until at least d from now,
// and rests again once calm for 20ms after that. Meanwhile such a
// worker is lent: worker 0 still passes its background work to it.
// Without resting workers WakeFor only holds rests back until then.
//
// Why: at light load worker 0 steps every task, and after a barrier each
// first write to a page of state copies it; the longer worker 0's round,
// the more records the next one brings, each likely to touch a page not
// yet copied, and the rounds stretch to hundreds of microseconds for
// milliseconds after every checkpoint. Woken a little before the trigger,
// the other workers take their own subtasks' share.
func (p *Pool) WakeFor(d time.Duration) {
	// NB: the deadline is on the workers' clock (see sinceEpoch); worker 0
	// acts on it at its next round, with its own reading of that clock.
	c := &p.rest
	until := sinceEpoch(time.Now().Add(d))
	for {
		old := c.wakeUntil.Load()
		if old >= until || c.wakeUntil.CompareAndSwap(old, until) {
			break
		}
	}
	p.workers[0].Wake()
}

// stopHosting wakes every resting worker for good: worker 0's own tasks
// are done, and it is about to exit.
func (w *Worker) stopHosting() {
	w.pool.carryOut(w.pool.rest.StopHosting())
}

// hosting reports whether worker w steps the tasks of resting workers (on
// worker 0's thread only): while it wants some to rest, and until every
// woken one is back (see guest).
func (w *Worker) hosting() bool {
	if w.id != 0 {
		return false
	}
	if w.pool.rest.active < len(w.pool.workers) {
		return true
	}
	for _, g := range w.pool.workers[1:] {
		if g.resting.Load() {
			return true
		}
	}
	return false
}

// guest reports whether g rests while worker 0 steps its tasks: from when
// its thread goes to rest until it is back from it, not only while worker
// 0 wants it to rest. (A woken thread takes hundreds of microseconds to
// run, and records for its tasks would wait as long.)
func (g *Worker) guest() bool { return g.resting.Load() }

// pollGuests steps, once, the tasks of every resting worker (worker 0
// only).
func (w *Worker) pollGuests(now time.Time) (progress, backlog bool, err error) {
	for _, g := range w.pool.workers[1:] {
		if !g.guest() || !g.held.CompareAndSwap(false, true) {
			continue
		}
		got, behind, err := g.poll(now, w)
		g.held.Store(false)
		if err != nil {
			return false, false, err
		}
		if g.done.Load() {
			g.wakeRest() // its tasks are over; it exits
		}
		progress, backlog = progress || got, backlog || behind
	}
	return progress, backlog, nil
}

// lockGuests takes the tasks' locks of the resting workers, appending them
// to buf (worker 0, about to sleep with their tasks' announcements).
func (w *Worker) lockGuests(buf []*Worker) []*Worker {
	if !w.hosting() {
		return buf
	}
	for _, g := range w.pool.workers[1:] {
		if g.guest() && g.held.CompareAndSwap(false, true) {
			buf = append(buf, g)
		}
	}
	return buf
}

// rest leaves the worker's tasks to worker 0 until worker 0 wakes the
// worker, its tasks are done or the pool stops. Meanwhile its thread runs
// background work, its own and worker 0's, and sleeps when there is none.
// The caller does not hold the tasks' lock.
func (w *Worker) rest() {
	w.resting.Store(true)
	// NB: a resting worker's core is free: its background work runs here,
	// and its load is measured anew when it is back.
	w.bg.saturated.Store(false)
	w.bg.policy.started, w.bg.policy.n = false, 0
	w.rests.Add(1)
	start := time.Now()
	for {
		w.restBell.Store(0)
		if !w.restWanted.Load() || w.done.Load() || w.pool.stopped.Load() {
			break
		}
		if w.bg.pending.Load() > 0 {
			if d, idle, ok := w.backgroundSlice(time.Now(), false, true); ok {
				w.runSlice(time.Now(), d, idle)
			}
			continue
		}
		// NB: the bound is a safety net, as for a park.
		futex.Wait((*uint32)(unsafe.Pointer(&w.restBell)), 0, maxPark)
	}
	w.resting.Store(false)
	// NB: worker 0 may be asleep holding this worker's tasks' lock (see
	// park); it lets go when woken.
	w.pool.workers[0].Wake()
	w.restNs.Add(int64(time.Since(start)))
}

// endRest asks the worker to step its own tasks again and wakes it.
func (w *Worker) endRest() {
	w.restWanted.Store(false)
	w.wakeRest()
}

// wakeRest wakes the worker if it rests, to look again at why.
func (w *Worker) wakeRest() {
	w.restBell.Store(1)
	futex.Wake((*uint32)(unsafe.Pointer(&w.restBell)))
}

// Rests returns how often the worker has rested while worker 0 stepped its
// tasks.
func (w *Worker) Rests() int64 { return w.rests.Load() }

// Rested returns how long the worker has rested in all.
func (w *Worker) Rested() time.Duration { return time.Duration(w.restNs.Load()) }
