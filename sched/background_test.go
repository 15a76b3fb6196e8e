package sched

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow/internal/affinity"
)

// busyTask always has work until stop is set; it records the thread it
// runs on and counts its steps.
type busyTask struct {
	tid    atomic.Int32
	steps  atomic.Int64
	stop   atomic.Bool
	behind bool   // its steps report Backlogged rather than Progress
	start  func() // called on the first step
	each   func() // called on every step, if set
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
	if t.behind {
		return Backlogged, nil
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

// TestBackgroundInterleaves: a background job that has started on its
// worker's thread (here at once: the pool has no patience) stays there, in
// slices between the steps of a task that always has work, and finishes;
// the task keeps stepping while the job is in progress.
func TestBackgroundInterleaves(t *testing.T) {
	p, err := New(Options{Workers: 1, NoPin: true, BackgroundPatience: -1})
	if err != nil {
		t.Fatal(err)
	}
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
// (It did: a checkpoint's write-out began with a 2ms slice.) The pool has
// no patience, so both jobs run in busy slices on the worker's thread
// well before five windows could judge it saturated.
func TestFirstBusySliceIsShort(t *testing.T) {
	p, err := New(Options{Workers: 1, NoPin: true, BackgroundPatience: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workers()[0]
	var (
		mu        sync.Mutex
		firstDone time.Time
		budget    time.Duration
		onWorker  bool
		queued    bool
	)
	task := &busyTask{}
	task.start = func() {
		w.Background(func(s *Slice) {
			for range 10 {
				s.Pause()
			}
			mu.Lock()
			firstDone = time.Now()
			mu.Unlock()
		})
	}
	task.each = func() {
		mu.Lock()
		defer mu.Unlock()
		if queued || firstDone.IsZero() || time.Since(firstDone) < 5*time.Millisecond {
			return
		}
		queued = true
		w.Background(func(s *Slice) {
			mu.Lock()
			budget, onWorker = time.Until(s.end), s.yield != nil
			mu.Unlock()
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	switch {
	case !queued:
		t.Fatal("the second job was never queued")
	case !onWorker:
		t.Fatal("the second job ran on the pool's thread: the worker was judged saturated before it was queued")
	case budget > bgSlice:
		t.Errorf("the second job's first slice had %v, want at most %v", budget, bgSlice)
	}
}

// TestSaturatedWorkerOffloads: jobs queued on a worker whose task always
// has more work than it takes (Backlogged) wait for no idle time that
// never comes: once the worker has
// measured that it is saturated, they run, in the order queued, on the
// pool's own thread, while the task keeps stepping on the worker's; Run
// returns after they end. (Without the hand-over the jobs wait the pool's
// patience, here an hour, and the test times out.)
func TestSaturatedWorkerOffloads(t *testing.T) {
	p, err := New(Options{Workers: 1, NoPin: true, BackgroundPatience: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workers()[0]
	var (
		tids  [2]atomic.Int32
		order []int
		steps int64 // the task's steps while the first job ran
		ended atomic.Bool
	)
	task := &busyTask{behind: true}
	task.start = func() {
		w.Background(func(s *Slice) {
			tids[0].Store(int32(unix.Gettid()))
			order = append(order, 0)
			before := task.steps.Load()
			for task.steps.Load() < before+100 && s.Pause() {
			}
			steps = task.steps.Load() - before
		})
		w.Background(func(s *Slice) {
			tids[1].Store(int32(unix.Gettid()))
			order = append(order, 1)
			task.stop.Store(true)
			ended.Store(s.Pause())
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range tids {
		if tid := tids[i].Load(); tid == 0 || tid == task.tid.Load() {
			t.Errorf("job %d ran on thread %d, the worker's tasks on %d", i, tid, task.tid.Load())
		}
	}
	if len(order) != 2 || order[0] != 0 || order[1] != 1 {
		t.Errorf("jobs ran in the order %v, want [0 1]", order)
	}
	if steps < 100 {
		t.Errorf("the task stepped %d times while the first job ran, want 100", steps)
	}
	if !ended.Load() {
		t.Error("the last job saw the pool stopping: Run did not wait for it")
	}
	if n := w.BackgroundPending(); n != 0 {
		t.Errorf("%d background jobs pending after Run", n)
	}
}

// TestOffloadedWorkSeesStop: a job on the pool's thread sees Pause report
// false once the pool stops, and Run still waits for it to return.
func TestOffloadedWorkSeesStop(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	var returned atomic.Bool
	task := &busyTask{}
	task.start = func() {
		w.bg.saturated.Store(true) // as if measured: the job goes to the pool's thread
		w.Background(func(s *Slice) {
			for s.Pause() {
			}
			time.Sleep(10 * time.Millisecond) // lets go of what it holds
			returned.Store(true)
		})
	}
	task.each = func() {
		if task.steps.Load() == 1000 {
			p.Stop()
		}
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Run returned before the job on the pool's thread did")
	}
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

// TestOffloadRunsOnPoolThread: work a saturated worker hands over and work
// from outside the pool (Pool.Offload) run on the pool's own thread, in
// the order handed over, at the normal niceness and the kernel's
// shortest slice: the first under SCHED_BATCH (so that it never preempts
// a worker when it wakes), the second, which sleeps on the disk, under
// the default policy; Run waits for both.
func TestOffloadRunsOnPoolThread(t *testing.T) {
	p := newPool(t, 1)
	w := p.Workers()[0]
	type seen struct {
		job    string
		tid    int
		policy affinity.Policy
	}
	var got []seen
	note := func(job string) func(*Slice) {
		return func(*Slice) {
			policy, _ := affinity.ThreadPolicy()
			got = append(got, seen{job, unix.Gettid(), policy})
		}
	}
	task := &busyTask{}
	task.start = func() {
		w.bg.saturated.Store(true) // as if measured: its jobs go to the pool's thread
		w.Background(note("worker"))
		p.Offload(note("offload"))
		w.Background(func(s *Slice) {
			note("worker again")(s)
			task.stop.Store(true)
		})
	}
	w.Add(task)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	short := affinity.ShortSlice
	if def, _ := affinity.ThreadPolicy(); def.Slice == 0 {
		short = 0 // a kernel without custom slices
	}
	want := []struct {
		job    string
		policy affinity.Policy
	}{{"worker", affinity.Policy{Batch: true, Slice: short}}, {"offload", affinity.Policy{Slice: short}},
		{"worker again", affinity.Policy{Batch: true, Slice: short}}}
	if len(got) != len(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	for i, g := range got {
		if g.job != want[i].job || g.policy != want[i].policy {
			t.Errorf("job %d: %+v, want %s under %+v", i, g, want[i].job, want[i].policy)
		}
		if g.tid == int(task.tid.Load()) || g.tid != got[0].tid {
			t.Errorf("job %s ran on thread %d: the worker's is %d, the pool's %d", g.job, g.tid, task.tid.Load(), got[0].tid)
		}
	}
}

// TestNotSaturatedWhileResting: the pool is saturated when a working
// worker measured too little idle time, but never while a worker rests,
// is asked to, or is lent: it then has a core to spare.
func TestNotSaturatedWhileResting(t *testing.T) {
	p := newPool(t, 2)
	w0, w1 := p.Workers()[0], p.Workers()[1]
	if p.Saturated() {
		t.Fatal("a new pool is saturated")
	}
	w0.bg.saturated.Store(true)
	if !p.Saturated() {
		t.Fatal("worker 0 measured itself saturated, the pool is not")
	}
	for _, f := range []*atomic.Bool{&w1.restWanted, &w1.resting, &w1.lent} {
		f.Store(true)
		if p.Saturated() {
			t.Errorf("the pool is saturated while worker 1 (rest wanted %v, resting %v, lent %v) is spare",
				w1.restWanted.Load(), w1.resting.Load(), w1.lent.Load())
		}
		f.Store(false)
	}
}

// TestOffloadWhileRunEnds: work handed to the pool's thread while Run is
// ending, and after it has returned, runs exactly once each; Run returns
// whatever arrives meanwhile. (The thread's exit raced with new work,
// which the race detector caught as a WaitGroup reused during its Wait.)
func TestOffloadWhileRunEnds(t *testing.T) {
	const n = 2000
	for round := range 5 {
		p := newPool(t, 1)
		w := p.Workers()[0]
		var ran [n]atomic.Int32
		var all sync.WaitGroup
		all.Add(n)
		started := make(chan struct{})
		task := &busyTask{}
		task.start = func() {
			go func() {
				close(started)
				for i := range n {
					p.Offload(func(*Slice) {
						ran[i].Add(1)
						all.Done()
					})
				}
			}()
			<-started
			task.stop.Store(true)
		}
		w.Add(task)
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		all.Wait()
		for i := range ran {
			if c := ran[i].Load(); c != 1 {
				t.Fatalf("round %d: job %d ran %d times", round, i, c)
			}
		}
	}
}

// TestPatienceFor: the write-out of a checkpoint waits for idle time at
// most a quarter of the interval, never longer than the default patience,
// and not at all for an interval too short to have a quarter.
func TestPatienceFor(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{time.Second, DefaultBackgroundPatience},
		{100 * time.Millisecond, 25 * time.Millisecond},
		{4 * DefaultBackgroundPatience, DefaultBackgroundPatience},
		{3, -1},
		{0, -1},
	} {
		if got := PatienceFor(c.interval); got != c.want {
			t.Errorf("PatienceFor(%v) = %v, want %v", c.interval, got, c.want)
		}
	}
}
