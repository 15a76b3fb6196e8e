package sched

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/ring"
	"golang.org/x/sys/unix"
)

// threadsTask makes progress on every other step until stop, never
// Backlogged (a light load), and records the threads that stepped it.
type threadsTask struct {
	alternating
	mu   sync.Mutex
	tids map[int]bool
}

func (t *threadsTask) Step(now time.Time) (Status, error) {
	t.mu.Lock()
	t.tids[unix.Gettid()] = true
	t.mu.Unlock()
	return t.alternating.Step(now)
}

func (t *threadsTask) steppedOn(tid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tids[tid]
}

// waitFor polls cond every millisecond for up to 10s.
func waitFor(cond func() bool) bool {
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestLightLoadRests: with a light load on two workers, worker 1 rests and
// worker 0 steps its task meanwhile; with NoRest it never does (stealing
// off in both).
func TestLightLoadRests(t *testing.T) {
	for _, noRest := range []bool{false, true} {
		t.Run(fmt.Sprint("NoRest=", noRest), func(t *testing.T) {
			// NB: without stealing, the other way a peer steps a worker's
			// tasks.
			p, err := New(Options{Workers: 2, NoPin: true, NoRest: noRest, NoSteal: true})
			if err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			guest := &threadsTask{alternating: alternating{stop: &stop}, tids: map[int]bool{}}
			var tid0 atomic.Int32
			own := &busyTask{each: func() { tid0.Store(int32(unix.Gettid())) }}
			p.Workers()[0].Add(own)
			p.Workers()[1].Add(guest)
			w1 := p.Workers()[1]
			go func() {
				defer func() { stop.Store(true); own.stop.Store(true) }()
				if noRest {
					time.Sleep(300 * time.Millisecond) // long enough to rest, were it allowed
					return
				}
				waitFor(func() bool { return w1.Rests() > 0 && guest.steppedOn(int(tid0.Load())) })
			}()
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			switch {
			case noRest && w1.Rests() != 0:
				t.Errorf("NoRest: worker 1 rested %d times", w1.Rests())
			case noRest && guest.steppedOn(int(tid0.Load())):
				t.Error("NoRest: worker 0's thread stepped worker 1's task")
			case !noRest && w1.Rests() == 0:
				t.Error("worker 1 never rested under a light load")
			case !noRest && !guest.steppedOn(int(tid0.Load())):
				t.Error("worker 1 rested, but worker 0's thread never stepped its task")
			}
		})
	}
}

// backlogTask is Backlogged at every step once heavy reports true, and
// makes progress on every other step before that.
type backlogTask struct {
	alternating
	heavy func() bool
}

func (t *backlogTask) Step(now time.Time) (Status, error) {
	st, err := t.alternating.Step(now)
	if st != Done && t.heavy() {
		return Backlogged, err
	}
	return st, err
}

// TestBacklogWakesRestingWorker: once worker 0 is behind with the resting
// worker's tasks and its own, it wakes the worker, which steps its own task
// again.
//
// Worker 0's task turns heavy the moment worker 1 first rests (its count of
// rests, which worker 1's thread raises as the rest begins), so worker 0 is
// behind from then on and never calm again: once woken, worker 1 stays
// awake, and the wait below sees a state that lasts. Under -race a round
// that steps both tasks may also be slow enough to wake worker 1 for that
// rule; without -race the rounds are short and only the backlog wakes it.
func TestBacklogWakesRestingWorker(t *testing.T) {
	p, err := New(Options{Workers: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	w0, w1 := p.Workers()[0], p.Workers()[1]
	var stop atomic.Bool
	heavy := func() bool { return w1.Rests() > 0 }
	w0.Add(&backlogTask{alternating: alternating{stop: &stop}, heavy: heavy})
	w1.Add(&threadsTask{alternating: alternating{stop: &stop}, tids: map[int]bool{}})
	var rested, woke bool
	go func() {
		defer stop.Store(true)
		if rested = waitFor(heavy); !rested {
			return
		}
		woke = waitFor(func() bool { return !w1.restWanted.Load() && !w1.resting.Load() })
	}()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !rested {
		t.Fatal("worker 1 never rested under a light load")
	}
	if !woke {
		t.Fatalf("worker 0 stayed behind with worker 1 resting (%d rests): it was never woken", w1.Rests())
	}
	if w0.backlogNs.Load() == 0 {
		t.Error("worker 0 was never behind")
	}
	if p.rest.woken == 0 {
		t.Error("the load review counted no wake")
	}
}

// TestRestingWorkerRunsBackgroundWork: background work queued on worker 0
// while worker 1 rests runs on worker 1's thread, whose core is free, in
// the order queued.
//
// The jobs are queued from worker 1's task as worker 0's thread steps it:
// worker 1 is then resting, and stays so until worker 0 ends the rest in a
// later round. (Queued from the test's goroutine after seeing worker 1
// rest, they could come after the rest ended: under -race, rounds that
// step both tasks are slow enough for the review to end it within
// milliseconds.)
func TestRestingWorkerRunsBackgroundWork(t *testing.T) {
	// NB: without stealing, so that only worker 0 steps worker 1's task on
	// another thread, and only while worker 1 rests.
	p, err := New(Options{Workers: 2, NoPin: true, NoSteal: true})
	if err != nil {
		t.Fatal(err)
	}
	w0, w1 := p.Workers()[0], p.Workers()[1]
	var tid0 atomic.Int32
	var (
		mu     sync.Mutex
		order  []int
		ran    = map[int32]bool{}
		queued atomic.Bool
		ended  atomic.Int32
	)
	own := &busyTask{each: func() { tid0.Store(int32(unix.Gettid())) }}
	guest := &busyTask{}
	guest.each = func() {
		if int32(unix.Gettid()) == guest.tid.Load() || queued.Load() {
			return
		}
		// On worker 0's thread, hosting the resting worker 1.
		queued.Store(true)
		for i := range 3 {
			w0.Background(func(s *Slice) {
				defer ended.Add(1)
				s.Pause()
				mu.Lock()
				order = append(order, i)
				ran[int32(unix.Gettid())] = true
				mu.Unlock()
			})
		}
	}
	// The busy tasks are never Backlogged: a light load as far as the
	// review can tell.
	w0.Add(own)
	w1.Add(guest)
	go func() {
		defer func() { own.stop.Store(true); guest.stop.Store(true) }()
		if waitFor(queued.Load) {
			waitFor(func() bool { return ended.Load() == 3 })
		}
	}()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !queued.Load() {
		t.Fatalf("worker 1 never rested (%d rests)", w1.Rests())
	}
	if fmt.Sprint(order) != "[0 1 2]" {
		t.Errorf("jobs ran in the order %v (%d of 3 ended), want [0 1 2]", order, ended.Load())
	}
	if tid1 := guest.tid.Load(); ran[tid0.Load()] || !ran[tid1] {
		t.Errorf("jobs ran on threads %v; worker 0's is %d, worker 1's %d: want worker 1's only", ran, tid0.Load(), tid1)
	}
}

// phasedProducer is a producer whose load follows heavy: while it is set,
// it writes a frame at every step and says it is Backlogged; otherwise a
// frame every gap, parking between them. It ends when stop is set.
type phasedProducer struct {
	producer
	heavy, stop *atomic.Bool
	gap         time.Duration
	due         time.Time
}

func (s *phasedProducer) Step(now time.Time) (Status, error) {
	if s.stop.Load() && s.n > s.next {
		s.n = s.next
	}
	if s.heavy.Load() {
		// NB: heavy records: each step costs its worker ~10µs, so that
		// worker 0, which has a producer and hosts the resting workers'
		// tasks, falls behind whichever workers its pairs' consumers are
		// on. (With only the cost of writing them, a seed that put the
		// consumers on the other active worker left worker 0's rounds at
		// ~1µs and under half its time behind: no wake.)
		for time.Since(now) < 10*time.Microsecond {
		}
		st, err := s.producer.Step(now)
		if st == Progress {
			st = Backlogged
		}
		return st, err
	}
	if now.Before(s.due) {
		return Idle, nil
	}
	s.due = now.Add(s.gap)
	return s.producer.Step(now)
}
func (s *phasedProducer) Deadline() time.Time {
	if s.heavy.Load() {
		return time.Time{}
	}
	return s.due
}

// TestRestingKeepsTasksInOrder runs producer→consumer pairs across 2 and 3
// workers through a light phase (workers rest) and a heavy one (worker 0
// falls behind and wakes them), with threads going away at random moments
// (seeded): every record arrives, in order, no task is ever entered by two
// threads at once, and the workers rested and were woken.
func TestRestingKeepsTasksInOrder(t *testing.T) {
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p, rng := awayPool(t, workers, 256)
			var heavy, stop atomic.Bool
			ws := p.Workers()
			var cons []*consumer
			for i := range 2 * workers {
				r, err := ring.New(ring.Options{Capacity: 4096})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				pw, cw := ws[rng.IntN(workers)], ws[rng.IntN(workers)]
				if i < workers {
					// Every worker gets a task: worker 0 reviews the load
					// and hosts the resting workers' tasks, and a worker
					// with no task finishes at once — with worker 0 none
					// would rest, with the last, the one asked to rest
					// would be gone.
					pw = ws[i]
				}
				r.SetWakers(cw, pw)
				c := &consumer{rd: r.Reader()}
				gap := time.Duration(50+rng.IntN(200)) * time.Microsecond
				pw.Add(&exclusive{Task: &phasedProducer{producer: producer{w: r.Writer(), n: 1 << 62},
					heavy: &heavy, stop: &stop, gap: gap}})
				cw.Add(&exclusive{Task: c})
				cons = append(cons, c)
			}
			go func() {
				defer stop.Store(true)
				rested := func() bool {
					for _, w := range ws[1:] {
						if w.Rests() > 0 {
							return true
						}
					}
					return false
				}
				if !waitFor(rested) {
					return
				}
				heavy.Store(true)
				waitFor(func() bool {
					for _, w := range ws[1:] {
						if w.resting.Load() {
							return false
						}
					}
					return true
				})
				time.Sleep(20 * time.Millisecond) // some heavy load on every worker
			}()
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got uint64
			for _, c := range cons {
				got += c.next
			}
			var rests int64
			for _, w := range ws {
				rests += w.Rests()
			}
			t.Logf("records %d, rests %d, wakes %d", got, rests, p.rest.woken)
			if rests == 0 {
				t.Error("no worker rested in the light phase")
			}
			if p.rest.woken == 0 {
				t.Error("no worker was woken in the heavy phase")
			}
		})
	}
}

// lastThreadTask makes progress on every other step until stop, and
// records the thread of its latest step.
type lastThreadTask struct {
	alternating
	last atomic.Int32
}

func (t *lastThreadTask) Step(now time.Time) (Status, error) {
	t.last.Store(int32(unix.Gettid()))
	return t.alternating.Step(now)
}

// TestWakeForLendsRestingWorker: Pool.WakeFor wakes a resting worker,
// which steps its own task on its own thread again and, while lent, runs
// worker 0's background work. The lend is for an hour, so that it is still
// in force when the job is queued however slowly the test's goroutine
// runs: the load review ends a lend only past its deadline (load_test.go
// covers when, on a simulated clock).
//
// A run proves nothing when the review woke worker 1 for the load (worker 0
// fell behind, or its rounds grew slow) before it saw the WakeFor: worker 1
// is then awake but not lent, and worker 0 rightly keeps its background
// work. That depends on how the machine runs the threads, so such a run is
// counted (the review must have recorded the wake) and the test takes a
// fresh pool, up to lendAttempts of them.
func TestWakeForLendsRestingWorker(t *testing.T) {
	const lendAttempts = 20
	for i := range lendAttempts {
		r := lendRun(t)
		switch {
		case t.Failed():
			return
		case !r.steppedOwn:
			t.Fatal("after WakeFor, worker 1's thread never stepped its task again")
		case !r.lent && r.wokenForLoad == 0:
			t.Fatal("after WakeFor, worker 1 was awake but not lent, and the review never woke it for the load")
		case !r.lent:
			t.Logf("run %d: worker 1 was woken for the load before the lend; another run", i+1)
			continue
		case r.ranOn != r.tid1:
			t.Fatalf("worker 0's background work ran on thread %d while worker 1 (thread %d) was lent, want worker 1's (worker 1 saturated: %v)",
				r.ranOn, r.tid1, r.saturated)
		}
		return
	}
	t.Fatalf("in %d runs worker 1 was never lent: each time the load woke it first", lendAttempts)
}

// lendOutcome is what one run of TestWakeForLendsRestingWorker saw.
type lendOutcome struct {
	tid1, ranOn int32 // worker 1's thread; the thread that ran the job
	steppedOwn  bool  // worker 1 stepped its task on its thread after WakeFor
	lent        bool  // and was lent when the job was queued
	saturated   bool  // worker 1 counted as saturated after the job ran
	// wokenForLoad counts the review's wakes of a resting worker for the
	// load, read once the pool has stopped.
	wokenForLoad int
}

func lendRun(t *testing.T) (r lendOutcome) {
	t.Helper()
	// NB: without stealing, so that only resting moves the tasks.
	p, err := New(Options{Workers: 2, NoPin: true, NoSteal: true})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	w0, w1 := p.Workers()[0], p.Workers()[1]
	own := &lastThreadTask{alternating: alternating{stop: &stop}}
	guest := &lastThreadTask{alternating: alternating{stop: &stop}}
	w0.Add(own)
	w1.Add(guest)
	go func() {
		defer stop.Store(true)
		if !waitFor(func() bool { return guest.last.Load() != 0 }) {
			return
		}
		r.tid1 = guest.last.Load() // its first steps: worker 1's own thread
		// NB: the count of rests, not the resting flag: under -race the
		// review may wake worker 1 for slow rounds within a review or two,
		// and a poll of the flag can miss every such rest of a run.
		if !waitFor(func() bool { return w1.Rests() > 0 }) {
			t.Error("worker 1 never rested")
			return
		}
		p.WakeFor(time.Hour)
		if r.steppedOwn = waitFor(func() bool { return guest.last.Load() == r.tid1 && !w1.resting.Load() }); !r.steppedOwn {
			return
		}
		// NB: a lent worker stays lent for the hour, so lent holds for
		// the whole of the Background call below.
		if r.lent = w1.lent.Load(); !r.lent {
			return
		}
		done := make(chan struct{})
		w0.Background(func(s *Slice) {
			s.Pause()
			r.ranOn = int32(unix.Gettid())
			close(done)
		})
		<-done
		r.saturated = w1.bg.saturated.Load()
	}()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.wokenForLoad = p.rest.woken
	return r
}

// TestRestsAgainAfterWakeFor: a worker woken by a short Pool.WakeFor
// rests again once the load is calm past the deadline. Its count of rests
// rises only if it was woken and then rested anew. (Under -race the review
// may wake it for slow rounds first; then it rests again after the
// cooldown, and the plain run of the test is the one that speaks for
// WakeFor.)
func TestRestsAgainAfterWakeFor(t *testing.T) {
	p, err := New(Options{Workers: 2, NoPin: true, NoSteal: true})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	w0, w1 := p.Workers()[0], p.Workers()[1]
	w0.Add(&alternating{stop: &stop})
	w1.Add(&alternating{stop: &stop})
	var rested, restedAgain bool
	go func() {
		defer stop.Store(true)
		if rested = waitFor(func() bool { return w1.Rests() > 0 }); !rested {
			return
		}
		first := w1.Rests()
		p.WakeFor(10 * time.Millisecond)
		restedAgain = waitFor(func() bool { return w1.Rests() > first })
	}()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	switch {
	case !rested:
		t.Fatal("worker 1 never rested")
	case !restedAgain:
		t.Error("worker 1 did not rest again once calm after WakeFor")
	}
}

// TestLendKeepsTheRest drives the load review by hand, with a clock of its
// own: worker 1 rests for a calm load, is lent for a WakeFor every second
// (as a job with 1s checkpoints does) and rests again after each, and 2.5s
// into its rest worker 0 falls behind and wakes it. The rest lasted longer
// than restShortRest, so the cooldown must be the shortest: a lent worker
// resting again goes on with its rest rather than starting one. (Counting
// the rest from the end of the last lend made every wake for load look like
// a failed rest, and with a checkpoint each second the cooldown doubled at
// every wake, to 16s of both workers polling.) WakeFor's deadline is on the
// same clock as the reviews.
func TestLendKeepsTheRest(t *testing.T) {
	c := &loadPolicy{active: 2}
	obs := make([]workerObs, 2)
	now, wakeUntil := time.Hour, time.Duration(0)
	step := func(now time.Duration) {
		if c.due(now, wakeUntil) {
			c.Review(now, wakeUntil, obs)
		}
	}
	review := func(d time.Duration) {
		for end := now + d; now < end; {
			now += restCheck
			step(now)
		}
	}
	review(restCalm + 5*restCheck)
	if c.active != 1 {
		t.Fatalf("after %v of calm, %d workers active, want 1 (worker 1 resting)", restCalm, c.active)
	}
	restStart := now
	for lend := 1; now-restStart < restShortRest+500*time.Millisecond; lend++ {
		review(time.Second - 12*time.Millisecond)
		wakeUntil = now + 11*time.Millisecond // Pool.WakeFor(11ms), now
		step(now)
		if c.active != 2 {
			t.Fatalf("lend %d: WakeFor left %d workers active, want 2", lend, c.active)
		}
		review(11*time.Millisecond + restBurstCalm + 3*restCheck)
		if c.active != 1 {
			t.Fatalf("lend %d: worker 1 did not rest again after its lend (%d active)", lend, c.active)
		}
	}
	// Worker 0 behind for restBusyChecks reviews: the load wakes worker 1.
	woken := c.woken
	for range restBusyChecks + 1 {
		obs[0].backlog += restCheck * 9 / 10
		review(restCheck)
	}
	if c.woken != woken+1 || c.active != 2 {
		t.Fatalf("worker 0 behind: %d wakes, %d active; want one wake, 2 active", c.woken-woken, c.active)
	}
	if c.cooldown != restCooldown {
		t.Errorf("a wake %v into a rest with lends every second: cooldown %v, want %v",
			(now - restStart).Round(time.Millisecond), c.cooldown, restCooldown)
	}
}

// TestCarryOut: each part of a load review's decision sets the flags the
// workers' threads act on, in the decision's order.
func TestCarryOut(t *testing.T) {
	p, err := New(Options{Workers: 3, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Workers()
	flags := func() string {
		var out []string
		for _, w := range ws[1:] {
			out = append(out, fmt.Sprintf("w%d rest=%t lent=%t", w.ID(), w.restWanted.Load(), w.lent.Load()))
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		d    loadDecision
		want string
	}{
		{loadDecision{rest: 2}, "[w1 rest=false lent=false w2 rest=true lent=false]"},
		{loadDecision{rest: 1}, "[w1 rest=true lent=false w2 rest=true lent=false]"},
		{loadDecision{lendFrom: 1}, "[w1 rest=false lent=true w2 rest=false lent=true]"},
		{loadDecision{rest: 2}, "[w1 rest=false lent=true w2 rest=true lent=false]"},
		{loadDecision{unlend: true}, "[w1 rest=false lent=false w2 rest=true lent=false]"},
		{loadDecision{wake: 2}, "[w1 rest=false lent=false w2 rest=false lent=false]"},
		{loadDecision{rest: 2}, "[w1 rest=false lent=false w2 rest=true lent=false]"},
		{loadDecision{rest: 1}, "[w1 rest=true lent=false w2 rest=true lent=false]"},
		{loadDecision{endFrom: 1}, "[w1 rest=false lent=false w2 rest=false lent=false]"},
		{loadDecision{lendFrom: 2, rest: 2}, "[w1 rest=false lent=false w2 rest=true lent=false]"},
	} {
		p.carryOut(c.d)
		if got := flags(); got != c.want {
			t.Errorf("after %+v: %s, want %s", c.d, got, c.want)
		}
	}
}
