package sched

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
	"golang.org/x/sys/unix"
)

// busyTask always has work until stop is set; it records the thread it
// runs on and counts its steps.
type busyTask struct {
	tid   atomic.Int32
	steps atomic.Int64
	stop  atomic.Bool
	start func() // called on the first step
	each  func() // called on every step, if set
}

func (t *busyTask) Step(time.Time) (Status, error) {
	if t.steps.Add(1) == 1 {
		t.tid.Store(int32(unix.Gettid()))
		if t.start != nil {
			t.start()
		}
	}
	if t.each != nil {
		t.each()
	}
	if t.stop.Load() {
		return Done, nil
	}
	return Progress, nil
}
func (t *busyTask) PrepareToPark() bool { return true }
func (t *busyTask) Unpark()             {}
func (t *busyTask) Deadline() time.Time { return time.Time{} }

func newPool(t *testing.T, workers int) *Pool {
	t.Helper()
	p, err := New(Options{Workers: workers, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBackgroundInterleaves: a background job runs on its worker's thread,
// in slices between the steps of a task that always has work, and
// finishes; the task keeps stepping while the job is in progress.
func TestBackgroundInterleaves(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	task := &busyTask{}
	var (
		jobTid        atomic.Int32
		pauses        int
		stepsInPauses int64 // task steps that happened while the job was paused
	)
	task.start = func() {
		w.Background(func(s *Slice) {
			jobTid.Store(int32(unix.Gettid()))
			deadline := time.Now().Add(50 * time.Millisecond)
			for time.Now().Before(deadline) {
				before := task.steps.Load()
				if !s.Pause() {
					t.Error("Pause reported a stop")
					return
				}
				if after := task.steps.Load(); after > before {
					pauses++
					stepsInPauses += after - before
				}
			}
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if jobTid.Load() != task.tid.Load() {
		t.Errorf("job ran on thread %d, the worker's tasks on %d", jobTid.Load(), task.tid.Load())
	}
	// 50ms of job in 20µs slices: the task must have run between slices.
	if pauses < 10 || stepsInPauses < int64(pauses) {
		t.Errorf("the task stepped during %d pauses (%d steps); want it to run between slices", pauses, stepsInPauses)
	}
	if n := w.BackgroundPending(); n != 0 {
		t.Errorf("%d background jobs pending after Run", n)
	}
}

// TestBackgroundOutlivesTasks: a worker whose tasks are done keeps running
// until its background work is finished, and jobs run in order.
func TestBackgroundOutlivesTasks(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	var order []int
	task := &busyTask{}
	task.start = func() {
		for i := range 3 {
			w.Background(func(s *Slice) {
				for range 1000 {
					s.Pause()
				}
				order = append(order, i)
			})
		}
		task.stop.Store(true)
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("jobs ran in order %v, want [0 1 2]", order)
	}
	if w.Background(func(*Slice) { t.Error("a job ran after its worker exited") }) {
		t.Error("Background accepted work after the worker exited")
	}
}

// TestBackgroundStopped: when the pool stops, the running job's Pause and
// every queued job's Pause report false, so each can let go of what it
// holds; none is silently dropped.
func TestBackgroundStopped(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	var running, queued atomic.Int32 // jobs that saw the stop
	task := &busyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			for s.Pause() {
				time.Sleep(10 * time.Microsecond)
			}
			running.Add(1)
		})
		for range 2 {
			w.Background(func(s *Slice) {
				if !s.Pause() {
					queued.Add(1)
				}
			})
		}
		time.AfterFunc(20*time.Millisecond, p.Stop)
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if running.Load() != 1 || queued.Load() != 2 {
		t.Errorf("running job saw the stop %d times, queued jobs %d; want 1 and 2", running.Load(), queued.Load())
	}
}

// TestBackgroundPanic: a panic in background work fails the pool with an
// error that says so and carries the panic.
func TestBackgroundPanic(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	task := &busyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			s.Pause()
			panic("boom")
		})
	}
	w.Add(task)
	err := p.Run(context.Background())
	if !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), "background work") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Run returned %v; want a panic error naming the background work", err)
	}
}

// TestFirstBusySliceIsShort: a job queued while the tasks are busy, long
// after the previous job finished, starts with an ordinary slice: the idle
// gap between jobs is not time the work waited and earns it no longer one.
// (It did: a checkpoint's write-out began with a 2ms slice.)
func TestFirstBusySliceIsShort(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	var (
		firstDone time.Time
		budget    time.Duration
		queued    bool
	)
	task := &busyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			for range 10 {
				s.Pause()
			}
			firstDone = time.Now()
		})
	}
	task.each = func() {
		if queued || firstDone.IsZero() || time.Since(firstDone) < 5*time.Millisecond {
			return
		}
		queued = true
		w.Background(func(s *Slice) {
			budget = time.Until(s.end)
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !queued {
		t.Fatal("the second job was never queued")
	}
	if budget > bgSlice {
		t.Errorf("the second job's first slice had %v, want at most %v", budget, bgSlice)
	}
}

// TestBusyWorkerKeepsBackgroundWaiting: a job queued while the tasks
// always have work gets no slice before it has waited its patience (the
// default, or the pool's); then it runs, in slices between the tasks'
// steps, and finishes.
func TestBusyWorkerKeepsBackgroundWaiting(t *testing.T) {
	for _, patience := range []time.Duration{0, 3 * DefaultBackgroundPatience} {
		want := patience
		if patience == 0 {
			want = DefaultBackgroundPatience
		}
		waited := busyWait(t, patience)
		if waited < want {
			t.Errorf("with Options.BackgroundPatience %v the job ran %v after it was queued on a busy worker, before its patience %v",
				patience, waited, want)
		}
	}
}

// busyWait queues a job on a worker whose task always has work, in a pool
// with the given patience, and returns how long the job waited to run.
func busyWait(t *testing.T, patience time.Duration) time.Duration {
	t.Helper()
	p, err := New(Options{Workers: 1, NoPin: true, BackgroundPatience: patience})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workers()[0]
	var queued, ran time.Time
	task := &busyTask{}
	task.start = func() {
		queued = time.Now()
		w.Background(func(s *Slice) {
			ran = time.Now()
			for range 10 {
				s.Pause()
			}
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.IsZero() {
		t.Fatal("the job never ran")
	}
	return ran.Sub(queued)
}

// TestFirstBusySliceAfterPatienceIsShort: a job that started in the
// tasks' idle time and then waited out its patience behind busy tasks
// gets an ordinary first busy slice, not a quarter of the patience: the
// time it waited is not time it is owed (a 2ms slice after the barrier's
// copy-on-write burst stalled the records).
func TestFirstBusySliceAfterPatienceIsShort(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	var (
		busy   atomic.Bool // the task has work from now on
		budget time.Duration
	)
	task := &readyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			s.Pause() // an idle slice: the task has no work yet
			busy.Store(true)
			task.ready.Store(true)
			s.Pause() // back after the patience, in a busy slice
			budget = time.Until(s.end)
			task.stop.Store(true)
		})
	}
	task.keep = &busy
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if budget > bgSlice {
		t.Errorf("the first busy slice after the patience had %v, want at most %v", budget, bgSlice)
	}
}

// busySlices runs a job of 20 slices on a worker whose task's next step,
// before each slice, sleeps 4ms or computes for 4ms of CPU time, and
// returns the time each slice had left when the job got the thread.
func busySlices(t *testing.T, sleep bool) []time.Duration {
	t.Helper()
	p := newPool(t, 1)
	w := p.Workers()[0]
	var (
		long    atomic.Bool
		budgets []time.Duration
	)
	task := &busyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			for range 20 {
				long.Store(true)
				if !s.Pause() {
					t.Error("Pause reported a stop")
					return
				}
				budgets = append(budgets, time.Until(s.end))
				for time.Now().Before(s.end) { // use the slice up
				}
			}
			task.stop.Store(true)
		})
	}
	task.each = func() {
		if !long.CompareAndSwap(true, false) {
			return
		}
		if sleep {
			time.Sleep(4 * time.Millisecond)
			return
		}
		// NB: 4ms of the thread's CPU time, however long that takes on a
		// loaded machine.
		for start := affinity.ThreadCPU(); affinity.ThreadCPU()-start < 4*time.Millisecond; {
		}
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(budgets) == 0 {
		t.Fatal("the job never resumed")
	}
	return budgets
}

// TestBusySliceAfterLostCoreIsShort: after the worker's thread was off its
// core for 4ms (here: asleep), the next busy slice is not a quarter of the
// gap (1ms): nobody worked meanwhile, and the records queued must not wait
// for a long slice too.
func TestBusySliceAfterLostCoreIsShort(t *testing.T) {
	const want = 250 * time.Microsecond
	for i, b := range busySlices(t, true) {
		if b > want {
			t.Fatalf("slice %d after 4ms off the core had %v left, want at most %v", i, b, want)
		}
	}
}

// TestLongStepsKeepBackgroundShare: when the tasks' steps compute for 4ms,
// a busy slice is still a quarter of that (~1ms): the background work keeps
// its share of a worker whose steps are long (a slow sink's batches).
func TestLongStepsKeepBackgroundShare(t *testing.T) {
	budgets := busySlices(t, false)
	long := 0
	for _, b := range budgets[1:] { // the job's first slice has no history
		if b >= 500*time.Microsecond {
			long++
		}
	}
	if long < len(budgets[1:])/2 {
		t.Fatalf("after 4ms steps, %d of %d slices had 500µs or more: %v", long, len(budgets)-1, budgets)
	}
}

// readyTask is idle until its ready flag is set; it then reports Ready, and
// its next step takes the work and counts it.
type readyTask struct {
	ready atomic.Bool
	taken atomic.Int64
	stop  atomic.Bool
	start func()
	began bool
	keep  *atomic.Bool // if set and true, the task stays ready after a step
}

func (t *readyTask) Step(time.Time) (Status, error) {
	if !t.began {
		t.began = true
		t.start()
	}
	if t.stop.Load() {
		return Done, nil
	}
	if t.ready.CompareAndSwap(true, false) {
		t.taken.Add(1)
		if t.keep != nil && t.keep.Load() {
			t.ready.Store(true)
		}
		return Progress, nil
	}
	return Idle, nil
}
func (t *readyTask) Ready(time.Time) bool { return t.ready.Load() }
func (t *readyTask) PrepareToPark() bool  { return !t.ready.Load() }
func (t *readyTask) Unpark()              {}
func (t *readyTask) Deadline() time.Time  { return time.Time{} }

// TestIdleSliceGivesWayToReadyTask: background work running in the tasks'
// idle time hands the thread back at the first Pause after a task becomes
// ready, without waiting for the rest of its slice. Without the Readier
// check the Pause right after the work arrives would return at once (the
// slice has ~20µs left) and the task would not have stepped.
func TestIdleSliceGivesWayToReadyTask(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	task := &readyTask{}
	const rounds = 200
	late := 0
	task.start = func() {
		w.Background(func(s *Slice) {
			for range rounds {
				before := task.taken.Load()
				task.ready.Store(true) // work arrives while the job runs
				if !s.Pause() {
					t.Error("Pause reported a stop")
					return
				}
				if task.taken.Load() == before {
					late++
				}
			}
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if late > 0 {
		t.Errorf("in %d of %d rounds the job's Pause returned before the ready task stepped", late, rounds)
	}
}

// TestBusySliceAfterIdleSliceOwesNothing drives the slice rule directly on
// one thread: a busy slice, 4ms of the thread's CPU time on its tasks, an
// idle slice, 4ms off the core, then a busy slice. The last is an ordinary
// slice: the work had its turn in the idle slice, and nobody worked since.
// (It was a quarter of the 4ms when the rule compared the wall time since
// the idle slice with the CPU time since the last busy one, as
// TestBusySliceAfterLostCoreIsShort saw once under -race.)
func TestBusySliceAfterIdleSliceOwesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := New(Options{Workers: 1, NoPin: true, BackgroundPatience: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workers()[0]
	w.Background(func(s *Slice) {
		for s.Pause() {
		}
	})
	defer w.closeBackground()
	// slice runs one slice and returns the time it was given.
	slice := func(busy bool) time.Duration {
		now := time.Now()
		w.runBackground(now, busy, false)
		if w.bg.cur == nil {
			t.Fatal("the job ended")
		}
		return w.bg.cur.end.Sub(now)
	}
	slice(true)
	for start := affinity.ThreadCPU(); affinity.ThreadCPU()-start < 4*time.Millisecond; {
	}
	slice(false)
	time.Sleep(4 * time.Millisecond)
	if got := slice(true); got != bgSlice {
		t.Errorf("the busy slice after an idle one and 4ms off the core was %v, want %v", got, bgSlice)
	}
}

// TestBackgroundSkipsExitedWorker: worker 0 passes its background work to
// a lent or resting worker; one whose thread has exited (its tasks ended)
// while still marked so is never chosen, and the job is queued on worker 0
// itself. (Passing it on regardless recursed until the stack overflowed.)
func TestBackgroundSkipsExitedWorker(t *testing.T) {
	for _, mark := range []string{"lent", "resting"} {
		t.Run(mark, func(t *testing.T) {
			p := newPool(t, 3)
			w0, w1, w2 := p.Workers()[0], p.Workers()[1], p.Workers()[2]
			for _, g := range []*Worker{w1, w2} {
				if mark == "lent" {
					g.lent.Store(true)
				} else {
					g.resting.Store(true)
				}
			}
			w1.closeBackground() // exited, still marked
			if !w0.Background(func(*Slice) {}) {
				t.Fatal("Background refused a job on a worker that has not exited")
			}
			if n := w1.BackgroundPending(); n != 0 {
				t.Errorf("the exited worker has %d jobs pending", n)
			}
			if n := w2.BackgroundPending(); n != 1 {
				t.Errorf("the live %s worker has %d jobs pending, want 1", mark, n)
			}
			w2.closeBackground()
			if !w0.Background(func(*Slice) {}) {
				t.Fatal("Background refused a job with every peer exited")
			}
			if n := w0.BackgroundPending(); n != 1 {
				t.Errorf("worker 0 has %d jobs pending, want 1 (its own)", n)
			}
		})
	}
}
