package ring

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/futex"
)

// ErrTimeout is returned by Wait when its deadline passes first.
var ErrTimeout = errors.New("ring: wait timed out")

// The waiting ladder: spin, then yield the thread, then park. Spinning is
// brief because this machine may have fewer cores than busy threads.
// parkSlice bounds one futex sleep, so a deadline is noticed even if no
// wake-up comes (a dead peer process). Tests change them.
var (
	spinIters  = 64
	yieldIters = 16
	parkSlice  = 50 * time.Millisecond
)

// parkHook, when set by a test, is called before every futex sleep.
var parkHook func()

// Wait blocks until a frame is published past the read position, the
// deadline passes (ErrTimeout; a zero deadline never passes), or the ring is
// found corrupt.
func (rd *Reader) Wait(deadline time.Time) error {
	ready := func() bool { return rd.pos != rd.cachedProd || rd.refresh() || rd.err != nil }
	if err := ladder(ready, rd.r.consParked, deadline); err != nil {
		return err
	}
	return rd.err
}

// Wait blocks until a DATA frame of n payload bytes fits, or the deadline
// passes (ErrTimeout; a zero deadline never passes). It flushes first: a
// writer never sleeps on frames its reader cannot see.
func (w *Writer) Wait(n int, deadline time.Time) error {
	w.Flush()
	ready := func() bool { return w.Room(n) }
	return ladder(ready, w.r.prodParked, deadline)
}

// ladder waits for ready: spin, yield, then park: announce the sleep in
// parked and sleep on that word while it holds the announcement.
func ladder(ready func() bool, parked *atomic.Uint32, deadline time.Time) error {
	for range spinIters {
		if ready() {
			return nil
		}
		cpuRelax()
	}
	for range yieldIters {
		if ready() {
			return nil
		}
		runtime.Gosched()
	}
	for {
		parked.Store(1)
		// NB: ready reloads the other side's position after the store above;
		// see "Waiting" in the package doc for why no wake-up is lost.
		if ready() {
			parked.Store(0)
			return nil
		}
		slice := parkSlice
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				parked.Store(0)
				return ErrTimeout
			}
			slice = min(slice, left)
		}
		if parkHook != nil {
			parkHook()
		}
		// NB: a waker clears parked before it wakes the futex, so a wake-up
		// that comes between ready and this call makes it return at once.
		futex.Wait(word32(parked), 1, slice)
	}
}

// wakeParked wakes the side whose parked word is parked, which its caller
// found set: it clears the announcement with a CAS, so that one waker calls
// the Waker or the futex, then wakes through w if there is one, else through
// the futex on the parked word. NB: callers load the word first, inline:
// it is almost always 0.
func wakeParked(w Waker, parked *atomic.Uint32) {
	if !parked.CompareAndSwap(1, 0) {
		return
	}
	if w != nil {
		w.Wake()
		return
	}
	futex.Wake(word32(parked))
}

func word32(w *atomic.Uint32) *uint32 { return (*uint32)(unsafe.Pointer(w)) }

// PrepareToPark announces that the reader is about to sleep until the writer
// publishes, and reports whether it may: false means a frame is already
// there (or the ring is broken) and the announcement was withdrawn. A
// scheduler sleeping on many rings calls it on each, then sleeps until a
// Waker fires; it calls Unpark when it wakes.
func (rd *Reader) PrepareToPark() bool {
	if rd.pos != rd.cachedProd || rd.err != nil {
		return false
	}
	rd.publish()
	rd.r.consParked.Store(1)
	if rd.refresh() || rd.err != nil {
		rd.r.consParked.Store(0)
		return false
	}
	return true
}

// Unpark withdraws a PrepareToPark announcement.
func (rd *Reader) Unpark() { rd.r.consParked.Store(0) }

// PrepareToPark announces that the writer is about to sleep until a DATA
// frame of n payload bytes fits, and reports whether it may: false means the
// room is already there. It flushes first.
func (w *Writer) PrepareToPark(n int) bool {
	w.Flush()
	w.r.prodParked.Store(1)
	if w.Room(n) {
		w.r.prodParked.Store(0)
		return false
	}
	return true
}

// Unpark withdraws a PrepareToPark announcement.
func (w *Writer) Unpark() { w.r.prodParked.Store(0) }
