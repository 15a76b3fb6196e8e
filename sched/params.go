package sched

import "time"

// The scheduling policy's parameters, in one table: every threshold, share,
// period and slice of the policy cores (the load review, the idle ladder and
// the away rule in load.go; background work in bgpolicy.go), and those a job
// uses to drive the pool (exported), each with its reason. The package doc
// tells how each rule uses them; the golden scenarios in testdata put each
// threshold on both sides of its edge.
//
// Most are shares of a worker's time or multiples of what the pool measures,
// and hold on any host. Those that are times bound a wait a record or a
// piece of work may suffer (a slice, a hop), or set how often the pool
// looks at something whose cost is known (a system call, a review of the
// counters), and say so.

// The load review, the idle ladder and the away rule (see the package doc,
// "Resting", "Idling" and "Taking over"). Times are durations on the
// caller's clock.
const (
	// restCheck is how often worker 0 reviews the load: often enough that a
	// wake follows a rise in load within a few milliseconds of the evidence,
	// rarely enough that the review's loads of every worker's counters cost
	// nothing.
	restCheck = 10 * time.Millisecond
	// restCalm is how long every working worker must have been calm —
	// under restCalmShare of its time in rounds where a task was
	// Backlogged — before one more rests. A tenth of the time behind is
	// load a worker carries with room to spare; a tenth of a second of it
	// rules out a lull between bursts.
	restCalm      = 100 * time.Millisecond
	restCalmShare = 0.10
	// restBusyShare: worker 0 wakes the worker that rested last when more
	// than this share of its own time in the last restBusyChecks reviews
	// went to backlogged rounds. The window is restBusyChecks reviews, not
	// one: the copy-on-write burst after a checkpoint's barrier keeps a
	// worker behind for a few milliseconds, and a virtual machine's host
	// takes a core away for tens of them; neither is a load that needs
	// another worker.
	restBusyShare  = 0.5
	restBusyChecks = 10
	// restRoundMax: worker 0 also wakes the worker that rested last when
	// its rounds that found work took longer than this on average over the
	// last restBusyChecks reviews. A record waits about a round at every
	// hop between tasks, and the rounds grow with the load well before any
	// task is behind, so this bounds the wait per hop that fewer workers
	// add. It is absolute because what it bounds is: a latency budget per
	// hop, not a property of the load. Its value is a judgement, not
	// derived from what the pool measures: long enough that one worker
	// keeps a light load whose rounds a second worker would not shorten
	// much (and would cost a busy-polling core), short enough to wake for
	// a load that makes the rounds several times those at rest. A bound
	// relative to the round time at rest is no better: a light load that
	// one worker carries well can have rounds four times those at rest,
	// and the ratio would then depend on the tasks' mix instead of the
	// host.
	restRoundMax = 6 * time.Microsecond
	// After worker 0 wakes a worker, none rests for restCooldown; the
	// wait doubles, up to restCooldownMax, each time a rest ends within
	// restShortRest of its start (a load that one worker fewer cannot
	// carry: resting it again soon would only wake it again), and is back
	// to restCooldown after a longer one. A second is long against a
	// review and short against a load that changes; 16 of them bound the
	// time both workers poll at a load that comes and goes.
	restCooldown    = time.Second
	restCooldownMax = 16 * time.Second
	restShortRest   = 2 * time.Second
	// restBurstCalm: after Pool.WakeFor, the lent workers rest again once
	// every working worker has been calm this long past its deadline. A
	// burst the job announced is over when it is over; there is no lull
	// to rule out, only the burst's tail (a checkpoint's copy-on-write
	// lasts a few milliseconds).
	restBurstCalm = 20 * time.Millisecond

	// ladderSpinPolls and ladderYieldPolls are the idle ladder's rungs, in
	// polls in a row that found no work: a PAUSE between polls before
	// ladderSpinPolls, then a sched_yield between polls for
	// ladderYieldPolls more, then park. Spinning catches work that comes
	// within a short while at the cost of no system call; yielding gives
	// the core to any other runnable thread, which then runs in the idle
	// worker's time instead of taking a busy worker's core later; parking
	// frees the core, and its wake-up costs a futex call on each side.
	ladderSpinPolls  = 200
	ladderYieldPolls = 20
	// maxPark bounds one sleep of an idle or resting worker: a safety net
	// against a lost wake-up nobody foresaw, at the cost of a poll every
	// maxPark.
	maxPark = 20 * time.Millisecond

	// stealAfter is how long a worker's thread must have been away from
	// its loop, without holding its tasks' lock, before a peer runs them;
	// a worker looks at its peers every stealCheck. An idle worker goes
	// round its loop at every poll, and a yield takes microseconds, so a
	// thread not round its loop for 10µs has lost its core or is in
	// background work; against the kernel's milliseconds that is short.
	// A worker whose polls all find work (a paced source at light load)
	// looks every 5µs rather than at every round: a peer's thread is
	// rarely away, and a look loads the peers' lines.
	stealAfter = 10 * time.Microsecond
	stealCheck = 5 * time.Microsecond
)

// Background work (see the package doc, "Background work"). Each is a
// share or a multiple of something the policy measures, except the slice
// lengths, which bound how long a record waits behind a slice.
const (
	// bgMinShare is the share of one core a worker's pending background
	// work is guaranteed. A worker whose tasks left it at least this much
	// idle time (averaged over bgSaturatedWindows windows) runs the work
	// there; one whose tasks left less (it is saturated) hands its work
	// to the pool's own thread, which the
	// kernel's fair scheduler gives a share of the cores like any
	// worker's. At 1/5 the asynchronous part of a
	// checkpoint takes at most about five times its own CPU time; a
	// lower share would let a write-out of ~1MB of in-flight data (~2ms
	// of encoding) wait tens of milliseconds in slivers of idle time.
	bgMinShare = 0.2
	// bgWindow is the span over which a worker measures the share of its
	// time its tasks left idle: long enough to hold many rounds (~1µs
	// each at light load), short enough that a checkpoint's work sees a
	// change of load within a few windows.
	bgWindow = 10 * time.Millisecond
	// bgSaturatedWindows is how many windows a worker's measurements are
	// averaged over: it is saturated when, over the last ones, its tasks
	// left it under bgMinShare idle. A burst of work for the tasks, such as
	// the copy-on-write after a checkpoint's barrier (a few milliseconds),
	// is not saturation, and handing a large write-out to a thread of its
	// own then takes a worker's core while the records of the burst wait;
	// an average rather than every window, because a saturated worker
	// still has a window with some idle time now and then (its outputs
	// full for a moment).
	bgSaturatedWindows = 5
	// bgSlice is how long a slice of background work runs, at most (give
	// or take the interval between its Pause calls), before its worker
	// steps the tasks again: the longest a record that arrives meanwhile
	// waits for it.
	bgSlice = 20 * time.Microsecond
	// bgBusyPeriod is how long a worker whose tasks always have work steps
	// them before it gives a job that has already started another slice;
	// the slice then lasts 1/bgBusyShare of the time the tasks had since
	// the last one (at least bgSlice, at most bgMaxSlice), so that such a
	// job gets about 1/(bgBusyShare+1) of the worker however long the
	// tasks' steps take.
	bgBusyPeriod = 4 * bgSlice
	bgBusyShare  = 4
	bgMaxSlice   = 2 * time.Millisecond
	// restSlice is how long a resting worker's background work runs
	// before the worker looks at whether it should still rest.
	restSlice = 200 * time.Microsecond
)

// DefaultBackgroundPatience is how long background work waits for the
// tasks' idle time before it claims a share of a busy worker, unless
// Options.BackgroundPatience says otherwise: from when a job is queued on a
// worker that had none pending. A burst of work for the tasks then runs
// without slices taken out of it. The write-out of a checkpoint is queued
// right after the barrier, when the tasks' first write to each page of
// their state copies it: at 1M records/s a worker's steps took ~1µs per
// record for the first milliseconds instead of ~0.1µs, and the busy slices
// on top of that pushed it into a backlog: 33–56% of the records sampled
// in the first millisecond after a barrier, and 8–23% in the next four,
// took over 30µs; with slices held back 10ms, 25% and 2–5% (1% and under
// without checkpoints). Busy slices hurt later in the write-out too, and
// at that load the work does not need them (idle slices finish it): held
// back 60ms rather than 10ms, the samples over 150µs generated 20–100ms
// after a barrier went from 105 to 62 in six runs, and checkpoints took
// no longer. Work that must finish at full load takes the patience longer.
const DefaultBackgroundPatience = 60 * time.Millisecond

// PatienceFor is the background patience for checkpoints taken every
// interval: DefaultBackgroundPatience, or a quarter of the interval if
// that is shorter, so that the write-out waits for idle time at most a
// quarter of the time until the next checkpoint; -1 (no patience) for an
// interval too short to have a quarter.
func PatienceFor(interval time.Duration) time.Duration {
	if p := min(DefaultBackgroundPatience, interval/4); p > 0 {
		return p
	}
	return -1
}

// Bursts a job announces (Pool.WakeFor) before each periodic checkpoint.
const (
	// WakeLead is how long before a checkpoint's trigger the job wakes the
	// resting workers: a sleeping thread takes 100–300µs to run after its
	// wake-up, and the barrier should find it running.
	WakeLead = time.Millisecond
	// WakeBurst is how long after the trigger they stay awake at least:
	// the copy-on-write burst after a barrier lasts a few milliseconds
	// once it is shared between workers.
	WakeBurst = 10 * time.Millisecond
)

// Threads outside the pool that work for its tasks.
const (
	// SpareProcs is how many Ps (GOMAXPROCS) a job wants beyond one per
	// worker: by default it runs fewer workers to keep them, or raises
	// GOMAXPROCS if its Config lets it (ringflow.Config.RaiseGOMAXPROCS).
	// Each worker holds a P for as long as it runs; without a spare one,
	// the garbage collector's mark worker, the checkpoint's writer and
	// commit and the runtime's timers can only run by taking a worker's
	// P, stalling its tasks for as long (a GC mark phase: tens of
	// milliseconds with a large state). One is enough: what runs there
	// mostly waits on the disk.
	SpareProcs = 1
	// HelperNice is the niceness of a thread that works for the tasks
	// without being one of the pool's (a job's checkpoint writer, which
	// commits): processing never waits for it, so on a machine whose
	// cores the workers keep busy it yields to them. Niceness sets only
	// its share of a core; HelperYield bounds how long it keeps one. When
	// the pool is saturated that share, about a tenth of a core, is too
	// little (see Pool.Offload).
	HelperNice = 10
	// HelperYield is how long such a thread runs before it offers its CPU
	// back to whatever else is runnable there (affinity.Yielder): without
	// it the kernel let it run until its next tick (4ms at HZ=250) before
	// the worker it displaced got its core back, whatever its niceness,
	// and the records in that worker's rings waited as long.
	HelperYield = 200 * time.Microsecond
)

// preemptCheck is how often a worker reads its thread's count of
// involuntary context switches (a system call, ~0.3µs).
const preemptCheck = 100 * time.Millisecond
