package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/testseed"
	"golang.org/x/sys/unix"
)

var seeds = testseed.Flag("sched.seed", "SCHED_SEED")

// withAwayHook installs h for the test (set before the pool runs).
func withAwayHook(t *testing.T, h func(w *Worker, asleep bool)) {
	awayHook = h
	t.Cleanup(func() { awayHook = nil })
}

// tidTask takes work when given some (ready), and records the thread that
// took it.
type tidTask struct {
	readyTask
	tookOn atomic.Int32
}

func (t *tidTask) Step(now time.Time) (Status, error) {
	if t.taken.Load() > 0 {
		return Done, nil
	}
	st, err := t.readyTask.Step(now)
	if st == Progress {
		t.tookOn.Store(int32(unix.Gettid()))
	}
	return st, err
}

// alternating makes progress on every other step (always: on every step)
// until stop: its worker never parks.
type alternating struct {
	n      int
	stop   *atomic.Bool
	always bool
}

func (a *alternating) Step(time.Time) (Status, error) {
	if a.stop.Load() {
		return Done, nil
	}
	if a.n++; a.always || a.n%2 == 0 {
		return Progress, nil
	}
	return Idle, nil
}
func (a *alternating) PrepareToPark() bool { return true }
func (a *alternating) Unpark()             {}
func (a *alternating) Deadline() time.Time { return time.Time{} }

// awayRun runs worker 0 with a tidTask and worker 1 with an alternating
// task. The first time worker 0's thread reaches the away hook where
// asleep says (after its doorbell was rung, for asleep), the hook hands
// the task work and keeps the thread away for up to 200ms, until the work
// is taken; the task finishes once it has taken it. It returns worker 0's
// thread and the thread that took the work.
func awayRun(t *testing.T, opts Options, asleep bool) (away, took int32) {
	return awayRunPeer(t, opts, asleep, "")
}

// awayRunPeer is awayRun with worker 1 doing more: with peer
// "background", it also has background work pending until the hook is
// done; with "busy", its task makes progress at every step.
func awayRunPeer(t *testing.T, opts Options, asleep bool, peer string) (away, took int32) {
	t.Helper()
	// NB: no resting: worker 0's thread stays away up to 200ms, and with
	// worker 1 resting meanwhile nobody would be there to take over.
	opts.Workers, opts.NoPin, opts.NoRest = 2, true, true
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	w0 := p.Workers()[0]
	task := &tidTask{}
	task.start = func() {}
	var (
		stop  atomic.Bool
		armed atomic.Bool
		tid   atomic.Int32
	)
	armed.Store(true)
	withAwayHook(t, func(w *Worker, sleeping bool) {
		if w != w0 || sleeping != asleep || !armed.CompareAndSwap(true, false) {
			return
		}
		tid.Store(int32(unix.Gettid()))
		task.ready.Store(true) // asleep: as if the ring that rang had data
		for i := 0; i < 200 && task.taken.Load() == 0; i++ {
			time.Sleep(time.Millisecond)
		}
		stop.Store(true)
	})
	if asleep {
		// Ring worker 0 once it sleeps; the hook runs when it wakes.
		go func() {
			for w0.Parks() == 0 {
				time.Sleep(100 * time.Microsecond)
			}
			w0.Wake()
		}()
	}
	w0.Add(task)
	w1 := p.Workers()[1]
	if peer == "busy" {
		w1.Add(&alternating{stop: &stop, always: true})
	} else {
		w1.Add(&alternating{stop: &stop})
	}
	if peer == "background" {
		w1.Background(func(s *Slice) {
			for !stop.Load() && s.Pause() {
			}
		})
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tid.Load(), task.tookOn.Load()
}

// TestPeerRunsTasksOfAwayWorker: while a worker's thread is away from its
// loop between idle polls (as when the kernel gives its core to another
// thread), a peer that is idle runs its tasks; with NoSteal, nobody does.
func TestPeerRunsTasksOfAwayWorker(t *testing.T) {
	away, took := awayRun(t, Options{}, false)
	if took == 0 || took == away {
		t.Fatalf("work given to a task while its worker's thread (%d) was away was taken by thread %d, want a peer's", away, took)
	}
	away, took = awayRun(t, Options{NoSteal: true}, false)
	if took != away {
		t.Fatalf("with NoSteal, the work was taken by thread %d, want its worker's (%d)", took, away)
	}
}

// TestPeerRunsTasksBeforeItsBackgroundWork: an idle worker with background
// work of its own runs an away peer's tasks first.
func TestPeerRunsTasksBeforeItsBackgroundWork(t *testing.T) {
	away, took := awayRunPeer(t, Options{}, false, "background")
	if took == 0 || took == away {
		t.Fatalf("work given to a task while its worker's thread (%d) was away was taken by thread %d, want the peer's that had background work", away, took)
	}
}

// TestBusyPeerRunsTasksOfAwayWorker: a worker whose own tasks have work at
// every poll (at light load, a paced source does) still runs an away
// peer's tasks.
func TestBusyPeerRunsTasksOfAwayWorker(t *testing.T) {
	away, took := awayRunPeer(t, Options{}, false, "busy")
	if took == 0 || took == away {
		t.Fatalf("work given to a task while its worker's thread (%d) was away was taken by thread %d, want the busy peer's", away, took)
	}
}

// TestPeerRunsTasksOfLateSleeper: a worker whose doorbell has rung but whose
// thread has not come back has its tasks run by an idle peer.
func TestPeerRunsTasksOfLateSleeper(t *testing.T) {
	away, took := awayRun(t, Options{}, true)
	if took == 0 || took == away {
		t.Fatalf("work given to a task while its rung worker's thread (%d) was away was taken by thread %d, want a peer's", away, took)
	}
}

// exclusive fails if its task is entered by two threads at once.
type exclusive struct {
	Task
	in atomic.Bool
}

var errConcurrent = errors.New("task entered by two threads at once")

func (e *exclusive) enter() bool { return e.in.CompareAndSwap(false, true) }

func (e *exclusive) Step(now time.Time) (Status, error) {
	if !e.enter() {
		return Idle, errConcurrent
	}
	defer e.in.Store(false)
	return e.Task.Step(now)
}

func (e *exclusive) PrepareToPark() bool {
	if !e.enter() {
		panic(errConcurrent)
	}
	defer e.in.Store(false)
	return e.Task.PrepareToPark()
}

func (e *exclusive) Unpark() {
	if !e.enter() {
		panic(errConcurrent)
	}
	defer e.in.Store(false)
	e.Task.Unpark()
}

// awayPool makes a pool of workers whose threads go away for up to 300µs,
// at random moments (seeded, from -sched.seed) one time in oneIn that they
// could, and returns it with a generator for the rest of the test.
func awayPool(t *testing.T, workers, oneIn int) (*Pool, *rand.Rand) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	// NB: the hook runs on the workers' threads; each draws from its own
	// generator, seeded from rng before the run.
	gens := make([]*rand.Rand, workers)
	for i := range gens {
		gens[i] = rand.New(rand.NewPCG(rng.Uint64(), 0))
	}
	p, err := New(Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	withAwayHook(t, func(w *Worker, _ bool) {
		if g := gens[w.ID()]; g.IntN(oneIn) == 0 {
			time.Sleep(time.Duration(g.IntN(300)) * time.Microsecond)
		}
	})
	return p, rng
}

// TestStealingKeepsTasksInOrder runs producer→consumer pairs across 2 and 3
// workers whose threads go away at random moments (seeded): every record
// arrives, in order, and no task is ever entered by two threads at once.
// Under the race detector it also checks that the tasks' lock orders the
// tasks' memory between threads.
func TestStealingKeepsTasksInOrder(t *testing.T) {
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p, _ := awayPool(t, workers, 64)
			cons := pipeline(t, p, 6, 1_000_000)
			for _, w := range p.Workers() {
				for i, task := range w.tasks {
					w.tasks[i] = &exclusive{Task: task}
				}
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, c := range cons {
				if c.next != 1_000_000 {
					t.Errorf("consumer %d got %d records", i, c.next)
				}
			}
			stolen := int64(0)
			for _, w := range p.Workers() {
				stolen += w.Stolen()
			}
			t.Logf("polls by a peer: %d", stolen)
			if stolen == 0 {
				t.Error("no worker ever ran a peer's tasks")
			}
		})
	}
}

// TestPeerRunsTasksDuringBackgroundWork: while a worker's thread is in a
// long piece of background work, an idle peer runs its tasks.
func TestPeerRunsTasksDuringBackgroundWork(t *testing.T) {
	p := newPool(t, 2)
	w0 := p.Workers()[0]
	task := &tidTask{}
	var (
		stop atomic.Bool
		bgOn atomic.Int32
	)
	task.start = func() {
		w0.Background(func(s *Slice) {
			s.Pause()
			bgOn.Store(int32(unix.Gettid()))
			task.ready.Store(true)
			// One piece of up to 200ms, without a Pause, until the work
			// is taken.
			for start := time.Now(); time.Since(start) < 200*time.Millisecond && task.taken.Load() == 0; {
			}
			stop.Store(true)
		})
	}
	w0.Add(task)
	p.Workers()[1].Add(&alternating{stop: &stop})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took, bg := task.tookOn.Load(), bgOn.Load(); took == 0 || took == bg {
		t.Fatalf("work given while worker 0's thread (%d) ran background work was taken by thread %d, want a peer's", bg, took)
	}
}

// TestPreemptedCounts runs a busy worker on the first usable CPU while
// another thread, pinned to the same CPU, spins: the kernel must take the
// core from one for the other, and the worker counts the times it lost it.
func TestPreemptedCounts(t *testing.T) {
	cpus, err := affinity.Usable()
	if err != nil {
		t.Skip("CPU affinity unavailable:", err)
	}
	p, err := New(Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	p.Workers()[0].Add(&alternating{stop: &stop, always: true})
	spun := make(chan time.Duration)
	go func() {
		unpin, err := affinity.Pin(cpus[0])
		if err != nil {
			spun <- 0
			return
		}
		defer unpin()
		start := time.Now()
		for time.Since(start) < 200*time.Millisecond {
		}
		spun <- time.Since(start)
	}()
	go func() {
		<-time.After(300 * time.Millisecond)
		stop.Store(true)
	}()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := <-spun; d == 0 {
		t.Skip("could not pin the competing thread")
	}
	if n := p.Workers()[0].Preempted(); n == 0 {
		t.Errorf("the worker shared its CPU with a spinning thread for 200ms and counted no preemption")
	} else {
		t.Logf("preempted %d times", n)
	}
}
