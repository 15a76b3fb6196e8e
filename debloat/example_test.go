package debloat_test

import (
	"fmt"
	"time"

	"github.com/ringflow/ringflow/debloat"
	"github.com/ringflow/ringflow/ring"
)

// A consumer with two input channels, backpressured: busy all the time,
// draining 1.5 MB a second from channel 0 and 0.5 MB from channel 1, until
// at 200ms its own output slows it to a fifth. Its task observes at every
// round (here every 5ms); when a limit changes, it passes it on to the
// channel's ring with SetLimit.
func Example() {
	usable := uint64(1<<20 - ring.DefaultReserve) // a 1 MiB ring's usable capacity
	c, err := debloat.New(debloat.Config{Target: 100 * time.Millisecond, Min: ring.MinLimit, Max: usable}, 2)
	if err != nil {
		panic(err)
	}
	drain := []uint64{1500, 500} // bytes per millisecond
	consumed := make([]uint64, 2)
	for now := time.Duration(0); now <= 400*time.Millisecond; now += 5 * time.Millisecond {
		if now == 200*time.Millisecond {
			drain = []uint64{300, 100}
		}
		if c.Observe(now, now, consumed) {
			// The task would call rings[ch].Reader().SetLimit(int(c.Limit(ch))).
			fmt.Printf("%v: limits %d %d\n", now, c.Limit(0), c.Limit(1))
		}
		for ch := range consumed {
			consumed[ch] += 5 * drain[ch]
		}
	}
	// Output:
	// 25ms: limits 150000 50000
	// 250ms: limits 97500 32500
	// 300ms: limits 67968 22656
	// 375ms: limits 46018 15339
}
