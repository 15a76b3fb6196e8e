package pipelines

import (
	"context"
	"runtime"
	"testing"
)

// TestSteadyStateAllocs checks that no pipeline allocates per record on
// ringflow: the allocations of a run of 4n records less those of a run of
// n (setup, state growth and per-window work cancel out) stay under one
// per hundred records. A per-record allocation anywhere on the path —
// an escaping record, a slice per key, a closure per call — makes it at
// least one per record.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each pipeline twice over up to 2M records")
	}
	const n = 1 << 19
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			mallocs := func(records uint64) uint64 {
				c := Config{Pipeline: name, Records: records, Parallelism: 2, Keys: 100_000}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				res, err := Run(context.Background(), c)
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				if res.Records != records {
					t.Fatalf("%d records run, want %d", res.Records, records)
				}
				return after.Mallocs - before.Mallocs
			}
			small, large := mallocs(n), mallocs(4*n)
			perRecord := (float64(large) - float64(small)) / (3 * n)
			t.Logf("%d allocations for %d records, %d for %d: %.4f per record", small, n, large, 4*n, perRecord)
			if perRecord > 0.01 {
				t.Fatalf("%.4f allocations per record in steady state, want none (at most 0.01)", perRecord)
			}
		})
	}
}
