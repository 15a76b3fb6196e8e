package queries

import (
	"context"
	"testing"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// BenchmarkQuery runs each query on ringflow over b.N events (one op is one
// event, generator included) at parallelism 2, rows counted but not
// formatted. Use -benchtime with an x count, e.g. -benchtime 2000000x: the
// job's setup is amortised over the run. allocs/op is per event.
func BenchmarkQuery(b *testing.B) {
	for _, q := range Names {
		b.Run(q, func(b *testing.B) {
			cfg := nexmark.DefaultConfig()
			cfg.NumEvents = uint64(max(b.N, 1000))
			cfg.EventsPerSecond = 1_000_000
			job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2})
			out := NewOutput(nil)
			if err := Build(job, q, cfg, out); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cfg.NumEvents)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(out.Rows()), "rows")
		})
	}
}

// BenchmarkChan is BenchmarkQuery for the plain-Go baseline.
func BenchmarkChan(b *testing.B) {
	for _, q := range Names {
		if !HasChanBaseline(q) {
			continue
		}
		b.Run(q, func(b *testing.B) {
			cfg := nexmark.DefaultConfig()
			cfg.NumEvents = uint64(max(b.N, 1000))
			cfg.EventsPerSecond = 1_000_000
			out := NewOutput(nil)
			b.ReportAllocs()
			b.ResetTimer()
			if err := RunChan(q, cfg, 2, out); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cfg.NumEvents)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
