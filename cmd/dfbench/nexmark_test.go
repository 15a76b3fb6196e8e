package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/bench/nexmark/oracle"
	"github.com/ringflow/ringflow/bench/nexmark/queries"
)

func TestNexmarkFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--query", "q4"}, `--query "q4"`},
		{[]string{"--events", "0"}, "--events 0"},
		{[]string{"--rate", "2000000"}, "EventsPerSecond"},
		{[]string{"--parallelism", "0"}, "--parallelism 0"},
		{[]string{"--baseline", "rust"}, `--baseline "rust"`},
		{[]string{"--checkpoint-interval", "-1s"}, "--checkpoint-interval -1s"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"nexmark"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("nexmark %v: exit %d, stderr %q, stdout %q; want exit 2 and %q",
				tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// A state directory that cannot be made fails the run with the reason.
func TestNexmarkBadStateDir(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dfbench([]string{"nexmark", "--query", "q0", "--events", "10", "--state-dir", "/proc/nonexistent/x"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "open checkpoint store") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming the checkpoint store", code, stderr.String())
	}
}

// Every query run through the command writes, with --output, exactly the
// rows the oracle computes from the events --dump wrote, with checkpoints
// (rows through a transactional file sink) and without; --json reports the
// same row counts and the checkpoints, and the chan baseline agrees where
// there is one.
func TestNexmarkOutputMatchesDump(t *testing.T) {
	for _, interval := range []string{"5ms", "0"} {
		t.Run("checkpoint-interval="+interval, func(t *testing.T) { testOutputMatchesDump(t, interval) })
	}
}

func testOutputMatchesDump(t *testing.T, interval string) {
	dir := t.TempDir()
	dump, output := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "rows.csv")
	var stdout, stderr bytes.Buffer
	code := dfbench([]string{"nexmark", "--query", "all", "--events", "40000", "--rate", "2000",
		"--parallelism", "2", "--workers", "2", "--dump", dump, "--output", output, "--json", "--baseline", "chan",
		"--checkpoint-interval", interval},
		&stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	events, err := oracle.ReadDump(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 40000 {
		t.Fatalf("dump holds %d events, want 40000", len(events))
	}
	dec := json.NewDecoder(&stdout)
	for _, q := range queries.Names {
		var r nexmarkResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s: JSON: %v", q, err)
		}
		want, _ := oracle.Query(q, events)
		got := readLines(t, filepath.Join(dir, "rows."+q+".csv"))
		if d := oracle.Diff(got, want); d != "" {
			t.Errorf("%s: --output differs from the oracle over --dump: %s", q, d)
		}
		if r.Query != q || r.Rows != int64(len(want)) || r.Events != 40000 {
			t.Errorf("%s: JSON %+v; want query %s, %d rows, 40000 events", q, r, q, len(want))
		}
		if c := r.Checkpoints; (interval == "0") != (c == nil) || c != nil && (!c.Final || c.Failed > 0) {
			t.Errorf("%s: checkpoints %+v at interval %s; want none when off, else a completed final one and no failure", q, c, interval)
		}
		if queries.HasChanBaseline(q) != (r.Baseline != nil) {
			t.Errorf("%s: baseline %+v", q, r.Baseline)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// The table names every query and says that checkpoints are not there.
func TestNexmarkTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dfbench([]string{"nexmark", "--query", "q2", "--events", "20000", "--baseline", "chan"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"checkpoints: exactly-once, every 10s", "events/s/core", "q2", "ringflow ÷ chan"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}
