package sched

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow/internal/affinity"
)

// offloader is the pool's own thread for background work that a saturated
// worker cannot give its guaranteed share (see bgPolicy), and for work
// outside the pool with the same need (Pool.Offload): an OS thread of its
// own, unpinned, at the process's normal niceness, so that the kernel's
// fair scheduler gives it a share of the cores as it does each worker,
// and the work's duration is set by its own size rather than by how busy
// the tasks are. Its policy is SCHED_BATCH: when it wakes it waits for the
// running worker's turn to end instead of preempting it, so that work
// that can wait for a tick does not switch a worker out in the middle of
// a barrier's synchronous snapshot, which takes microseconds, where the
// process may not raise the snapshot to the real-time class (see
// affinity.Raise). Work handed
// over with Pool.Offload (a commit) runs under the default policy
// instead: it sleeps on the disk several times, and under SCHED_BATCH it
// would wait for a worker's turn to end at every wake-up; it has little to
// compute. Under both policies the thread asks the kernel for its
// shortest slice (affinity.ShortSlice): a turn of the default length
// (~1.4ms on 2 CPUs) would keep the worker it displaced off its CPU as
// long, and a short one gets an earlier deadline, so the work's turns
// come sooner. At full load this halves the time from a checkpoint's last
// write to its durable commit (see docs/perf.md, "Checkpoint progress
// under load"). It runs jobs one at a time, in the order handed over, to
// the end: its Slice never pauses, and reports false only once the pool
// stops.
type offloader struct {
	pool *Pool
	mu   struct {
		sync.Mutex
		queue   []offJob
		running bool // the thread has started and not exited
		last    bool // no worker runs any more: exit once the queue is empty
	}
	exited sync.Cond // on mu: running became false
	bell   chan struct{}
}

// offJob is a job for the pool's thread, and whether it runs under
// SCHED_BATCH.
type offJob struct {
	run   func(*Slice)
	batch bool
}

// Offload runs job on the pool's own thread, after what it has been
// given before (see the package doc, "Background work"), under the
// default scheduling policy. It is for work that must progress while the
// pool is saturated (Saturated) and blocks on I/O, such as a checkpoint's
// commit. job's Slice never pauses; it reports false once the pool stops,
// and job should then return soon.
func (p *Pool) Offload(job func(*Slice)) { p.off.add(offJob{run: job}) }

// add queues job and starts the thread if it is not running. Callers hold
// the handing worker's background lock, so a worker's jobs arrive in order.
func (o *offloader) add(job offJob) {
	o.mu.Lock()
	o.mu.queue = append(o.mu.queue, job)
	start := !o.mu.running
	o.mu.running = true
	o.mu.Unlock()
	if start {
		go o.run()
	}
	o.poke()
}

// finish tells the thread that no worker runs any more, and waits until it
// has run what it has and exited. Pool.Run calls it last. NB: work handed
// over later (a commit after the pool ended) still runs, on a thread
// started anew, which nothing waits for but the caller.
func (o *offloader) finish() {
	o.mu.Lock()
	o.mu.last = true
	o.mu.Unlock()
	o.poke()
	o.mu.Lock()
	for o.mu.running {
		o.exited.Wait()
	}
	o.mu.Unlock()
}

// poke wakes the thread if it waits for work.
func (o *offloader) poke() {
	select {
	case o.bell <- struct{}{}:
	default:
	}
}

func (o *offloader) run() {
	// NB: locked for good, so that the thread exits with the goroutine and
	// its mask and niceness never pass to another goroutine; both are set
	// explicitly, as a new thread inherits them from whichever thread the
	// runtime cloned it from.
	runtime.LockOSThread()
	if cpus := o.pool.cpus; cpus != nil {
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		unix.SchedSetaffinity(0, &set)
	}
	// NB: an error leaves the thread under the policy it had, which costs
	// only some waiting, the workers' or the job's.
	batch := false
	affinity.SetPolicy(affinity.Policy{Slice: affinity.ShortSlice})
	for {
		o.mu.Lock()
		if len(o.mu.queue) == 0 {
			if o.mu.last {
				o.mu.running = false
				o.exited.Broadcast()
				o.mu.Unlock()
				return
			}
			o.mu.Unlock()
			<-o.bell
			continue
		}
		job := o.mu.queue[0]
		o.mu.queue[0] = offJob{}
		o.mu.queue = o.mu.queue[1:]
		o.mu.Unlock()
		if job.batch != batch {
			if affinity.SetPolicy(affinity.Policy{Batch: job.batch, Slice: affinity.ShortSlice}) == nil {
				batch = job.batch
			}
		}
		o.runJob(job.run)
	}
}

// runJob runs job to its end; a panic in it stops the pool. Once the pool
// is stopping the job sees Pause report false, at its first call if it
// had not started.
func (o *offloader) runJob(job func(*Slice)) {
	s := &Slice{pool: o.pool, stopped: o.pool.stopped.Load()}
	defer func() {
		if r := recover(); r != nil {
			o.pool.fail(fmt.Errorf("sched: background work on the pool's thread: %w",
				&PanicError{Value: r, Stack: debug.Stack()}))
		}
	}()
	job(s)
}
