package ringflow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestCheckpointTimeline checks the barrier timeline of every completed
// checkpoint of a keyed job: each subtask's input channels name their
// upstream subtasks, the barrier's times along each channel are in order,
// and the critical path runs from a source, over channels that exist, to
// the subtask acknowledged last.
func TestCheckpointTimeline(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 20 * time.Millisecond, StateDir: filepath.Join(t.TempDir(), "state")}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: 400_000, Rate: 2_000_000}))
	doubled := ringflow.Map(src, "double", func(v uint64) uint64 { return 2 * v })
	counts := ringflow.MapWithState(ringflow.KeyBy(doubled, func(v uint64) uint64 { return v % 100 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(context.Context, int64) error { return nil }, ringflow.Parallelism(1))
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Tasks: gen (with double chained), count, and sink. Count's inputs
	// come from gen#0 and gen#1; the sink's from count#0 and count#1.
	wantFrom := map[string]string{"gen": "", "count": "gen", "sink": "count"}
	checked := 0
	for _, c := range job.Checkpoints() {
		if c.Status != "completed" {
			continue
		}
		checked++
		if len(c.Subtasks) != 5 {
			t.Fatalf("checkpoint %d: %d subtasks, want 5 (gen and count x2, sink)", c.ID, len(c.Subtasks))
		}
		var lastAck time.Duration
		for _, st := range c.Subtasks {
			lastAck = max(lastAck, st.Acked)
			from, ok := wantFrom[st.Operator]
			if !ok {
				t.Fatalf("checkpoint %d: subtask of %q, which heads no task", c.ID, st.Operator)
			}
			if from == "" {
				if len(st.Inputs) != 0 {
					t.Errorf("checkpoint %d: source %s#%d has %d inputs", c.ID, st.Operator, st.Subtask, len(st.Inputs))
				}
			} else if len(st.Inputs) != 2 {
				t.Fatalf("checkpoint %d: %s#%d has %d inputs, want 2", c.ID, st.Operator, st.Subtask, len(st.Inputs))
			}
			for i, in := range st.Inputs {
				if in.From != from || in.FromSubtask != i {
					t.Errorf("checkpoint %d: %s#%d input %d from %s#%d, want %s#%d",
						c.ID, st.Operator, st.Subtask, i, in.From, in.FromSubtask, from, i)
				}
				// Aligned: every barrier arrives, is read before the
				// snapshot, and the channel is done when it is read.
				if in.Arrived <= 0 || in.Done < in.Arrived || (!st.Unaligned && in.Done > st.Snapshot) {
					t.Errorf("checkpoint %d: %s#%d input %d: arrived %v, done %v, snapshot %v",
						c.ID, st.Operator, st.Subtask, i, in.Arrived, in.Done, st.Snapshot)
				}
			}
			if st.Operator == "sink" {
				if st.Forwarded != 0 {
					t.Errorf("checkpoint %d: the sink forwarded its barrier at %v", c.ID, st.Forwarded)
				}
			} else if st.Forwarded < st.Snapshot {
				t.Errorf("checkpoint %d: %s#%d forwarded at %v, before its snapshot at %v",
					c.ID, st.Operator, st.Subtask, st.Forwarded, st.Snapshot)
			}
			if st.Acked < st.Snapshot || st.Acked > c.Duration {
				t.Errorf("checkpoint %d: %s#%d acked at %v; snapshot %v, checkpoint done at %v",
					c.ID, st.Operator, st.Subtask, st.Acked, st.Snapshot, c.Duration)
			}
		}
		// The path ends where the last part was written: count's state
		// or the sink's may be written last.
		path := c.CriticalPath()
		if len(path) < 2 || path[0].Operator != "gen" || path[0].Channel != -1 || path[1].Operator != "count" ||
			len(path) == 3 && path[2].Operator != "sink" || len(path) > 3 {
			t.Fatalf("checkpoint %d: critical path %+v, want gen -> count, or gen -> count -> sink", c.ID, path)
		}
		for i, step := range path[1:] {
			up := path[i]
			st := subtaskOf(t, c, step.Operator, step.Subtask)
			if in := st.Inputs[step.Channel]; in.From != up.Operator || in.FromSubtask != up.Subtask {
				t.Errorf("checkpoint %d: critical path %+v: step %d waits on a channel from %s#%d",
					c.ID, path, i+1, in.From, in.FromSubtask)
			}
		}
		if end := path[len(path)-1]; subtaskOf(t, c, end.Operator, end.Subtask).Acked != lastAck {
			t.Errorf("checkpoint %d: the path ends at %s#%d, not at the subtask acked last (at %v)",
				c.ID, end.Operator, end.Subtask, lastAck)
		}
	}
	if checked < 2 {
		t.Fatalf("%d checkpoints completed, want several", checked)
	}
}

func subtaskOf(t *testing.T, c ringflow.CheckpointStats, op string, sub int) ringflow.SubtaskCheckpointStats {
	t.Helper()
	for _, st := range c.Subtasks {
		if st.Operator == op && st.Subtask == sub {
			return st
		}
	}
	t.Fatalf("checkpoint %d has no subtask %s#%d", c.ID, op, sub)
	return ringflow.SubtaskCheckpointStats{}
}

// TestGraph checks the graph a job reports: operators in order with their
// kinds and tasks, and edges with their partitioning and chaining.
func TestGraph(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: 10}))
	doubled := ringflow.Map(src, "double", func(v uint64) uint64 { return 2 * v })
	counts := ringflow.MapWithState(ringflow.KeyBy(doubled, func(v uint64) uint64 { return v % 100 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(context.Context, int64) error { return nil }, ringflow.Parallelism(1))
	g := job.Graph()
	wantOps := []ringflow.GraphOperator{
		{Name: "gen", Parallelism: 2, Kind: "source", Task: "gen"},
		{Name: "double", Parallelism: 2, Kind: "operator", Task: "gen"},
		{Name: "count", Parallelism: 2, Kind: "operator", Keyed: true, Task: "count"},
		{Name: "sink", Parallelism: 1, Kind: "sink", Task: "sink"},
	}
	wantEdges := []ringflow.GraphEdge{
		{From: "gen", To: "double", Partitioning: "forward", Chained: true},
		{From: "double", To: "count", Partitioning: "hash"},
		{From: "count", To: "sink", Partitioning: "rebalance"}, // forward between parallelisms 2 and 1
	}
	if len(g.Operators) != len(wantOps) || len(g.Edges) != len(wantEdges) {
		t.Fatalf("graph %+v\nwant operators %+v\nedges %+v", g, wantOps, wantEdges)
	}
	for i := range wantOps {
		if g.Operators[i] != wantOps[i] {
			t.Errorf("operator %d: %+v, want %+v", i, g.Operators[i], wantOps[i])
		}
	}
	for i := range wantEdges {
		if g.Edges[i] != wantEdges[i] {
			t.Errorf("edge %d: %+v, want %+v", i, g.Edges[i], wantEdges[i])
		}
	}
}
