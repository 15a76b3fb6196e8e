package ring

import (
	"sync/atomic"
	"testing"
	"time"
)

// setLadder sets the spin and yield counts of the waiting ladder and returns
// a function that restores them.
func setLadder(spin, yield int) (restore func()) {
	s, y := spinIters, yieldIters
	spinIters, yieldIters = spin, yield
	return func() { spinIters, yieldIters = s, y }
}

// setParkSlice sets the longest futex sleep of the waiting ladder and
// returns a function that restores it.
func setParkSlice(d time.Duration) (restore func()) {
	old := parkSlice
	parkSlice = d
	return func() { parkSlice = old }
}

// TestWakeInParkWindow wakes a parked writer in the window between its last
// look at the ring and its futex sleep, with a wake-up that moves no
// position. The sleep must end at once. Sleeps are as long as the watchdog,
// so a lost wake-up fails the test at the deadline.
func TestWakeInParkWindow(t *testing.T) {
	defer setLadder(0, 0)()
	defer setParkSlice(watchdog)()
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	for w.WriteData(make([]byte, 200), 1) {
	}
	sleeps := 0
	parkHook = func() {
		sleeps++
		if sleeps == 1 {
			wakeParked(nil, r.prodParked)
			return
		}
		// The first sleep ended: now make room for real.
		for {
			f, err := rd.Next()
			if err != nil {
				break
			}
			rd.Release(f)
		}
	}
	defer func() { parkHook = nil }()
	if err := w.Wait(200, time.Now().Add(watchdog)); err != nil {
		t.Fatalf("writer: %v after %d sleeps (a wake-up that moved no position was lost)", err, sleeps)
	}
	if sleeps != 2 {
		t.Fatalf("writer slept %d times, want 2: woken once for nothing, then for room", sleeps)
	}
}

// TestParkWake runs 10^5 ping-pong cycles over two rings with the spin and
// yield stages of the waiting ladder turned off, so that every wait that
// finds nothing parks on the futex. A lost wake-up leaves one side asleep
// until the watchdog deadline, and the test fails there instead of hanging.
func TestParkWake(t *testing.T) {
	cycles := 100_000
	if testing.Short() {
		cycles = 20_000
	}
	defer setLadder(0, 0)()
	ping, pong := newRing(t, 4096), newRing(t, 4096)
	deadline := time.Now().Add(watchdog)

	var parks atomic.Int64
	parkHook = func() { parks.Add(1) }
	defer func() { parkHook = nil }()

	errc := make(chan error, 1)
	go func() { errc <- echo(ping.Reader(), pong.Writer(), cycles, deadline) }()
	w, rd := ping.Writer(), pong.Reader()
	for i := range cycles {
		var rec [8]byte
		rec[0] = byte(i)
		if !w.WriteData(rec[:], 1) {
			t.Fatalf("cycle %d: ping ring full", i)
		}
		w.Flush()
		f, err := next(rd, deadline)
		if err != nil {
			t.Fatalf("cycle %d: waiting for the echo: %v (lost wake-up?)", i, err)
		}
		if f.Payload[0] != byte(i) {
			t.Fatalf("cycle %d: echo carried %d", i, f.Payload[0])
		}
		rd.Release(f)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if parks.Load() == 0 {
		t.Fatal("no wait ever parked: the test did not exercise the futex path")
	}
	t.Logf("%d cycles, %d parks", cycles, parks.Load())
}

// echo copies each frame from in to out.
func echo(in *Reader, out *Writer, cycles int, deadline time.Time) error {
	for range cycles {
		f, err := next(in, deadline)
		if err != nil {
			return err
		}
		if !out.WriteData(f.Payload, f.Count) {
			return ErrTimeout
		}
		out.Flush()
		in.Release(f)
	}
	return nil
}

// next waits for and returns the next frame.
func next(rd *Reader, deadline time.Time) (Frame, error) {
	for {
		f, err := rd.Next()
		if err != ErrEmpty {
			return f, err
		}
		if err := rd.Wait(deadline); err != nil {
			return Frame{}, err
		}
	}
}

// TestWriterParks fills a ring so the writer must park for room, and checks
// that the reader's releases wake it.
func TestWriterParks(t *testing.T) {
	defer setLadder(0, 0)()
	r := newRing(t, 4096)
	deadline := time.Now().Add(watchdog)
	const n = 50_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := r.Writer()
		for i := range n {
			for !w.WriteData(make([]byte, 200), i) {
				if err := w.Wait(200, deadline); err != nil {
					t.Errorf("writer at frame %d: %v (lost wake-up?)", i, err)
					return
				}
			}
		}
		w.Flush()
	}()
	rd := r.Reader()
	for i := range n {
		f, err := next(rd, deadline)
		if err != nil || f.Count != i {
			t.Fatalf("frame %d: count %d, %v", i, f.Count, err)
		}
		rd.Release(f)
	}
	<-done
}

// TestReaderReady: Ready sees a frame as soon as the writer publishes it,
// without taking it (Next still returns it), and reports nothing once the
// reader has read everything published; a frame written but not yet
// published is not ready.
func TestReaderReady(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	if rd.Ready() {
		t.Fatal("an empty ring is ready")
	}
	if !w.WriteData([]byte("abcdefgh"), 1) {
		t.Fatal("write failed")
	}
	if rd.Ready() {
		t.Fatal("ready before the writer published")
	}
	w.Flush()
	if !rd.Ready() || !rd.Ready() {
		t.Fatal("not ready after the writer published")
	}
	f, err := rd.Next()
	if err != nil || string(f.Payload) != "abcdefgh" {
		t.Fatalf("Next after Ready = %q, %v", f.Payload, err)
	}
	rd.Release(f)
	if rd.Ready() {
		t.Fatal("ready after the only frame was read")
	}
}
