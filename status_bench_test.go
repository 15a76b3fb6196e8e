package ringflow_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// BenchmarkStatusHandler measures one request to each status endpoint of a
// finished job with a history of checkpoints: what a scrape or a page view
// costs the process the job runs in.
func BenchmarkStatusHandler(b *testing.B) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(b.TempDir(), "state")}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: 2_000_000, Rate: 2_000_000}))
	counts := ringflow.MapWithState(ringflow.KeyBy(src, func(v uint64) uint64 { return v % 1000 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(int64) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := ringflow.StatusHandler(job)
	cps := job.Checkpoints()
	for _, path := range []string{"/metrics", "/", "/checkpoints", "/api/overview"} {
		b.Run(path, func(b *testing.B) {
			b.ReportMetric(float64(len(cps)), "checkpoints")
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != 200 {
					b.Fatalf("%s: %d", path, rec.Code)
				}
			}
		})
	}
}
