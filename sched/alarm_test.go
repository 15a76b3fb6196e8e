package sched

import (
	"context"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadTask records the thread its steps run on, and ends at its first
// step if done.
type threadTask struct {
	tid  chan int
	done bool
}

func (t *threadTask) Step(time.Time) (Status, error) {
	select {
	case t.tid <- unix.Gettid():
	default:
	}
	if t.done {
		return Done, nil
	}
	return Idle, nil
}
func (t *threadTask) PrepareToPark() bool { return true }
func (t *threadTask) Unpark()             {}
func (t *threadTask) Deadline() time.Time { return time.Time{} }

// TestAt checks that an alarm runs on a worker's thread, not before its
// time, again at later rounds while it returns false and not after it
// returns true, also when the workers are parked with nothing to do, and
// also once worker 0's tasks have all ended (and worker 0 with them).
func TestAt(t *testing.T) {
	spin, yield := spinPolls, yieldPolls
	spinPolls, yieldPolls = 1, 1 // park soon: the alarm must wake a worker
	defer func() { spinPolls, yieldPolls = spin, yield }()
	for _, worker0Ends := range []bool{false, true} {
		// NB: no stealing and no resting, so that each task is stepped
		// by its own worker's thread only.
		p, err := New(Options{Workers: 2, NoSteal: true, NoRest: true})
		if err != nil {
			t.Fatal(err)
		}
		tasks := []*threadTask{{tid: make(chan int, 1), done: worker0Ends}, {tid: make(chan int, 1)}}
		for i, task := range tasks {
			p.Workers()[i].Add(task)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		workerTids := map[int]bool{<-tasks[0].tid: true, <-tasks[1].tid: true}
		for p.Workers()[1].Parks() == 0 {
			runtime.Gosched()
		}

		type call struct {
			tid int
			now time.Time
		}
		calls := make(chan call, 8)
		at := time.Now().Add(5 * time.Millisecond)
		n := 0
		p.At(at, func(now time.Time) bool {
			calls <- call{unix.Gettid(), now}
			n++
			return n == 3 // done at the third round
		})
		for i := range 3 {
			var c call
			select {
			case c = <-calls:
			case <-time.After(10 * time.Second): // a guard against hanging, not a measure
				t.Fatalf("worker 0 ends %v: call %d of the alarm never came", worker0Ends, i)
			}
			if !workerTids[c.tid] {
				t.Fatalf("worker 0 ends %v: call %d on thread %d, not a worker's (%v)", worker0Ends, i, c.tid, workerTids)
			}
			if c.now.Before(at) {
				t.Fatalf("worker 0 ends %v: call %d at %v, before the alarm's time %v", worker0Ends, i, c.now, at)
			}
		}
		time.Sleep(20 * time.Millisecond)
		if len(calls) != 0 {
			t.Fatalf("worker 0 ends %v: the alarm ran again after it returned true", worker0Ends)
		}
		cancel()
		<-done
	}
}
