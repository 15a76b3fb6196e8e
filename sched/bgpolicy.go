package sched

import "time"

// bgPolicy is the deterministic core of one worker's background work: it
// measures the share of the worker's time its tasks leave idle, and
// decides, from that and from the state of the work, where a job runs
// and when the worker gives it a slice, and how long. It reads no clock:
// every method takes the time (since any fixed origin) and what the
// worker observed.
type bgPolicy struct {
	// The current window of the measurement: when it began, and the
	// worker's cumulative busy time then.
	winStart, winBusy time.Duration
	started           bool
	// The last bgSaturatedWindows windows' shares of idle time, and how
	// many windows have been measured.
	recent [bgSaturatedWindows]float64
	n      int

	// last is when the worker last gave the work a slice; zero (never)
	// after the last job ends. lastCPU is the thread's CPU clock at the
	// last busy slice, or afterIdle after an idle or resting one.
	last    time.Duration
	lastSet bool
	lastCPU time.Duration
}

// afterIdle is bgPolicy.lastCPU after an idle or resting slice: the work
// has had its turn, so the next busy slice owes it nothing.
const afterIdle = -1

// observe feeds the worker's cumulative time in rounds where a task made
// progress (busy), at now. At the end of each window it records the
// window's share of idle time and reports true.
func (p *bgPolicy) observe(now, busy time.Duration) bool {
	if !p.started {
		p.winStart, p.winBusy, p.started = now, busy, true
		return false
	}
	span := now - p.winStart
	if span < bgWindow {
		return false
	}
	p.recent[p.n%bgSaturatedWindows] = min(max(1-float64(busy-p.winBusy)/float64(span), 0), 1)
	p.winStart, p.winBusy = now, busy
	p.n++
	return true
}

// idleShare returns the mean share of idle time over the recent windows;
// all idle before any window was measured.
func (p *bgPolicy) idleShare() float64 {
	k := min(p.n, bgSaturatedWindows)
	if k == 0 {
		return 1
	}
	idle := 0.0
	for _, w := range p.recent[:k] {
		idle += w
	}
	return idle / float64(k)
}

// saturated reports whether, over the last bgSaturatedWindows windows,
// the worker's tasks left it less idle time than background work is
// guaranteed (bgMinShare), however far behind they were: a worker that
// finds records at every round yet keeps up (a paced source at half the
// machine's load) has no idle round to give, and its work would wait the
// patience and then run in a fifth of it; on the pool's thread it ends
// sooner (docs/perf.md, "Long runs"). NB: a worker that finds a record at
// every round because it hosts a resting worker's tasks is no case for
// the pool's thread: the pool then has a worker to spare, which every
// caller checks first, and the work goes there.
func (p *bgPolicy) saturated() bool {
	return p.n >= bgSaturatedWindows && p.idleShare() < bgMinShare
}

// bgRound is what a worker with pending background work observed in one
// round of its loop.
type bgRound struct {
	now      time.Duration
	progress bool // a task made progress this round
	resting  bool // the worker rests: it has no tasks to step
	running  bool // a job has started on this thread and not finished
	spare    bool // a worker of the pool rests, is asked to, or is lent
	// patientFrom is when the pending work will have waited the pool's
	// patience (see Options.BackgroundPatience).
	patientFrom time.Duration
}

// bgAction is what the worker does with its background work this round.
type bgAction int

const (
	bgNone    bgAction = iota // step the tasks; no slice now
	bgIdle                    // a slice in the tasks' idle time (bgSlice; a ready task ends it)
	bgRest                    // a resting worker's slice (restSlice)
	bgBusy                    // a slice taken from busy tasks (length from busySlice)
	bgOffload                 // hand the queued jobs to the pool's thread
)

func (a bgAction) String() string {
	return [...]string{"none", "idle-slice", "rest-slice", "busy-slice", "offload"}[a]
}

// next decides what the worker does with its pending background work in
// round r.
//
// The rules, in order:
//   - a resting worker runs it in slices of restSlice;
//   - a saturated worker hands jobs that have not started to the pool's
//     thread (a job already running stays: it runs as a coroutine of
//     this thread), unless the pool has a worker to spare (one that rests
//     or is lent runs background work on its own core; see Resting);
//   - tasks that made no progress leave the round to the work (an idle
//     slice);
//   - work behind busy tasks gets a slice every bgBusyPeriod once it has
//     waited the pool's patience (a burst of work for the tasks, such as
//     the copy-on-write after a barrier, runs without slices taken out of
//     it).
func (p *bgPolicy) next(r bgRound) bgAction {
	switch {
	case r.resting:
		return bgRest
	case !r.running && !r.spare && p.saturated():
		return bgOffload
	case !r.progress:
		return bgIdle
	case (!p.lastSet || r.now-p.last >= bgBusyPeriod) && r.now >= r.patientFrom:
		return bgBusy
	}
	return bgNone
}

// slice returns how long the slice the worker gives the work in round r
// for action a lasts, and records it. cpu is the thread's CPU clock, read
// by the caller for busy slices only (it is a system call); 0 if unknown.
//
// A busy slice lasts 1/bgBusyShare of the time the tasks had since the
// last slice: the wall time, or the thread's CPU time if that is less
// (time the thread spent off its core is time nobody worked, and back
// from such a gap the tasks have a backlog). The first busy slice after an
// idle one, or after the work waited out its patience, is an ordinary
// one: the time it waited is not owed to it.
func (p *bgPolicy) slice(r bgRound, a bgAction, cpu time.Duration) time.Duration {
	d := bgSlice
	switch a {
	case bgRest:
		d = restSlice
		p.lastCPU = afterIdle
	case bgIdle:
		p.lastCPU = afterIdle
	case bgBusy:
		if p.lastCPU != afterIdle && p.lastSet && p.last >= r.patientFrom {
			had := r.now - p.last
			if cpu > 0 && p.lastCPU > 0 {
				had = min(had, cpu-p.lastCPU)
			}
			d = min(max(d, had/bgBusyShare), bgMaxSlice)
		}
		p.lastCPU = cpu
	}
	p.last, p.lastSet = r.now, true
	return d
}

// drained tells the policy the worker's last pending job has ended: the
// time until the next one is queued is not time the work waited.
func (p *bgPolicy) drained() { p.lastSet = false }
