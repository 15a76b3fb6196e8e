//go:build invariants

package ringflow_test

import (
	"strings"
	"testing"

	"github.com/ringflow/ringflow"
)

// TestKeyByBatchDisagrees: in an invariants build, a batch form of the key
// function that gives other keys than the key function fails the job and
// names KeyByBatch.
func TestKeyByBatchDisagrees(t *testing.T) {
	evs := makeEvents(1, 1000, 10, 0)
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2})
	s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
	k := ringflow.KeyByBatch(s, func(e event) uint64 { return e.Key }, func(recs []event, out []uint64) {
		for i := range recs {
			out[i] = recs[i].Key + 1
		}
	})
	n := ringflow.MapWithState(k, "count", func(acc *int64, e event) int64 { *acc++; return *acc })
	ringflow.Sink(n, "sink", sinkTo(new(collect), func(int64) string { return "" }))
	err := job.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "KeyByBatch") {
		t.Fatalf("Run: %v, want an error naming KeyByBatch", err)
	}
}
