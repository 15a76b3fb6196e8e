package sched

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/futex"
)

// maxPark bounds one sleep of an idle worker.
const maxPark = 20 * time.Millisecond

// The idle ladder's rungs, in failed polls. (Variables so that a test can
// make workers park at once.)
var (
	spinPolls  = 200
	yieldPolls = 20
)

// Worker runs its tasks on one locked (and normally pinned) thread. It is
// also the doorbell that wakes that thread: pass it as the ring.Waker of
// every ring its tasks wait on.
type Worker struct {
	pool  *Pool
	id    int
	tasks []Task
	bell  atomic.Uint32 // 1: rung since the worker last looked
	bg    background
	live  []Task // the tasks not yet Done; worker-only

	// Statistics, written by the worker only.
	parks    atomic.Int64
	timeouts int // sleeps in a row that ended by the clock
}

// Add assigns t to the worker. Call before Pool.Run.
func (w *Worker) Add(t Task) { w.tasks = append(w.tasks, t) }

// ID returns the worker's index in the pool.
func (w *Worker) ID() int { return w.id }

// Parks returns how often the worker has slept on its doorbell.
func (w *Worker) Parks() int64 { return w.parks.Load() }

// Wake rings the doorbell: the worker, if asleep, wakes and polls its tasks.
func (w *Worker) Wake() {
	if w.bell.Swap(1) == 0 {
		futex.Wake((*uint32)(unsafe.Pointer(&w.bell)))
	}
}

func (w *Worker) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if w.pool.cpus != nil {
		unpin, err := affinity.Pin(w.pool.cpus[w.id%len(w.pool.cpus)])
		if err != nil {
			w.pool.fail(err)
			return
		}
		defer unpin()
	}
	defer w.closeBackground()
	live := append([]Task(nil), w.tasks...)
	idle := 0
	for (len(live) > 0 || w.bg.pending.Load() > 0) && !w.pool.stopped.Load() {
		var progress bool
		var err error
		live, progress, err = w.poll(live)
		if err != nil {
			w.pool.fail(err)
			return
		}
		w.live = live
		if w.bg.pending.Load() > 0 {
			// Background work runs when the tasks are idle, and, once it
			// has waited the pool's patience, every bgBusyPeriod when they
			// are not.
			if now := time.Now(); !progress || now.Sub(w.bg.last) >= bgBusyPeriod && w.patient(now) {
				w.runBackground(now, progress)
				idle = 0
				continue
			}
		}
		if progress {
			idle = 0
			continue
		}
		idle++
		switch {
		case idle < spinPolls && w.pool.spin:
			cpuRelax()
		case idle < spinPolls+yieldPolls:
			affinity.Yield()
		default:
			w.park(live)
		}
	}
}

// ready reports whether one of the live tasks says it has work (see Readier).
func (w *Worker) ready(now time.Time) bool {
	for _, t := range w.live {
		if r, ok := t.(Readier); ok && r.Ready(now) {
			return true
		}
	}
	return false
}

// poll steps every live task once and drops the ones that are done.
func (w *Worker) poll(live []Task) ([]Task, bool, error) {
	now := time.Now()
	progress := false
	for i := 0; i < len(live); {
		st, err := step(live[i], now)
		if err != nil {
			return live, false, err
		}
		switch st {
		case Done:
			live = append(live[:i], live[i+1:]...)
			progress = true
			continue
		case Progress:
			progress = true
		}
		i++
	}
	return live, progress, nil
}

func step(t Task, now time.Time) (st Status, err error) {
	defer Recover(&err)
	return t.Step(now)
}

// park sleeps until a ring rings the doorbell, a task's deadline, or the
// pool stops; it returns at once if a task turns out to have work.
func (w *Worker) park(live []Task) {
	w.bell.Store(0)
	var deadline time.Time
	for i, t := range live {
		if !t.PrepareToPark() {
			for _, u := range live[:i] {
				u.Unpark()
			}
			return
		}
		if d := t.Deadline(); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	// NB: a worker never sleeps longer than maxPark. Wake-ups are not
	// lost by design (see the package doc); the bound keeps an unforeseen
	// lost one from hanging a job, at the cost of a poll every maxPark.
	wait := maxPark
	if !deadline.IsZero() {
		if wait = min(time.Until(deadline), maxPark); wait <= 0 {
			wait = -1
		}
	}
	if wait >= 0 && !w.pool.stopped.Load() {
		w.parks.Add(1)
		futex.Wait((*uint32)(unsafe.Pointer(&w.bell)), 0, wait)
		if w.bell.Load() == 0 {
			w.timeouts++ // woke by the clock, not by a ring or a message
		} else {
			w.timeouts = 0
		}
		if debugStall > 0 && time.Duration(w.timeouts)*maxPark >= debugStall {
			w.timeouts = 0
			for _, t := range live {
				fmt.Fprintf(os.Stderr, "sched: worker %d idle %v: %v\n", w.id, debugStall, t)
			}
		}
	}
	for _, t := range live {
		t.Unpark()
	}
}

// debugStall, set from RINGFLOW_DEBUG_STALL (a duration), makes a worker
// that sleeps that long describe its tasks on stderr.
var debugStall, _ = time.ParseDuration(os.Getenv("RINGFLOW_DEBUG_STALL"))
