package ringflow_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/ringflow/ringflow"
)

// BenchmarkStatusHandler measures one request to each status endpoint of a
// finished job with a history of checkpoints (one every 20ms for a second): what a scrape or a page view
// costs the process the job runs in.
func BenchmarkStatusHandler(b *testing.B) {
	job := statusJob(b, false, 2_000_000, func() {})
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
