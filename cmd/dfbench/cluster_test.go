package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/bench/nexmark/oracle"
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

// TestClusterQuery runs Nexmark queries as distributed jobs of two and
// three processes: the processes generate every event once between them,
// and the rows they commit are the rows of one process, which are the
// oracle's over the same events.
func TestClusterQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	useTestChild(t)
	const events, rate = 40_000, 4_000 // 10 s of event time: 5 q5 windows' ends, 1 or 2 of q8's
	for _, tc := range []struct {
		query     string
		processes int
	}{{"q5", 3}, {"q8", 2}} {
		t.Run(tc.query, func(t *testing.T) {
			r := runClusterQueryJSON(t, "--query", tc.query, "--processes", fmt.Sprint(tc.processes),
				"--events", fmt.Sprint(events), "--rate", fmt.Sprint(rate), "--checkpoint-interval", "20ms")
			evs, err := oracle.Generate(queryEvents(events, rate))
			if err != nil {
				t.Fatal(err)
			}
			want, err := oracle.Query(tc.query, evs)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Identical || r.Diff != "" || r.Rows != len(want) || r.ReferenceRows != len(want) || len(want) == 0 {
				t.Errorf("identical %v, %d rows, %d in one process, %s; want identical, %d rows (the oracle's)",
					r.Identical, r.Rows, r.ReferenceRows, r.Diff, len(want))
			}
			var generated int64
			rows := 0
			for _, p := range r.PerProcess {
				if p.Events == 0 || p.Checkpoints == 0 || p.CheckpointsFailed != 0 || p.LateDropped != 0 {
					t.Errorf("process %d: %+v; want events, checkpoints, none failed and nothing late", p.Process, p)
				}
				generated += p.Events
				rows += p.Rows
			}
			if len(r.PerProcess) != tc.processes || generated != events || rows != r.Rows {
				t.Errorf("%d processes generated %d events and wrote %d rows; want %d processes, %d events, %d rows",
					len(r.PerProcess), generated, rows, tc.processes, events, r.Rows)
			}
		})
	}
}

// A distributed run whose output lacks one process's rows is not
// identical: the command says which rows are missing and fails.
func TestClusterQueryMissingPart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	useTestChild(t)
	dropClusterRow = func(process int, _ string) bool { return process == 1 }
	t.Cleanup(func() { dropClusterRow = nil })
	var stdout, stderr bytes.Buffer
	args := []string{"cluster", "--query", "q8", "--processes", "2", "--events", "40000", "--rate", "4000",
		"--checkpoint-interval", "20ms", "--json"}
	if code := dfbench(args, &stdout, &stderr); code != 1 {
		t.Fatalf("dfbench %v: exit %d, want 1\n%s", args, code, stderr.String())
	}
	var r clusterQueryResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	if r.Identical || r.Rows >= r.ReferenceRows || r.PerProcess[1].Rows != 0 || !strings.Contains(r.Diff, "missing") {
		t.Errorf("got %+v; want not identical, fewer rows than one process, none from process 1", r)
	}
	if !strings.Contains(stderr.String(), "differs from one process's") || !strings.Contains(stderr.String(), "\n  missing ") {
		t.Errorf("stderr %q names no missing row", stderr.String())
	}
}

// runClusterQueryJSON runs dfbench cluster with args and --json, wants
// exit code 0 and returns its report.
func runClusterQueryJSON(t *testing.T, args ...string) clusterQueryResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(append([]string{"cluster"}, args...), "--json")
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("dfbench %v: exit %d\n%s", args, code, stderr.String())
	}
	var r clusterQueryResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	t.Logf("%+v", r)
	return r
}

func TestClusterFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--query", "q4"}, `--query "q4": want keyed-count or one of q0,`},
		{[]string{"--query", "q5", "--records", "10"}, "--records: only for --query keyed-count"},
		{[]string{"--query", "q5", "--events", "0"}, "--events 0"},
		{[]string{"--query", "q5", "--rate", "2000000"}, "EventsPerSecond"},
		{[]string{"--query", "q5", "--rate", "-1"}, "--rate -1"},
		{[]string{"--query", "q5", "--checkpoint-interval", "0s"}, "--checkpoint-interval 0s"},
		{[]string{"--query", "q5", "--processes", "4", "--partitions", "3"}, "--processes 4, --parallelism 1, --partitions 3"},
		{[]string{"--events", "10"}, "--events is for a Nexmark --query"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"cluster"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("cluster %v: exit %d, stderr %q, stdout %q; want exit 2 and %q",
				tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}
