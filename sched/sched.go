package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

// Status is what one Step of a task did.
type Status int

const (
	// Idle: the task could not run (no input, or no room for output).
	Idle Status = iota
	// Progress: the task did some work and may have more.
	Progress
	// Done: the task has finished for good; it is not stepped again.
	Done
	// Backlogged: the task did some work and stopped with more already
	// waiting (its step's budget ran out before its input did, or a source
	// had more due than one step emits). It is Progress that also says the
	// worker is not keeping up with the task's input: the pool counts the
	// time its workers spend behind to decide how many of them the load
	// needs (see the package doc, "Resting").
	Backlogged
)

// Task is a unit of work a worker runs.
type Task interface {
	// Step does a bounded amount of work.
	Step(now time.Time) (Status, error)
	// PrepareToPark announces on every ring the task waits for that its
	// worker is about to sleep, and reports whether it may: false means the
	// task has work after all (and it withdrew what it announced).
	PrepareToPark() bool
	// Unpark withdraws the announcements of PrepareToPark.
	Unpark()
	// Deadline returns when the task wants to be stepped even if no ring
	// rings its worker's doorbell (a timer, a rate limit, a flush delay);
	// the zero time means never.
	Deadline() time.Time
}

// Readier is implemented by a task that can tell, cheaply and without side
// effects, whether a Step now would find work (an input has a frame, a
// deadline has passed). A worker running background work in its tasks' idle
// time asks its tasks at every Slice.Pause and hands the thread back to them
// as soon as one is ready, instead of at the end of the slice: a record that
// arrives meanwhile waits microseconds, not the rest of the slice.
type Readier interface {
	Ready(now time.Time) bool
}

// Options configure a pool.
type Options struct {
	// Workers is the number of worker threads; default: one per CPU of
	// CPUs.
	Workers int
	// CPUs are the CPUs the workers are pinned to, worker i to
	// CPUs[i%len(CPUs)], and the CPUs the pool's own thread may run on;
	// default: the process's affinity mask (see CheckCPUs).
	CPUs []int
	// NoPin leaves worker threads unpinned (they are still locked).
	NoPin bool
	// BackgroundPatience is how long background work waits for the tasks'
	// idle time before it takes slices from busy tasks (see
	// DefaultBackgroundPatience, the value when this is 0; negative: no
	// wait). Keep it well under the period at which such work arrives.
	BackgroundPatience time.Duration
	// NoSteal keeps every task on its own worker's thread, even while the
	// kernel has given that thread's core to another thread (see the
	// package doc, "Taking over a worker whose thread is away").
	NoSteal bool
	// NoRest keeps every worker on its own tasks whatever the load (see
	// the package doc, "Resting").
	NoRest bool
	// Logger receives the pool's reports (the stall report of
	// RINGFLOW_DEBUG_STALL); slog.Default() when nil.
	Logger *slog.Logger
	// StallBound is the step time over which a step is recorded as a
	// stall, with where its time went (see Stall and Pool.Stalls);
	// DefaultStallBound when 0, none recorded when negative.
	StallBound time.Duration
}

// Pool is a set of workers running a fixed set of tasks.
type Pool struct {
	workers []*Worker
	cpus    []int
	spin    bool
	noSteal bool
	stopped atomic.Bool
	rest    restControl // worker 0's
	off     offloader   // the pool's own thread for background work
	alarm   atomic.Pointer[alarm]
	logger  *slog.Logger
	// patience is Options.BackgroundPatience, defaulted.
	patience time.Duration
	stalls   stallLog

	mu struct {
		sync.Mutex
		err error
	}
}

// New makes a pool of workers; Assign tasks to them, then Run.
func New(opts Options) (*Pool, error) {
	cpus, err := affinity.Usable()
	if err != nil {
		return nil, err
	}
	if len(opts.CPUs) > 0 {
		if err := checkCPUs(opts.CPUs, cpus); err != nil {
			return nil, fmt.Errorf("sched: %w", err)
		}
		cpus = opts.CPUs
	}
	n := opts.Workers
	if n == 0 {
		n = len(cpus)
	}
	if n < 1 {
		return nil, fmt.Errorf("sched: %d workers: need at least 1", n)
	}
	p := &Pool{spin: n <= len(cpus), noSteal: opts.NoSteal, patience: max(opts.BackgroundPatience, 0),
		logger: opts.Logger}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	p.off.pool, p.off.bell = p, make(chan struct{}, 1)
	p.off.exited.L = &p.off.mu.Mutex
	p.rest.off = opts.NoRest || n == 1
	p.rest.active = n
	if opts.BackgroundPatience == 0 {
		p.patience = DefaultBackgroundPatience
	}
	if !opts.NoPin {
		p.cpus = cpus
	}
	for i := range n {
		w := &Worker{pool: p, id: i, stallBound: stallBoundOf(opts.StallBound)}
		if w.stallBound > 0 {
			w.stallCounters = newCounterReader()
		}
		p.workers = append(p.workers, w)
	}
	return p, nil
}

// CheckCPUs reports why cpus cannot be Options.CPUs, or nil if they can:
// each must be in the process's affinity mask (sched_getaffinity: the
// machine's CPUs, unless taskset, a cpuset or a container narrowed them),
// and none may appear twice.
func CheckCPUs(cpus []int) error {
	usable, err := affinity.Usable()
	if err != nil {
		return err
	}
	return checkCPUs(cpus, usable)
}

func checkCPUs(cpus, usable []int) error {
	seen := map[int]bool{}
	for _, c := range cpus {
		if seen[c] {
			return fmt.Errorf("CPU %d appears twice in %v", c, cpus)
		}
		seen[c] = true
		if !slices.Contains(usable, c) {
			return fmt.Errorf("CPU %d is not one this process may run on (its affinity mask is %v)", c, usable)
		}
	}
	return nil
}

// Workers returns the pool's workers, for assigning tasks and wiring rings
// to their doorbells.
func (p *Pool) Workers() []*Worker { return p.workers }

// Run starts every worker and waits until all their tasks are Done, a task
// fails, or ctx is cancelled. It returns the first failure, or ctx.Err().
func (p *Pool) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	now := sinceEpoch(time.Now())
	for _, w := range p.workers {
		// NB: set before any worker starts: a peer may run these tasks
		// before their own thread has begun.
		w.live = append([]Task(nil), w.tasks...)
		w.done.Store(len(w.live) == 0)
		w.seen.Store(now)
	}
	for _, w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	stopWatch := context.AfterFunc(ctx, func() { p.fail(ctx.Err()) })
	wg.Wait()
	// Work the workers handed to the pool's thread ends before Run does.
	p.off.finish()
	stopWatch()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// Fail stops the pool; Run returns err (the first one wins).
func (p *Pool) Fail(err error) { p.fail(err) }

// fail records err (the first one wins) and stops every worker.
func (p *Pool) fail(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = err
	}
	p.mu.Unlock()
	p.stopped.Store(true)
	for _, w := range p.workers {
		w.Wake()
		w.endRest()
	}
	p.off.poke()
}

// Saturated reports whether a working worker's tasks have left it less
// idle time than background work is guaranteed, and no worker is spare
// (see the package doc, "Background work"): background work then runs on
// the pool's own thread. Work outside the pool that must progress under
// load, such as a checkpoint's commit, can ask it whether to go there too
// (Offload).
func (p *Pool) Saturated() bool {
	if p.spare() {
		return false
	}
	for _, w := range p.workers {
		if w.bg.saturated.Load() && !w.done.Load() {
			return true
		}
	}
	return false
}

// spare reports whether a worker rests, is asked to, or is lent: the load
// review found the load calm, and the pool has a core to spare for
// background work. NB: a worker that hosts a resting one's tasks at light
// load finds a record at every round, so its measured idle time says
// little; the pool is not saturated then, whatever it says.
func (p *Pool) spare() bool {
	for _, w := range p.workers {
		if w.restWanted.Load() || w.resting.Load() || w.lent.Load() {
			return true
		}
	}
	return false
}

// Stop stops the pool without an error; Run returns nil.
func (p *Pool) Stop() {
	p.stopped.Store(true)
	for _, w := range p.workers {
		w.Wake()
		w.endRest()
	}
	p.off.poke()
}

// ErrPanic is wrapped by the error Run returns when a task panicked.
var ErrPanic = errors.New("panic")

// PanicError carries a recovered panic and the stack it was raised on.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap lets errors.Is(err, ErrPanic) match, and exposes a panicked error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}

// Recover turns a panic into a *PanicError stored in *errp; use it as
// `defer sched.Recover(&err)` in functions that run user code.
func Recover(errp *error) {
	if r := recover(); r != nil {
		*errp = &PanicError{Value: r, Stack: debug.Stack()}
	}
}
