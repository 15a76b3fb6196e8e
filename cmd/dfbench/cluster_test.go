package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestCluster runs keyed-count as two child processes joined by kfake:
// every record is counted once, by one of them, and comes out once.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	useTestChild(t)
	var stdout, stderr bytes.Buffer
	args := []string{"cluster", "--processes", "2", "--records", "3000", "--keys", "100", "--checkpoint-interval", "20ms", "--json"}
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("dfbench %v: exit %d\n%s", args, code, stderr.String())
	}
	var r clusterResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	t.Logf("%+v", r)
	var counted int64
	for _, p := range r.PerProcess {
		if p.Counted == 0 {
			t.Errorf("process %d counted nothing: %+v", p.Process, r)
		}
		counted += p.Counted
	}
	if r.Output != 3000 || counted != 3000 || len(r.PerProcess) != 2 || r.LatencyMaxMs <= 0 {
		t.Fatalf("got %+v (%d counted): want 3000 records out, 3000 counted by 2 processes, and latencies", r, counted)
	}
}
