// Package sched runs tasks on a fixed set of worker threads.
//
// Each worker is a goroutine locked to its OS thread and pinned, with
// sched_setaffinity, to one CPU of Options.CPUs, by default the process's
// affinity mask (worker i to the i-th CPU, round robin). Tasks are
// assigned to workers when the pool starts; a worker visits its tasks in
// turn; each visit is one call to Task.Step, which does a bounded amount
// of work and says whether it made progress. A task is expected to run only when it can: an input has a
// frame and every output has room (availability, not blocking).
//
// # The policy core
//
// The workers' timing rules — the load review (rest, wake, lend), the idle
// ladder and the away rule here, background work's in bgPolicy (see
// Background work) — are deterministic cores in the manner of align's: no
// goroutines, clocks, atomics or futexes. The threads observe (the
// counters and flags they publish anyway), call a core with the time they
// read, and carry out what it decides. The first three are in load.go:
//
//	core                                    inputs                          decisions
//	loadPolicy.Review(now, wakeUntil, obs)  every worker's time behind,     lend, end rests,
//	                                        worker 0's busy time and        wake, unlend, rest
//	                                        rounds, WakeFor's deadline
//	loadPolicy.StopHosting()                worker 0's tasks are done       end every rest
//	idleLadder.next(progress, spin)         a poll's outcome, whether the   poll, spin, yield,
//	                                        pool allows spinning            park
//	judgeAway(peer, now)                    a peer's lock, done, resting,   here or away, and
//	                                        parked, doorbell, wakeAt, seen  why
//
// The thresholds of every rule sit in one table, params.go, each with its
// reason, together with the few a job uses to drive the pool (the lead and
// length of a checkpoint's announced burst, the patience for a checkpoint
// interval, the spare P, the niceness of a helper thread);
// testdata/load/*.txt and testdata/background/*.txt are the narrated
// golden scenarios, one per rule, that put each threshold on both sides
// of its edge.
//
// # Taking over a worker whose thread is away
//
// A pinned thread that loses its core cannot run anywhere else. On a
// machine whose cores the workers keep, any other thread that becomes
// runnable — a checkpoint's commit in a file system call, the Go runtime,
// another process — takes a worker's core until it blocks or a scheduler
// tick preempts it, milliseconds at times, and the records queued for that
// worker's tasks would wait as long. So every stealCheck (5µs), between its
// own polls, a worker looks at its peers and polls once the tasks of each
// one that is away (Worker.Stolen counts these polls; Options.NoSteal
// turns them off). The away rule (judgeAway) reads a peer's published
// state in this order, and stops at the first that decides:
//
//	the peer's state                            verdict
//	its tasks' lock is held                     here: its tasks are being stepped
//	its tasks are all done                      here: nothing to take over
//	it rests                                    here: worker 0 steps its tasks
//	asleep, and its doorbell rang               away: work came, its thread is not back
//	asleep, and now >= its wakeAt               away: its deadline passed, it is not back
//	asleep otherwise                            here: it sleeps with nothing to do
//	not round its loop for stealAfter (10µs)    away: its thread lost its core between
//	                                            idle polls, or is in background work
//	otherwise                                   here
//
// A peer under load holds its lock, so looking at it costs one load.
//
// Each worker's tasks have a lock, held by whichever thread steps them. A
// worker keeps its own lock while its tasks make progress, so that under
// load it costs nothing, and lets go of it when they are idle and while it
// runs background work, which must therefore not touch what the tasks own
// (a checkpoint's write-out reads frozen copy-on-write snapshots, which
// any thread may read while the tasks write). A worker can only be taken
// over between steps, never half-way through one, and the lock orders the
// tasks' memory between the threads: a task still sees its steps one at a
// time and in order.
//
// # Resting: fewer workers at light load
//
// A worker that polls its tasks keeps its core even when they need a
// sliver of it, and on a machine whose cores the workers keep, any other
// thread that becomes runnable — the checkpoint's commit, the Go runtime,
// another process — then takes a worker's core, and the records queued
// for that worker wait. So the pool uses no more workers than its load
// needs. A task says it is behind by returning Backlogged (it did work and
// more is already waiting: its step's budget ran out, or a source had more
// due than one step emits); each worker counts the time it spends in rounds
// where one was, and the time and number of its rounds that found work.
// Worker 0 feeds these counters to the load review (loadPolicy) at every
// round; the review acts on a new Pool.WakeFor deadline at once and looks
// at the load every restCheck (10ms). A worker other than worker 0 moves
// between these states:
//
//	               (1) rest
//	 +---------+ -----------> +---------------+  its thread  +---------+
//	 | working |              | asked to rest | -----------> | resting |
//	 +---------+ <----------- +---------------+  sees it     +---------+
//	   ^  ^  ^    (2) wake,                                    |     |
//	   |  |  |    (3) end hosting                              |     |
//	   |  |  +-------------------------------------------------+     |
//	   |  |      (2) wake, (3) end hosting: its thread is back       |
//	   |  |      on its own tasks (worker 0 steps them until then)   |
//	   |  |                                                          |
//	   |  | (5) unlend    +------+        (4) lend                   |
//	   |  +-------------- | lent | <---------------------------------+
//	   |                  +------+
//	   |                     | (6) rest again
//	   |                     +-----------------> asked to rest
//	   |
//	   worker 0: always working; it hosts the tasks of those that rest
//
//	(1) rest: every working worker has spent under restCalmShare (10%) of
//	    its time behind for restCalm (100ms), and neither the cooldown nor
//	    a WakeFor deadline is ahead: the highest-numbered working worker is
//	    asked to rest.
//	(2) wake: over its last restBusyChecks (10) reviews, worker 0 spent
//	    over restBusyShare (half) of its time behind, or its rounds that
//	    found work took over restRoundMax (6µs) on average (a record waits
//	    about a round at each hop, and the rounds grow with the load before
//	    any task is behind): the worker that rested last is woken. No worker
//	    rests for the cooldown after: restCooldown (1s), twice as long each
//	    time the rest that ended lasted under restShortRest (2s: a load one
//	    worker fewer cannot carry), up to restCooldownMax (16s), and back to
//	    1s after a longer rest.
//	(3) end hosting: worker 0's own tasks are done and it is about to exit:
//	    every resting worker steps its own tasks again, for good, and the
//	    review is off.
//	(4) lend: Pool.WakeFor announces a burst of work for the tasks (a
//	    checkpoint's barrier and copy-on-write): at worker 0's next round
//	    every resting worker is woken and lent — it steps its own tasks and
//	    still runs worker 0's background work — and no worker rests before
//	    the deadline.
//	(5) unlend: a working worker is still behind restCalm past the
//	    deadline: the load came to stay, and the lent workers work for it.
//	(6) rest again: every working worker has been calm restBurstCalm
//	    (20ms) past the deadline. The rest the load allowed before the lend
//	    goes on: it is not a new one, so a wake for load later does not
//	    find it short.
//
// A resting worker lets go of its tasks and sleeps on a futex word that no
// ring rings; worker 0 steps its tasks with its own, at every round and
// each under its lock as a peer's poll is, sleeps with their
// announcements on the rings as well as its own, and hears their
// doorbells (a resting worker's Wake passes the ring on). The resting
// worker's thread wakes for background work: its own, and worker 0's,
// which worker 0 passes to it (the write-out of a checkpoint then runs on
// a core of its own, next to the commit, while worker 0 steps the tasks).
// A worker on its way back from a rest has its tasks stepped by worker 0
// until its thread runs, which a woken thread does only after a while.
// The job calls Pool.WakeFor 1ms before each periodic checkpoint's
// trigger.
//
// Options.NoRest turns resting off; Worker.Rests and Worker.Rested count
// it.
//
// Pool.At has a worker run a short function on its own thread at a given
// time, between its steps (the job's checkpoint triggers): nothing else
// then needs a core, where a goroutine's thread woken for it would take a
// worker's.
//
// # Idling: spin, yield, park
//
// A worker whose tasks all report no progress climbs a ladder (idleLadder),
// counting its polls in a row that found no work:
//
//	     a poll with progress, on any rung: poll again at once, from the bottom
//	   +----------------------------------------------------------+
//	   v                                                          |
//	+------+  spinPolls (200)  +-------+  yieldPolls (20)  +------+
//	| spin | ----------------> | yield | ----------------> | park |
//	+------+  polls in a row   +-------+  more             +------+
//	 ^    |   without work      ^    |                      ^    |
//	 +----+                     +----+                      +----+
//	 no work: a PAUSE,          no work: a sched_yield,     woken, no work:
//	 poll again                 poll again                  park again
//
// It re-polls with a PAUSE between polls (spin), then yields its thread
// to the OS scheduler (sched_yield: runtime.Gosched from a goroutine locked
// to its thread costs a hand-off of the thread's P and back), then parks.
// Spinning is skipped entirely when the pool has more workers than the
// process has CPUs, so there are never more spinning threads than cores:
// the ladder yields from the first idle poll. A wait without a poll of
// the worker's own (a peer is stepping its tasks, or the worker waits for
// their lock) takes the rung of the current count, and never parks.
//
// To park, the worker asks every task to announce the sleep on the rings it
// waits for (Task.PrepareToPark sets the rings' parked words and re-checks
// them); if any task finds work in the meantime, the worker withdraws the
// announcements and goes on. Otherwise it sleeps on its doorbell, a futex
// word, until a ring's other side rings it (the doorbell is the rings'
// ring.Waker), until the earliest Task.Deadline (timers, rate-limited
// sources, batch flush delays), or until the pool stops. The ring protocol's
// sequentially consistent parked-word handshake guarantees that a publish
// racing with the announcement either is seen by the re-check or rings the
// doorbell. A sleep still lasts at most maxPark (20ms), a safety net against
// a lost wake-up nobody foresaw; RINGFLOW_DEBUG_STALL=<duration> makes a
// worker that stays idle that long describe its tasks through
// Options.Logger.
//
// # Background work
//
// Worker.Background queues work that a task hands off but that must not
// delay its records (the write-out of a checkpoint). Where and when it
// runs is decided by a deterministic core, bgPolicy (bgpolicy.go, with
// golden scenarios in testdata/background), which the worker's thread
// feeds with what it observes and whose decisions it carries out:
//
//	queued job ──► worker rests or is lent? ──yes──► its own core (Resting)
//	                 │ no
//	                 ▼
//	          saturated? ──yes──► the pool's thread (offload.go)
//	   (< 1/5 idle and not       unpinned, SCHED_BATCH, jobs in order
//	    calm, over five 10ms)
//	                 │ no
//	                 ▼
//	   slices on the worker's own thread, as a coroutine:
//	     - an idle round (no task made progress): a 20µs slice, ended at
//	       the first Pause after a task says it is ready (Readier);
//	     - behind busy tasks, once the work has waited the pool's patience
//	       (Options.BackgroundPatience): a slice every 80µs of 1/4 of the
//	       time the tasks had (the thread's CPU time, if less), so ~20% of
//	       the worker however long its steps;
//	     - a resting worker: 200µs slices.
//
// The guarantee (DESIGN.md's invariant 6): while work is pending, it runs
// at a share of at least bgMinShare (1/5) of a core, whatever the load. A
// worker measures, over windows of 10ms, the share of its time in rounds
// where no task made progress (idle), and averages it over the last five
// windows. While the idle share is at least 1/5, the work runs in that
// idle time, where it delays no record by more than a Pause, or in busy
// slices once it has waited its patience. When it is less, the worker is
// saturated, whether or not its tasks fall behind: one that finds a record
// at every round of a paced source keeps up with it, yet gives the work no
// idle round, and the work would wait its patience and then run in a fifth
// of the worker. A burst of work for the tasks, such as the copy-on-write
// after a barrier, is no saturation, as the average spans 50ms, nor is any
// worker's load while another rests, is asked to or is lent (the pool then
// has a core to spare, and worker 0 passes its jobs there: at light load
// the worker hosting a resting one's tasks also finds a record at every
// round). Jobs of a saturated worker that have not started go to
// the pool's own thread: an OS thread at the process's normal niceness,
// which the kernel's fair scheduler shares the cores with, as it does
// each worker (beside W busy workers on W cores it gets about W/(W+1) of
// a core). For these jobs its policy is SCHED_BATCH: woken, it waits for
// the running worker's turn to end rather than preempting it, so a worker
// is not switched out half-way through a barrier's synchronous snapshot
// where the process may not raise that to the real-time class.
// A job queued while the worker is saturated goes there directly, and so
// do later ones while any is still there, so that they run in the order
// queued. A job already running as a coroutine of the worker's thread
// stays and takes busy slices. Pool.Saturated reports the state, and
// Pool.Offload runs work from outside the pool with the same need on that
// thread (a checkpoint's commit, which would otherwise run at HelperNice),
// under the default policy: it sleeps on the disk several times and
// has little to compute, and under SCHED_BATCH it would wait for a
// worker's turn at every wake-up. Under both policies the thread asks for
// the kernel's shortest slice (affinity.ShortSlice): its turns then come
// sooner and end sooner than a worker's default one.
//
// Work that only waits on the disk (a sink's fsync of its transaction)
// is not background work at all: the job runs it on a goroutine of its
// own (operator.StateWriter.BeforeCommit), which costs the workers
// nothing while it sleeps.
//
// Why not always a thread of its own: at light load such a thread takes a
// pinned worker's core for a kernel time slice (or until it yields, which
// costs it its turn for a long time), and the records queued for that
// worker wait as long; idle time costs the records nothing. Why not busy
// slices alone: a slice can start only between steps, and the work waits
// for the patience first, so behind long steps (a slow sink's frames) or
// at full load it took hundreds of milliseconds; the pool's thread starts
// at once and is preempted by the kernel, not by a round. Why 1/5: below
// it a checkpoint's write-out of ~1MB (~2ms of CPU) would spread over tens
// of milliseconds of slivers of idle time; above it, workers with ample
// idle time would hand work to a thread that competes with them.
//
// The work calls Slice.Pause every few microseconds; the slice ends at the
// first Pause after its time is up. On the pool's thread Pause only says
// whether to go on. A worker with background work does not exit until the
// work on its thread is done, and Pool.Run returns only after the pool's
// thread has finished what it was given; when the pool stops, the work
// sees Pause report false.
//
// # Stalls
//
// A step is bounded to about a millisecond; one that takes longer than
// Options.StallBound (DefaultStallBound, 5ms) is a stall, and the worker
// whose thread ran it records where its time went (Pool.Stalls). Every
// StallBound/2 of its rounds a working thread reads its counters — its CPU
// time and time waiting for a core (schedstat), page faults and context
// switches (getrusage), and the runtime's GC cycles, pause and assist time
// and mutex waits — and it times each step with one monotonic clock read.
// A stall's description is the difference between the reading before it
// and one at its end, classified by classifyStall: a pure rule with golden
// scenarios in testdata/stall (preempted, blocked, page faults, gc pause,
// gc assist, lock, stolen by the host, or running its own work).
//
// A task that times a stretch of its step on its own — a checkpoint's
// synchronous part, which must not stall however long the step around
// it — reads the same counters around it with a Probe, has them explained
// by the same rule (Explain) and adds the result to the pool's stalls
// (RecordStall), named by Stall.Part.
//
// # Failures
//
// A task that returns an error or panics stops the pool: every worker
// finishes its current step and exits, and Run returns the first error
// (a panic is turned into an error carrying its stack). Run returns only
// after every worker goroutine has exited.
package sched
