package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ringflow/ringflow/bench/soak"
	"github.com/ringflow/ringflow/internal/tabletest"
)

// useTestChild makes the soak's children this test binary, which runs
// them through TestRunKillChild.
func useTestChild(t *testing.T) {
	prev := soakCommand
	t.Cleanup(func() { soakCommand = prev })
	soakCommand = func(args []string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunKillChild$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join(args, "\n"))
		return cmd, nil
	}
}

// TestSoakFailAndKill soaks keyed-count for four seconds with failures
// and kills, checking its output as it goes (--sink-keep) and at the end:
// the output is exactly once, the samples are sane, and the counts of the
// summary, the CSV and the children agree.
func TestSoakFailAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	useTestChild(t)
	dir := t.TempDir()
	csvFile, sinkDir := filepath.Join(dir, "samples.csv"), filepath.Join(dir, "out")
	args := []string{"soak", "--duration", "4s", "--keys", "1000", "--rate", "100000", "--parallelism", "2",
		"--workers", "2", "--checkpoint-interval", "100ms", "--interval", "250ms", "--fail-every", "500ms",
		"--kill-every", "1500ms", "--sink-dir", sinkDir, "--sink-keep", "4", "--csv", csvFile, "--json",
		"--max-failed-checkpoints", "0"}
	var stdout, stderr bytes.Buffer
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	var sum soakJSON
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("%v in %q", err, stdout.String())
	}
	v := sum.Verify
	t.Logf("%d samples, %d kills, %d failures, %d checkpoints; verify %+v", sum.Samples, sum.Kills, sum.Failures,
		sum.Checkpoints.Completed, v)
	if v == nil || !v.OK || v.Records == 0 || v.Lines != v.Records {
		t.Fatalf("verify %+v: want every generated record's line, exactly once", v)
	}
	left, err := filepath.Glob(filepath.Join(sinkDir, "part-*"))
	if err != nil || v.Files <= len(left) {
		t.Errorf("%d part files checked, %d left in the sink dir (%v): want --sink-keep to have deleted some", v.Files, len(left), err)
	}
	if sum.Kills < 1 || sum.Children != sum.Kills+1 || sum.Failures < 1 || sum.Restarts != sum.Failures {
		t.Errorf("%d kills, %d children, %d failures, %d restarts: want a kill or more, a child after each, "+
			"a failure or more, a restart each", sum.Kills, sum.Children, sum.Failures, sum.Restarts)
	}
	if ck := sum.Checkpoints; ck.Completed == 0 || ck.Failed != 0 || ck.DurationMs.Max <= 0 || ck.SyncMaxUs.Max <= 0 {
		t.Errorf("checkpoints %+v: want some completed, with durations and sync parts, none failed", ck)
	}
	if len(sum.Violations) != 0 {
		t.Errorf("violations %q", sum.Violations)
	}
	rows := readSoakCSV(t, csvFile)
	if len(rows) < 4 || len(rows) != sum.Samples {
		t.Fatalf("%d rows in the CSV, %d samples in the summary; want the same, at least 4", len(rows), sum.Samples)
	}
	children, live := map[float64]bool{}, 0.0
	for i, r := range rows {
		if r["rss_bytes"] <= 0 || r["heap_objects_bytes"] <= 0 || r["go_held_bytes"] < r["heap_objects_bytes"] || r["kills"] > float64(sum.Kills) {
			t.Errorf("row %d: %v", i+1, r)
		}
		live = max(live, r["heap_live_bytes"]) // 0 until a child's first GC
		if i > 0 && r["t_s"] <= rows[i-1]["t_s"] {
			t.Errorf("row %d at %v s, after row %d at %v s", i+1, r["t_s"], i, rows[i-1]["t_s"])
		}
		children[r["child"]] = true
	}
	last := rows[len(rows)-1]
	if len(children) < 2 || last["state_files"] == 0 || last["ck_completed"] == 0 || sum.Series["records_per_s"].Max <= 0 || live == 0 {
		t.Errorf("rows of %d children, last row %v, records/s %+v, live heap %v: want rows of two children or more, "+
			"state files, checkpoints, records and a live heap", len(children), last, sum.Series["records_per_s"], live)
	}
}

// readSoakCSV reads a --csv file: its header must be soak.Header(), and
// every row a number per column.
func readSoakCSV(t *testing.T, file string) []map[string]float64 {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != soak.Header() {
		t.Fatalf("CSV header %q, want %q", lines[0], soak.Header())
	}
	names := strings.Split(lines[0], ",")
	var rows []map[string]float64
	for i, line := range lines[1:] {
		cells := strings.Split(line, ",")
		if len(cells) != len(names) {
			t.Fatalf("row %d has %d cells, the header %d", i+1, len(cells), len(names))
		}
		row := map[string]float64{}
		for j, c := range cells {
			if row[names[j]], err = strconv.ParseFloat(c, 64); err != nil {
				t.Fatalf("row %d, %s: %v", i+1, names[j], err)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestSoakFlags: flags that make no sense are refused before anything
// runs, with a message naming the flag.
func TestSoakFlags(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration 0s"},
		{[]string{"--duration", "10s", "--warmup", "10s"}, "--warmup 10s"},
		{[]string{"--checkpoint-interval", "0s"}, "--checkpoint-interval 0s"},
		{[]string{"--pipeline", "window"}, "--verify"},
		{[]string{"--sink-keep", "2"}, "--sink-keep 2"},
		{[]string{"--sink-keep", "5", "--verify=false"}, "--sink-keep 5"},
		{[]string{"--state-dir", full}, "not empty"},
		{[]string{"--sink-dir", full}, "not empty"},
		{[]string{"--fail-every", "-1s"}, "--fail-every -1s"},
		{[]string{"--sample-every", "3"}, "--sample-every 3"},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"soak"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("soak %q: exit %d, %q; want 2 and a message with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestSoakSummaryTable prints the summary of synthetic samples: a table
// of one row per level, every row with as many cells as its header.
func TestSoakSummaryTable(t *testing.T) {
	defer func(f uint) { tableFlags = f }(tableFlags)
	tableFlags |= tabwriter.Debug
	var samples []soak.Sample
	for i := range 10 {
		samples = append(samples, soak.Sample{At: time.Duration(i+1) * time.Second, Child: 1,
			RSS: soak.RSS{Total: uint64(100+i) << 20}, RecordsPerSec: 1e6})
	}
	cks := []soak.Checkpoint{{ID: 1, Status: "completed", Duration: 40 * time.Millisecond, SyncMax: 90 * time.Microsecond}}
	f := soakFlags{job: soakJob{Pipeline: "keyed-count", Keys: 10, Parallelism: 2, CheckpointInterval: time.Second},
		duration: 10 * time.Second, warmup: 2 * time.Second}
	var out bytes.Buffer
	s := &soaker{children: 1}
	if err := printSoak(&out, f, s, soak.Summarize(samples, cks, f.warmup), &soakCheck{}); err != nil {
		t.Fatal(err)
	}
	tabletest.CheckColumns(t, "soak", out.String())
	for _, want := range []string{"rss_MB", "records_per_s", "1.00M", "p99 40.0", "exactly once: 0 lines"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary without %q:\n%s", want, out.String())
		}
	}
}
