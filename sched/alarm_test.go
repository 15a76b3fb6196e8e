package sched

import (
	"context"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadTask records the thread its steps run on.
type threadTask struct{ tid chan int }

func (t *threadTask) Step(time.Time) (Status, error) {
	select {
	case t.tid <- unix.Gettid():
	default:
	}
	return Idle, nil
}
func (t *threadTask) PrepareToPark() bool { return true }
func (t *threadTask) Unpark()             {}
func (t *threadTask) Deadline() time.Time { return time.Time{} }

// TestAt checks that an alarm runs on worker 0's thread, not before its
// time, again at later rounds while it returns false, and also when
// worker 0 is parked with nothing to do.
func TestAt(t *testing.T) {
	spin, yield := spinPolls, yieldPolls
	spinPolls, yieldPolls = 1, 1 // park soon: the alarm must wake the worker
	defer func() { spinPolls, yieldPolls = spin, yield }()
	// NB: no stealing and no resting, so that only worker 0's thread
	// steps its task.
	p, err := New(Options{Workers: 2, NoSteal: true, NoRest: true})
	if err != nil {
		t.Fatal(err)
	}
	w0 := &threadTask{tid: make(chan int, 1)}
	p.Workers()[0].Add(w0)
	p.Workers()[1].Add(forever{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	worker0 := <-w0.tid
	for p.Workers()[0].Parks() == 0 {
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
		c := <-calls
		if c.tid != worker0 {
			t.Fatalf("call %d on thread %d, want worker 0's %d", i, c.tid, worker0)
		}
		if c.now.Before(at) {
			t.Fatalf("call %d at %v, before the alarm's time %v", i, c.now, at)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if len(calls) != 0 {
		t.Fatalf("the alarm ran again after it returned true")
	}
	cancel()
	<-done
}
