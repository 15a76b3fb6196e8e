package futex

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestWaitWake has a sleeper wait on a word that a waker changes and wakes;
// the sleeper must observe the change. The waker keeps waking until the
// sleeper reports back, so the test cannot pass by timing alone.
func TestWaitWake(t *testing.T) {
	var word atomic.Uint32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for word.Load() == 0 {
			Wait(addr(&word), 0, time.Second)
		}
	}()
	word.Store(1)
	Wake(addr(&word))
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("sleeper never saw the change")
	}
}

// TestWaitValueMismatch checks that Wait returns at once when the word does
// not hold the expected value (it would otherwise sleep for the minute).
func TestWaitValueMismatch(t *testing.T) {
	var word atomic.Uint32
	word.Store(5)
	done := make(chan struct{})
	go func() { Wait(addr(&word), 4, time.Minute); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Wait slept although the word did not hold the expected value")
	}
}

func addr(w *atomic.Uint32) *uint32 { return (*uint32)(unsafe.Pointer(w)) }
