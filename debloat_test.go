package ringflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestDebloatBoundsRings runs a job whose sink takes 20µs a record behind
// a rebalance. Without debloating the ring into the sink fills to its
// capacity; with a 2ms target its consumer limits it to what it drains in
// about that much busy time (32-byte records at most 50,000 a second: a
// few KB), and the ring never holds much more than its limit.
func TestDebloatBoundsRings(t *testing.T) {
	const capacity = 1 << 20
	for _, debloat := range []time.Duration{-1, 2 * time.Millisecond} {
		t.Run(fmt.Sprint("debloat=", debloat), func(t *testing.T) {
			job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 2, RingCapacity: capacity, Debloat: debloat})
			src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event { return event{Seq: i, Key: i % 64} },
				ringflow.GenOptions{}))
			ringflow.Sink(ringflow.Rebalance(src), "slow", func(context.Context, event) error {
				spin(20 * time.Microsecond)
				return nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- job.Run(ctx) }()
			// NB: samples are counted, not timed: the machine may be slow,
			// and the bound must hold at every one after the first few.
			var maxQueued, maxOver, lastLimit int
			for i := 0; i < 300; i++ {
				time.Sleep(5 * time.Millisecond)
				for _, c := range job.Metrics().Channels {
					if c.From != "src" || c.To != "slow" {
						continue
					}
					maxQueued = max(maxQueued, c.QueuedBytes)
					lastLimit = c.LimitBytes
					if i >= 100 {
						maxOver = max(maxOver, c.QueuedBytes-c.LimitBytes)
					}
				}
			}
			cancel()
			if err := <-done; err != context.Canceled {
				t.Fatalf("run: %v, want it cancelled", err)
			}
			t.Logf("most queued %d B, last limit %d B, most over the limit %d B", maxQueued, lastLimit, maxOver)
			if debloat < 0 {
				if maxQueued < capacity/2 || lastLimit < capacity*3/4 {
					t.Fatalf("without debloating: most queued %d B, limit %d B; want the ring to fill its %d B", maxQueued, lastLimit, capacity)
				}
				return
			}
			if lastLimit > capacity/16 {
				t.Fatalf("limit %d B, want it far below the %d B capacity: a slow consumer's rings are debloated", lastLimit, capacity)
			}
			// NB: the writer takes a lowered limit at its next full check,
			// and an empty ring takes one frame whatever its size.
			if maxOver > lastLimit {
				t.Fatalf("the ring held %d B over its limit (%d B)", maxOver, lastLimit)
			}
		})
	}
}
