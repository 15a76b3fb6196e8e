package affinity

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Usable returns the CPUs this process may run on, in increasing order.
func Usable() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("affinity: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Pin locks the calling goroutine to its OS thread and restricts that thread
// to cpu. The caller must call the returned function (which unlocks the
// thread) from the same goroutine when it is done. A thread pinned this way
// keeps its mask after UnlockOSThread, so unpinning restores the mask it had.
func Pin(cpu int) (unpin func(), err error) {
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("affinity: sched_getaffinity: %w", err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("affinity: pin to CPU %d: %w", cpu, err)
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

// Yield gives the calling OS thread's CPU to another runnable thread, if
// any, and returns (sched_yield(2)).
//
// NB: for a goroutine locked to its thread, as pinned workers are, this is
// the cheap way to yield: runtime.Gosched from a locked goroutine hands its
// P to another thread and parks the locked one until that thread hands the
// goroutine back, two futex round trips (tens of µs on a VM). Pinned
// workers that yielded that way when idle had a p99 latency of 133-166 µs
// on dfbench's keyed-count at 10% load, 71-97 µs with this.
//
// NB: a Syscall, not a RawSyscall, though sched_yield never blocks long:
// Syscall tells the runtime the goroutine is in the kernel, so that a
// stop-the-world (a garbage collection's, a goroutine profile's) can go on
// without it. A goroutine looping on a raw sched_yield spends almost all
// its time in the kernel or in the assembly around the call, where the
// runtime cannot preempt it, and the world waited for it for seconds —
// with every other goroutine, the peer that held a lock it was waiting
// for among them, already stopped (TestYieldLetsTheWorldStop).
func Yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Preemptions returns how often the calling OS thread was switched out
// while it could still run — the kernel's count of its involuntary context
// switches (getrusage RUSAGE_THREAD, ru_nivcsw), which includes a Yield
// that gave the core to another thread — or -1 if it cannot be read.
func Preemptions() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return -1
	}
	return ru.Nivcsw
}

// ThreadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID): unlike the wall clock, it does not advance
// while the thread is off its core, nor, in a guest whose kernel accounts
// steal time, while the host runs something else on the vCPU. It is a
// system call (the vDSO does not serve per-thread clocks), ~0.3µs here; 0
// if the clock cannot be read.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Policy is how the kernel schedules a thread: its policy, niceness and
// the length of slice it asks for.
type Policy struct {
	// Batch selects SCHED_BATCH, under which the kernel never lets the
	// thread preempt another when it wakes (it waits for the running
	// thread's turn to end) but gives it its fair share of the CPU all the
	// same; otherwise SCHED_NORMAL, the default.
	Batch bool
	Nice  int
	// Slice is the turn the thread asks of the fair scheduler (EEVDF's
	// custom slice, sched_attr.sched_runtime, Linux 6.12 and later; older
	// kernels ignore it): a thread that asks for a shorter one than the
	// threads it shares a CPU with gets an earlier deadline, so it runs
	// sooner when it wakes, and hands the CPU back sooner. 0: the
	// kernel's default.
	Slice time.Duration
}

// ShortSlice is the shortest slice Linux grants (it clamps
// sched_runtime to [100µs, 100ms]). Threads that wake often and compute
// little between their waits — a checkpoint's commit, which sleeps on
// the disk — ask for it: each wake-up then runs at once instead of after
// a pinned worker's default turn, and the worker it displaced is back on
// its CPU within ~100µs.
const ShortSlice = 100 * time.Microsecond

// SetPolicy sets the calling OS thread's scheduling policy, niceness and
// slice. Call it from a goroutine locked to its thread.
func SetPolicy(p Policy) error {
	attr := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: int32(p.Nice), Runtime: uint64(p.Slice)}
	if p.Batch {
		attr.Policy = unix.SCHED_BATCH
	}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("affinity: sched_setattr: %w", err)
	}
	return nil
}

// ThreadPolicy returns the calling OS thread's scheduling policy. Its
// Slice is what the kernel reports: the one asked for, or its default.
func ThreadPolicy() (Policy, error) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return Policy{}, fmt.Errorf("affinity: sched_getattr: %w", err)
	}
	return Policy{Batch: attr.Policy == unix.SCHED_BATCH, Nice: int(attr.Nice), Slice: time.Duration(attr.Runtime)}, nil
}

// Usage is what the kernel counted for a thread: its CPU time, page faults
// and context switches.
type Usage struct {
	CPU                      time.Duration // user and system
	MinorFaults, MajorFaults int64
	Voluntary, Involuntary   int64
}

// ThreadUsage returns the calling OS thread's Usage (getrusage
// RUSAGE_THREAD, ~0.25µs here); zero if it cannot be read.
func ThreadUsage() Usage {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return Usage{}
	}
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return Usage{CPU: tv(ru.Utime) + tv(ru.Stime), MinorFaults: ru.Minflt, MajorFaults: ru.Majflt,
		Voluntary: ru.Nvcsw, Involuntary: ru.Nivcsw}
}

// Raised is a thread's scheduling as it was before Raise: Lower puts it
// back.
type Raised struct {
	prev *unix.SchedAttr // nil: the thread was not raised
}

// realtimeRefused is set once the kernel has refused SCHED_FIFO (the
// process lacks CAP_SYS_NICE and RLIMIT_RTPRIO, or its cgroup has no
// real-time budget): Raise then costs nothing.
var realtimeRefused atomic.Bool

// Raise puts the calling OS thread in the real-time class (SCHED_FIFO at
// its lowest priority) until Lower is called on the result, from the same
// goroutine. While raised, no thread of the fair class takes its core: a
// short step that must not be stretched by preemption (a checkpoint's
// synchronous part) runs start to end unless an interrupt, a real-time
// thread or the host takes the CPU. The kernel's real-time throttling
// (sched_rt_runtime_us, 95% of each second by default) bounds what a
// raised thread that never lowers could take.
//
// The goroutine stays locked to its thread until Lower, so the policy is
// put back on the thread that was raised. If the kernel refuses, Raise
// returns a Raised whose Lower does nothing, and every later Raise in the
// process returns at once; RealtimeRefused says so. Two system calls in,
// one out, ~1µs each.
func Raise() Raised {
	if realtimeRefused.Load() {
		return Raised{}
	}
	runtime.LockOSThread()
	prev, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		err = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0)
	}
	if err != nil {
		realtimeRefused.Store(true)
		runtime.UnlockOSThread()
		return Raised{}
	}
	return Raised{prev: prev}
}

// Lower puts the thread's scheduling back as it was before Raise.
func (r Raised) Lower() {
	if r.prev == nil {
		return
	}
	unix.SchedSetAttr(0, r.prev, 0)
	runtime.UnlockOSThread()
}

// RealtimeRefused reports whether the kernel has refused Raise in this
// process; a process that has not called it yet reports false.
func RealtimeRefused() bool { return realtimeRefused.Load() }

// Tid returns the calling OS thread's id.
func Tid() int { return unix.Gettid() }
