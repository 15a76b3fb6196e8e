package compare

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/statusui"
)

// slowestView returns the status page's view of the slowest completed,
// non-final checkpoint in cps (nil if none completed), as the job's
// status handler serves it at /api/checkpoints/{id}: the report draws the
// same timeline as the page.
func slowestView(job *ringflow.Job, cps []ringflow.CheckpointStats) (*statusui.CheckpointView, error) {
	var slowest *ringflow.CheckpointStats
	for i := range cps {
		c := &cps[i]
		if c.Status == "completed" && !c.Final && (slowest == nil || c.Duration > slowest.Duration) {
			slowest = c
		}
	}
	if slowest == nil {
		return nil, nil
	}
	rec := httptest.NewRecorder()
	ringflow.StatusHandler(job).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/checkpoints/%d", slowest.ID), nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("checkpoint %d's view: %d %s", slowest.ID, rec.Code, rec.Body)
	}
	var v statusui.CheckpointView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		return nil, fmt.Errorf("checkpoint %d's view: %w", slowest.ID, err)
	}
	return &v, nil
}
