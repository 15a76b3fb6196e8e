package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ringflow/ringflow/bench/pipelines"
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
// and kills, checking its output as it goes (--sink-keep: the restores
// commit again only part files it keeps) and at the end: the output is
// exactly once, the samples are sane, and the counts of the summary, the
// CSV and the children agree.
func TestSoakFailAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	useTestChild(t)
	dir := t.TempDir()
	csvFile := filepath.Join(dir, "samples.csv")
	args := []string{"soak", "--duration", "4s", "--keys", "1000", "--rate", "100000", "--parallelism", "2",
		"--workers", "2", "--checkpoint-interval", "100ms", "--interval", "250ms", "--fail-every", "500ms",
		"--kill-every", "1500ms", "--sink-keep", "4", "--csv", csvFile, "--json",
		"--max-failed-checkpoints", "0", "--plot", filepath.Join(dir, "samples.svg")}
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
	if kills := killLines(t, filepath.Join(dir, "samples.svg")); kills < 1 || kills > sum.Kills {
		t.Errorf("%d kill lines in the plot, want 1 to %d: one per change of child in the samples", kills, sum.Kills)
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
		{[]string{"--replot", "x.csv"}, "--replot x.csv: needs --plot FILE"},
		{[]string{"--replot", "x.csv", "--plot", "x.svg", "--csv", "y.csv"}, "--replot with --csv y.csv"},
		{[]string{"--plot", "x.gif"}, "--plot x.gif: want FILE.svg"},
		{[]string{"--plot", "x.svg", "--csv", "x.svg"}, "--plot x.svg: the file of --csv too"},
		{[]string{"--plot-duration-bound", "1s"}, "--plot-duration-bound 1s: must be positive, with --plot"},
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

// TestSoakFold: with --sink-keep, each fold reads the part files it has
// not read, once, and leaves each subtask's newest; the last fold reads
// the rest and deletes nothing; and the check sees every line once.
func TestSoakFold(t *testing.T) {
	dir := t.TempDir()
	f := soakFlags{job: soakJob{Pipeline: "keyed-count", Keys: 1, Parallelism: 2, SinkDir: dir}, sinkKeep: 4}
	output, err := pipelines.NewKeyedCountOutput(f.job.config())
	if err != nil {
		t.Fatal(err)
	}
	s := &soaker{f: f, output: output}
	count := uint64(0) // the key's count so far; a part file holds one line
	commit := func(sub, from, to int) {
		for seq := from; seq < to; seq++ {
			count++
			line := fmt.Sprintf("0 %d\n", count)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d-%d", sub, seq)), []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	left := func() []string {
		files, err := pipelines.PartFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range files {
			files[i] = filepath.Base(files[i])
		}
		slices.Sort(files)
		return files
	}
	commit(0, 0, 10)
	commit(1, 0, 3)
	if err := s.fold(false); err != nil {
		t.Fatal(err)
	}
	want := []string{"part-0-6", "part-0-7", "part-0-8", "part-0-9", "part-1-0", "part-1-1", "part-1-2"}
	if got := left(); !slices.Equal(got, want) {
		t.Fatalf("after the first fold: %v, want %v", got, want)
	}
	commit(1, 3, 8)
	if err := s.fold(false); err != nil {
		t.Fatal(err)
	}
	commit(0, 10, 12)
	if err := s.fold(true); err != nil {
		t.Fatal(err)
	}
	if got := len(left()); got != 4+2+4 {
		t.Errorf("%d part files after the last fold, want 10: the newest 4 of each subtask and 2 read last", got)
	}
	// The source's one subtask generated count records, all of key 0.
	check, err := output.Check(pipelines.Config{Pipeline: "keyed-count", Keys: 1, Parallelism: 1}, []uint64{count})
	if err != nil || check.Lines != count || check.Files != int(count) {
		t.Errorf("check %+v, %v: want %d lines in as many files, each once", check, err, count)
	}
}

// killLines parses a --plot SVG as XML and counts its kill lines.
func killLines(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec, kills := xml.NewDecoder(bytes.NewReader(b)), 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return kills
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", file, err)
		}
		if e, ok := tok.(xml.StartElement); ok {
			for _, a := range e.Attr {
				if a.Name.Local == "class" && a.Value == "kill" {
					kills++
				}
			}
		}
	}
}

// TestSoakReplot draws the plot of a CSV again, as an SVG and, with
// rsvg-convert, a PNG; a bad CSV is an error naming its file and line.
func TestSoakReplot(t *testing.T) {
	dir := t.TempDir()
	csvFile := filepath.Join(dir, "samples.csv")
	out, err := os.Create(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	w, err := soak.NewCSV(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		s := soak.Sample{At: time.Duration(i+1) * time.Second, Child: 1 + i/4, RSS: soak.RSS{Total: uint64(100+i) << 20},
			Last: soak.Checkpoint{ID: uint64(i), Duration: time.Duration(40+i) * time.Millisecond}, Kills: i / 4}
		if err := w.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	out.Close()

	svg := filepath.Join(dir, "samples.svg")
	var stdout, stderr bytes.Buffer
	if code := dfbench([]string{"soak", "--replot", csvFile, "--plot", svg, "--max-rss-growth", "10"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--replot: exit %d: %s", code, stderr.String())
	}
	if kills := killLines(t, svg); kills != 2 {
		t.Errorf("%d kill lines in the plot, want 2: children 1, 2 and 3", kills)
	}
	if _, err := exec.LookPath("rsvg-convert"); err == nil {
		png := filepath.Join(dir, "samples.png")
		if code := dfbench([]string{"soak", "--replot", csvFile, "--plot", png}, &stdout, &stderr); code != 0 {
			t.Fatalf("--replot to a PNG: exit %d: %s", code, stderr.String())
		}
		if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s: %d bytes, %v; want a PNG", png, len(b), err)
		}
	} else {
		t.Log("no rsvg-convert on PATH: no PNG drawn")
	}

	b, err := os.ReadFile(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines[2] = strings.Replace(lines[2], ",", ",x", 1)
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code := dfbench([]string{"soak", "--replot", bad, "--plot", svg}, &stdout, &stderr)
	if want := "--replot " + bad + ": line 3: column 2 (child)"; code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("--replot of a bad CSV: exit %d, %q; want 1 and %q", code, stderr.String(), want)
	}
}

// TestSoakPlotPNGWithout: without rsvg-convert, --plot FILE.png is refused
// before anything runs, pointing at .svg.
func TestSoakPlotPNGWithout(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := dfbench([]string{"soak", "--plot", "x.png"}, &stdout, &stderr)
	if want := "rsvg-convert, which is not on PATH; a .svg file needs nothing"; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, %q; want 2 and %q", code, stderr.String(), want)
	}
}

// TestSoakStallBound: --stall-bound reaches the child's job.
func TestSoakStallBound(t *testing.T) {
	f, err := parseSoakFlags([]string{"--stall-bound", "1ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(f.job)
	if err != nil {
		t.Fatal(err)
	}
	var child soakJob
	if err := json.Unmarshal(spec, &child); err != nil {
		t.Fatal(err)
	}
	if c := child.config(); c.StallBound != time.Millisecond {
		t.Fatalf("the child's job has stall bound %v, want 1ms", c.StallBound)
	}
}
