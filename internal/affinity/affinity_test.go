package affinity

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPin(t *testing.T) {
	cpus, err := Usable()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Usable: %v %v", cpus, err)
	}
	last := cpus[len(cpus)-1]
	unpin, err := Pin(last)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	unix.SchedGetaffinity(0, &set)
	if set.Count() != 1 || !set.IsSet(last) {
		t.Errorf("pinned thread's mask has %d CPUs, want only CPU %d", set.Count(), last)
	}
	unpin()
	if _, err := Pin(1 << 20); err == nil {
		t.Error("pinning to a CPU that does not exist succeeded")
	}
}

// TestThreadCPU: the thread's CPU clock advances while it computes, no
// faster than the wall clock, and stands still while it sleeps.
func TestThreadCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// NB: the wall clock first, so that its interval holds the CPU clock's
	// (reading the CPU clock is a system call of a few µs here).
	begin := time.Now()
	start := ThreadCPU()
	for ThreadCPU()-start < 10*time.Millisecond {
		if time.Since(begin) > 10*time.Second {
			t.Fatalf("10s of computing advanced the thread's CPU clock by %v", ThreadCPU()-start)
		}
	}
	if wall := time.Since(begin); wall < 10*time.Millisecond {
		t.Errorf("the thread's CPU clock advanced 10ms in %v of wall time", wall)
	}
	start = ThreadCPU()
	time.Sleep(20 * time.Millisecond)
	if slept := ThreadCPU() - start; slept > 5*time.Millisecond {
		t.Errorf("20ms of sleep advanced the thread's CPU clock by %v", slept)
	}
}

// TestYieldLetsTheWorldStop: while locked goroutines, one per P, do nothing
// but Yield (idle workers at the yield rung), stopping the world — which a
// garbage collection and a goroutine profile do — still succeeds at once.
// With a raw sched_yield the runtime could rarely preempt them, and a stop
// took seconds (200 stops took over 10s; each takes well under 1ms with
// Yield as it is). The bound below only keeps a regression from hanging
// the test.
func TestYieldLetsTheWorldStop(t *testing.T) {
	const stops = 200
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for !quit.Load() {
				Yield()
			}
		}()
	}
	defer wg.Wait()
	defer quit.Store(true)
	var ms runtime.MemStats
	start := time.Now()
	for i := range stops {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d stops of the world took %v while goroutines yielded", i, time.Since(start))
		}
		runtime.ReadMemStats(&ms) // stops the world
	}
}

// TestSetPolicy: the thread's policy, niceness and slice are what
// SetPolicy set, and it can go back to the default.
func TestSetPolicy(t *testing.T) {
	onOwnThread(func() {
		def, err := ThreadPolicy()
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("default policy %+v", def)
		for _, want := range []Policy{{Batch: true}, {Nice: 10}, {Batch: true, Nice: 10, Slice: ShortSlice},
			{Slice: ShortSlice}, {}} {
			if err := SetPolicy(want); err != nil {
				t.Error(err)
				return
			}
			got, err := ThreadPolicy()
			if err != nil {
				t.Error(err)
				return
			}
			if want.Slice == 0 {
				want.Slice = def.Slice // the kernel's default
			}
			if got.Slice == 0 {
				want.Slice = 0 // a kernel without custom slices
			}
			if got != want {
				t.Errorf("SetPolicy(%+v): the thread's policy is %+v", want, got)
			}
		}
	})
}

// onOwnThread runs f on a goroutine locked to a thread that exits with it,
// so that no other goroutine inherits the scheduling f leaves behind.
func onOwnThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}

func TestRaiseAndLower(t *testing.T) {
	onOwnThread(func() {
		before := Policy{Batch: true, Nice: 5, Slice: ShortSlice}
		if err := SetPolicy(before); err != nil {
			t.Error(err)
			return
		}
		r := Raise()
		if RealtimeRefused() {
			t.Skip("the kernel refuses SCHED_FIFO to this process (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)")
		}
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Error(err)
			return
		}
		if attr.Policy != unix.SCHED_FIFO || attr.Priority != 1 {
			t.Errorf("raised thread: policy %d priority %d, want SCHED_FIFO (%d) priority 1", attr.Policy, attr.Priority, unix.SCHED_FIFO)
		}
		r.Lower()
		after, err := ThreadPolicy()
		if err != nil {
			t.Error(err)
			return
		}
		if after.Slice == 0 {
			before.Slice = 0 // a kernel without custom slices
		}
		if after != before {
			t.Errorf("lowered thread's policy %+v, want the one before Raise, %+v", after, before)
		}
		Raised{}.Lower() // the refused form does nothing
	})
}

// TestRaisedKeepsItsCore runs a thread that spins on a CPU beside another
// spinning thread pinned to the same CPU: raised, it is never switched out
// for the other, so it counts no preemption while it spins.
func TestRaisedKeepsItsCore(t *testing.T) {
	cpus, err := Usable()
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpus[len(cpus)-1]
	var stop atomic.Bool
	var rival sync.WaitGroup
	rival.Add(1)
	go func() {
		defer rival.Done()
		unpin, err := Pin(cpu)
		if err != nil {
			t.Error(err)
			return
		}
		defer unpin()
		for !stop.Load() {
		}
	}()
	defer func() { stop.Store(true); rival.Wait() }()
	onOwnThread(func() {
		if _, err := Pin(cpu); err != nil {
			t.Error(err)
			return
		}
		spin := func() int64 {
			before := Preemptions()
			for start := ThreadCPU(); ThreadCPU()-start < 30*time.Millisecond; {
			}
			return Preemptions() - before
		}
		unraised := spin()
		r := Raise()
		if RealtimeRefused() {
			t.Skip("the kernel refuses SCHED_FIFO to this process (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)")
		}
		raised := spin()
		r.Lower()
		t.Logf("preemptions in 30ms of CPU beside a spinning thread: %d unraised, %d raised", unraised, raised)
		// NB: one is allowed for the kernel's per-CPU stop-class threads
		// (migration), which outrank every real-time thread.
		if raised > 1 {
			t.Errorf("a raised thread was preempted %d times in 30ms of its CPU time", raised)
		}
	})
}
