package ringflow

import (
	"testing"
	"time"
)

// TestCheckpointHistoryBounded: a job keeps the statistics of its latest
// keptCheckpoints checkpoints, while its counts, histograms, last
// checkpoint and highest id cover every one it recorded.
func TestCheckpointHistoryBounded(t *testing.T) {
	j := NewJob(Config{})
	const n = keptCheckpoints + 500
	for id := uint64(1); id <= n; id++ {
		s := CheckpointStats{ID: id, Status: "completed", Duration: time.Duration(id) * time.Millisecond,
			Subtasks: []SubtaskCheckpointStats{{Operator: "op", Sync: time.Microsecond}}}
		switch id % 10 {
		case 3:
			s.Status = "failed: injected"
		case 7:
			s.Status = "aborted: the job stopped"
		}
		j.recordCheckpoint(s)
	}
	cps := j.Checkpoints()
	if len(cps) != keptCheckpoints || cps[0].ID != n-keptCheckpoints+1 || cps[len(cps)-1].ID != n {
		t.Fatalf("kept %d checkpoints, ids %d..%d; want the latest %d, %d..%d", len(cps), cps[0].ID, cps[len(cps)-1].ID,
			keptCheckpoints, n-keptCheckpoints+1, n)
	}
	m := j.Metrics()
	if m.CheckpointsCompleted != n*8/10 || m.CheckpointsFailed != n/10 || m.CheckpointsAborted != n/10 {
		t.Errorf("metrics count %d completed, %d failed, %d aborted; want %d, %d, %d", m.CheckpointsCompleted,
			m.CheckpointsFailed, m.CheckpointsAborted, n*8/10, n/10, n/10)
	}
	sum := j.checkpointSummary()
	if sum.duration.n != uint64(n*8/10) || sum.sync.n != uint64(n*8/10) || sum.last == nil || sum.last.ID != n {
		t.Errorf("histograms of %d and %d observations, last %+v; want %d each and checkpoint %d",
			sum.duration.n, sum.sync.n, sum.last, n*8/10, n)
	}
	if got := j.lastCheckpointID(); got != n {
		t.Errorf("lastCheckpointID %d, want %d", got, n)
	}
}
