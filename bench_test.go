package ringflow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ringflow/ringflow"
)

// BenchmarkPipelines measures whole jobs: b.N records from a generator to a
// counting sink, at parallelism 2 on 2 workers.
func BenchmarkPipelines(b *testing.B) {
	for _, name := range []string{"passthrough", "map-filter", "keyed-count"} {
		b.Run(name, func(b *testing.B) {
			job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2})
			src := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) event {
				return event{Seq: seq, Key: seq * 0x9E3779B97F4A7C15 % 100_000, Value: int64(seq)}
			}, ringflow.GenOptions{Count: uint64(b.N)}))
			var out ringflow.Stream[event]
			switch name {
			case "passthrough":
				out = src
			case "map-filter":
				m := ringflow.Map(src, "map", func(e event) event { e.Value = e.Value*3 + 1; return e })
				out = ringflow.Filter(m, "filter", func(e event) bool { return e.Value&2 == 0 })
			case "keyed-count":
				k := ringflow.KeyBy(src, func(e event) uint64 { return e.Key })
				out = ringflow.Reduce(k, "count", func(a, e event) event { a.Value++; return a })
			}
			counts := make([]int64, 64)
			ringflow.Sink(ringflow.Rebalance(out), "sink", func(_ context.Context, e event) error {
				counts[0]++ // racy but only a sink-side cost stand-in; not checked
				return nil
			})
			b.ReportAllocs()
			b.ResetTimer()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrec/s")
			_ = fmt.Sprint
		})
	}
}
