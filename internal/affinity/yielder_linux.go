package affinity

import "time"

// Yielder yields the calling thread (Yield) once Every has passed since it
// last did. A thread that is not a pinned worker (a checkpoint writer)
// calls MaybeYield between small pieces of its work: on a machine whose
// cores the pinned workers keep, the kernel otherwise lets it run until the
// next scheduler tick (4 ms at HZ=250), whatever its niceness, and the
// records waiting for the worker it displaced wait as long. The zero
// Yielder yields at its first call.
type Yielder struct {
	Every time.Duration
	last  time.Time
	// Now and Yield default to time.Now and Yield; tests replace them.
	Now   func() time.Time
	Yield func()
}

// MaybeYield yields if Every has passed since the last yield.
func (y *Yielder) MaybeYield() {
	now := time.Now
	if y.Now != nil {
		now = y.Now
	}
	if now().Sub(y.last) < y.Every {
		return
	}
	if y.Yield != nil {
		y.Yield()
	} else {
		Yield()
	}
	y.last = now()
}
