package debloat

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkObserve measures Observe as a task calls it, at every round:
// within a period (the common case, a comparison), and at a period's end
// (the rates and limits of every channel).
func BenchmarkObserve(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		c, err := New(Config{Target: 100 * time.Millisecond, Min: 520, Max: 1 << 20}, n)
		if err != nil {
			b.Fatal(err)
		}
		consumed := make([]uint64, n)
		b.Run(fmt.Sprintf("within-period/channels=%d", n), func(b *testing.B) {
			c.Observe(0, 0, consumed)
			b.ReportAllocs()
			for b.Loop() {
				c.Observe(time.Millisecond, time.Millisecond, consumed)
			}
		})
		b.Run(fmt.Sprintf("period-end/channels=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			now := time.Duration(0)
			for b.Loop() {
				now += c.period
				for i := range consumed {
					consumed[i] += 1000 * uint64(i+1)
				}
				c.Observe(now, now, consumed)
			}
		})
	}
}

// TestObserveAllocs checks that Observe allocates nothing, within a period
// or at its end.
func TestObserveAllocs(t *testing.T) {
	c, err := New(Config{Target: 100 * time.Millisecond, Min: 520, Max: 1 << 20}, 4)
	if err != nil {
		t.Fatal(err)
	}
	consumed := make([]uint64, 4)
	now := time.Duration(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += c.period / 2
		consumed[0] += 1000
		c.Observe(now, now, consumed)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Observe, want 0", allocs)
	}
}
