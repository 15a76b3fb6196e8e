package sched

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/futex"
)

// The load review's parameters (see the package doc, "Resting").
const (
	// restCheck is how often worker 0 reviews the load.
	restCheck = 10 * time.Millisecond
	// restCalm is how long every working worker must have been calm —
	// under restCalmShare of its time in rounds where a task was
	// Backlogged — before one more rests.
	restCalm      = 100 * time.Millisecond
	restCalmShare = 0.10
	// restBusyShare: worker 0 wakes the worker that rested last when more
	// than this share of its own time in the last restBusyChecks reviews
	// went to backlogged rounds. (Not one review: the copy-on-write burst
	// after a checkpoint's barrier keeps a worker behind for a few
	// milliseconds, and that is no reason to wake another; nor are the
	// tens of milliseconds in which this VM's host takes a core away. Over
	// 50ms instead of 100, one run in three at 1M records/s with
	// checkpoints woke a worker that way, and that run's p99 was 41µs.)
	restBusyShare  = 0.5
	restBusyChecks = 10
	// restRoundMax: worker 0 also wakes the worker that rested last when
	// its rounds that found work took longer than this on average over the
	// last restBusyChecks reviews. A record waits about a round at every
	// hop between tasks; at light load worker 0's rounds with every task
	// take ~1µs here, and they grow with the load well before any task is
	// behind (keyed-count at 15M records/s: 4.5–8µs alone, against 2.5µs
	// on each of two workers, and a p99 of 130–260µs against 60–100).
	// It was 4µs, set on an AMD host; on the Intel host of docs/perf.md's
	// fifteenth session worker 0 alone at 1M records/s has rounds of
	// 3.6–4.3µs, every one with work, so that bound woke worker 1 one to
	// three times in ten seconds for no load it could not carry, and a run
	// with both workers awake at that load has a p99 three to ten times
	// as high. At 6µs worker 0 carries 1M records/s alone there; at 2–3M
	// it often does too, with a p99 no worse.
	restRoundMax = 6 * time.Microsecond
	// After worker 0 wakes a worker, none rests for restCooldown; the
	// wait doubles, up to restCooldownMax, each time a rest ends within
	// restShortRest of its start (a load that one worker fewer cannot
	// carry), and is back to restCooldown after a longer one.
	restCooldown    = time.Second
	restCooldownMax = 16 * time.Second
	restShortRest   = 2 * time.Second
	// restBurstCalm: after Pool.WakeFor, the woken workers rest again once
	// every working worker has been calm this long past its deadline.
	restBurstCalm = 20 * time.Millisecond
)

// restControl is worker 0's state for the load review; only its thread
// touches it.
type restControl struct {
	off    bool // Options.NoRest, a single worker, or worker 0 has finished
	active int  // workers 0..active-1 step tasks; the others are asked to rest
	// wakeUntil is Pool.WakeFor's latest deadline (see sinceEpoch); woke
	// is the one worker 0 has acted on.
	wakeUntil atomic.Int64
	woke      int64
	burst     bool // the workers awake are lent (Pool.WakeFor): a short calm will do

	checked   time.Time     // the last review; zero before the first
	calmSince time.Time     // since when every working worker has been calm
	until     time.Time     // no worker rests before this
	cooldown  time.Duration // the next wait after a wake
	restedAt  time.Time     // when a worker was last asked to rest for a calm load (not after a lend)
	backlog   []int64       // each worker's backlogNs at the last review
	// worker 0's busyNs and busyRounds at the last review, and what it did
	// in each of the last restBusyChecks reviews
	busyNs, busyRounds int64
	recent             [restBusyChecks]restWindow
	nth                int
	woken              int // wakes of a resting worker, for tests
}

// restWindow is what worker 0 did between two reviews: the share of the
// time it was behind, and its rounds with work and their time.
type restWindow struct {
	backlog            float64
	busyNs, busyRounds int64
}

// reviewLoad, on worker 0 every restCheck, asks one more worker to rest
// when every working one has been calm for restCalm, and wakes the one that
// rested last when worker 0 falls behind.
func (w *Worker) reviewLoad(now time.Time) {
	c := &w.pool.rest
	if c.off || now.Sub(c.checked) < restCheck {
		return
	}
	ws := w.pool.workers
	if c.checked.IsZero() {
		c.backlog = make([]int64, len(ws))
		for i, p := range ws {
			c.backlog[i] = p.backlogNs.Load()
		}
		c.busyNs, c.busyRounds = w.busyNs.Load(), w.busyRounds.Load()
		c.checked, c.calmSince, c.cooldown = now, now, restCooldown
		return
	}
	elapsed := float64(now.Sub(c.checked))
	c.checked = now
	calm := true
	for i, p := range ws {
		b := p.backlogNs.Load()
		share := float64(b-c.backlog[i]) / elapsed
		c.backlog[i] = b
		if i < c.active && share >= restCalmShare {
			calm = false
		}
		if i == 0 {
			ns, n := p.busyNs.Load(), p.busyRounds.Load()
			c.recent[c.nth%restBusyChecks] = restWindow{share, ns - c.busyNs, n - c.busyRounds}
			c.busyNs, c.busyRounds = ns, n
			c.nth++
		}
	}
	// Worker 0 over the last restBusyChecks reviews: the share of its time
	// it was behind, and how long its rounds with work took.
	var behind float64
	var roundNs, rounds int64
	for _, r := range c.recent {
		behind += r.backlog / restBusyChecks
		roundNs, rounds = roundNs+r.busyNs, rounds+r.busyRounds
	}
	slow := rounds > 0 && time.Duration(roundNs/rounds) > restRoundMax
	switch {
	case c.active < len(ws) && (behind > restBusyShare || slow):
		if now.Sub(c.restedAt) < restShortRest {
			c.cooldown = min(2*c.cooldown, restCooldownMax)
		} else {
			c.cooldown = restCooldown
		}
		c.until, c.calmSince, c.recent = now.Add(c.cooldown), now, [restBusyChecks]restWindow{}
		ws[c.active].endRest()
		c.active++
		c.woken++
	case !calm:
		c.calmSince = now
		if c.burst && now.Sub(c.until) > restCalm {
			c.unlend(ws) // the load came to stay: the lent workers work
		}
	case c.active > 1 && now.Sub(c.calmSince) >= c.calmNeeded() && !now.Before(c.until):
		c.active--
		c.calmSince = now
		g := ws[c.active]
		if g.lent.Load() {
			g.lent.Store(false)
			c.burst = c.active > 1 && ws[c.active-1].lent.Load()
		} else {
			// NB: a lent worker resting again goes on with the rest the
			// load allowed before Pool.WakeFor; it does not start one.
			// Counted from here, a wake for load a second after the last
			// checkpoint's lend looked like a rest that had failed, and
			// with a checkpoint every second the cooldown doubled at every
			// wake, to 16s of both workers polling.
			c.restedAt = now
		}
		g.restWanted.Store(true)
		g.Wake() // if it sleeps on its doorbell, so that it rests now
	}
}

// calmNeeded is how long every working worker must have been calm before
// one more rests.
func (c *restControl) calmNeeded() time.Duration {
	if c.burst {
		return restBurstCalm
	}
	return restCalm
}

// WakeFor tells the pool that a burst of work for the tasks is coming that
// every core should share — a checkpoint's barrier, the synchronous
// snapshots and the copy-on-write after it: every resting worker steps its
// own tasks again from worker 0's next round until at least d from now,
// and rests again once calm for 20ms after that. Meanwhile such a worker
// is lent: worker 0 still passes its background work to it. Without
// resting workers WakeFor only holds rests back until then.
//
// Why: at light load worker 0 steps every task, and after a barrier each
// first write to a page of state copies it; the longer worker 0's round,
// the more records the next one brings, each likely to touch a page not
// yet copied, and the rounds grew to 300–700µs for 5–10ms after every
// checkpoint at 1M records/s. Woken a little before the trigger, the other
// worker takes its own subtasks' share and the rounds stay under ~200µs.
func (p *Pool) WakeFor(d time.Duration) {
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

// lendAll, on worker 0 at every round, acts on a new Pool.WakeFor: it
// wakes every resting worker, marking it lent, and holds rests back until
// the deadline.
func (w *Worker) lendAll(now time.Time) {
	c := &w.pool.rest
	u := c.wakeUntil.Load()
	if u == c.woke {
		return
	}
	c.woke = u
	until := epoch.Add(time.Duration(u))
	if c.active < len(w.pool.workers) {
		for _, g := range w.pool.workers[c.active:] {
			g.lent.Store(true)
			g.endRest()
		}
		c.active = len(w.pool.workers)
		c.burst = true
	}
	if until.After(c.until) {
		c.until = until
	}
	c.calmSince = until
}

// unlend ends every worker's lending: worker 0 keeps its background work
// again.
func (c *restControl) unlend(ws []*Worker) {
	for _, g := range ws {
		g.lent.Store(false)
	}
	c.burst = false
}

// stopHosting wakes every resting worker for good: worker 0's own tasks
// are done, and it is about to exit.
func (w *Worker) stopHosting() {
	c := &w.pool.rest
	c.off = true
	for _, g := range w.pool.workers[c.active:] {
		g.endRest()
	}
	c.active = len(w.pool.workers)
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
// 0 wants it to rest. (A woken thread takes 100–300µs here to run, and
// records for its tasks would wait as long.)
func (g *Worker) guest() bool { return g.resting.Load() }

// pollGuests steps, once, the tasks of every resting worker (worker 0
// only).
func (w *Worker) pollGuests(now time.Time) (progress, backlog bool, err error) {
	for _, g := range w.pool.workers[1:] {
		if !g.guest() || !g.held.CompareAndSwap(false, true) {
			continue
		}
		got, behind, err := g.poll(now)
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
	w.bg.policy.started, w.bg.policy.short = false, 0
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
