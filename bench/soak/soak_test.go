package soak

import (
	"bytes"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestHeaderMatchesDoc: the package doc lists the CSV's columns, in the
// header's order.
func TestHeaderMatchesDoc(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	doc = doc[strings.Index(doc, "# The CSV")+1:]
	doc = doc[:strings.Index(doc, "# ")] // up to the next section
	var listed []string
	for _, line := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok && rest != "" && rest[0] != ' ' {
			listed = append(listed, strings.Fields(rest)[0])
		}
	}
	if got, want := strings.Join(listed, ","), Header(); got != want {
		t.Errorf("the doc lists the columns\n%s\nthe header is\n%s", got, want)
	}
}

// TestCSV writes two samples: the header, then a row each with a value per
// column, each reading back as written, in the column's unit.
func TestCSV(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	samples := []Sample{
		{At: 1500*time.Millisecond + 1234, Child: 1, RSS: RSS{Total: 123_456_789_012, Anon: 100 << 20},
			Last:       Checkpoint{ID: 7, Duration: 2500 * time.Microsecond, SyncMax: 42 * time.Microsecond},
			LatencyP99: 250 * time.Microsecond, RecordsPerSec: 1e6 + 1.0/3, CheckpointsCompleted: 7},
		{At: 2 * time.Second, Child: 2, Kills: 1, State: DirUsage{Bytes: 4096, Files: 3}},
	}
	for i := range samples {
		if err := w.Write(&samples[i]); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 || lines[0] != Header() {
		t.Fatalf("CSV:\n%s\nwant the header and two rows", buf.String())
	}
	names := strings.Split(lines[0], ",")
	want := []map[string]string{
		{"t_s": "1.5", "child": "1", "rss_bytes": "123456789012", "rss_anon_bytes": "104857600", "ck_last_id": "7",
			"ck_last_duration_ms": "2.5", "ck_last_sync_max_us": "42", "latency_p99_us": "250", "records_per_s": "1000000",
			"ck_completed": "7", "kills": "0"},
		{"t_s": "2", "child": "2", "kills": "1", "state_bytes": "4096", "state_files": "3", "rss_bytes": "0"},
	}
	for i, row := range lines[1:] {
		cells := strings.Split(row, ",")
		if len(cells) != len(names) {
			t.Fatalf("row %d has %d cells, the header %d: %s", i+1, len(cells), len(names), row)
		}
		for j, name := range names {
			if v, ok := want[i][name]; ok && cells[j] != v {
				t.Errorf("row %d: %s = %s, want %s", i+1, name, cells[j], v)
			}
			if _, err := strconv.ParseFloat(cells[j], 64); err != nil {
				t.Errorf("row %d: %s = %q: %v", i+1, name, cells[j], err)
			}
		}
	}
}

func TestSlope(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		want float64
	}{
		{"a line", []float64{0, 1, 2, 3, 4}, []float64{3, 5, 7, 9, 11}, 2},
		{"flat", []float64{0, 1, 2}, []float64{5, 5, 5}, 0},
		{"scatter", []float64{0, 1, 2, 3}, []float64{1, 3, 2, 4}, 0.8}, // Sxy 4 / Sxx 5
		{"one point", []float64{1}, []float64{9}, 0},
		{"no spread in x", []float64{2, 2}, []float64{1, 3}, 0},
	} {
		if got := Slope(tc.x, tc.y); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: slope %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSummarize sums up synthetic soaks of ten minutes, a sample a second,
// after a warm-up of two.
func TestSummarize(t *testing.T) {
	const warmup = 2 * time.Minute
	soak := func(rss func(at time.Duration) float64) []Sample {
		var s []Sample
		for at := time.Second; at <= 10*time.Minute; at += time.Second {
			s = append(s, Sample{At: at, RSS: RSS{Total: uint64(rss(at))}, State: DirUsage{Files: 40}})
		}
		return s
	}
	const base = 100 << 20
	t.Run("growing", func(t *testing.T) {
		// Up to base in the warm-up, then 1 MiB a minute more.
		s := Summarize(soak(func(at time.Duration) float64 {
			return min(base, base*at.Minutes()) + max(0, (at-warmup).Minutes())*(1<<20)
		}), nil, warmup)
		rss := s.series(t, "rss_bytes")
		if math.Abs(rss.TrendPerMin-(1<<20)) > 1 || rss.WarmupEnd != base || rss.Final != base+8<<20 || rss.Max != rss.Final {
			t.Errorf("rss %+v: want a trend of 1 MiB a minute from %d to %d", rss, base, base+8<<20)
		}
		if want := 8.0 / 100; math.Abs(s.RSSGrowth-want) > 1e-9 {
			t.Errorf("RSS growth %v, want %v", s.RSSGrowth, want)
		}
		if files := s.series(t, "state_files"); files.TrendPerMin != 0 || files.Final != 40 {
			t.Errorf("state files %+v: want a flat 40", files)
		}
		v := s.Violations(Bounds{MaxRSSGrowthPct: 5, MaxFailedCheckpoints: -1})
		if len(v) != 1 || !strings.Contains(v[0], "RSS grew 8.0%") {
			t.Errorf("violations %q, want RSS growth of 8.0%% over the bound", v)
		}
	})
	t.Run("killed and resumed", func(t *testing.T) {
		// Each minute a new child climbs back to base in 20 s: no growth.
		s := Summarize(soak(func(at time.Duration) float64 {
			return base * min(1, 0.5+(at%time.Minute).Seconds()/40)
		}), nil, warmup)
		if s.RSSGrowth != 0 {
			t.Errorf("RSS growth %v, want 0", s.RSSGrowth)
		}
		if v := s.Violations(Bounds{MaxRSSGrowthPct: 0, MaxFailedCheckpoints: 0}); len(v) != 0 {
			t.Errorf("violations %q, want none", v)
		}
	})
}

func (s Summary) series(t *testing.T, name string) Series {
	for _, x := range s.Series {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("no series %s in %+v", name, s.Series)
	return Series{}
}

// TestCheckpointSummary: quantiles over the completed checkpoints, the
// worst of them, and failed and aborted ones counted apart.
func TestCheckpointSummary(t *testing.T) {
	var cks []Checkpoint
	for i := range 100 {
		d := time.Duration(100-i) * time.Millisecond
		cks = append(cks, Checkpoint{ID: uint64(i + 1), Status: "completed", Duration: d,
			Barriers: d / 10, Written: d / 4, SyncMax: time.Duration(i+1) * time.Microsecond, BytesWritten: uint64(i)})
	}
	cks = append(cks, Checkpoint{ID: 101, Status: "failed: disk full", Duration: time.Hour},
		Checkpoint{ID: 102, Status: "aborted: task failed", SyncMax: time.Hour})
	s := summarizeCheckpoints(cks)
	if s.Completed != 100 || s.Failed != 1 || s.Aborted != 1 {
		t.Errorf("%d completed, %d failed, %d aborted; want 100, 1, 1", s.Completed, s.Failed, s.Aborted)
	}
	if want := (Quantiles{P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}); s.Duration != want {
		t.Errorf("durations %+v, want %+v", s.Duration, want)
	}
	if s.SyncMax.Max != 100*time.Microsecond || s.Longest.ID != 1 || s.Stalled.ID != 100 || s.BytesMax != 99 {
		t.Errorf("sync %+v, longest %d, stalled %d, bytes %d; want max 100µs, checkpoints 1 and 100, 99 bytes",
			s.SyncMax, s.Longest.ID, s.Stalled.ID, s.BytesMax)
	}
	if s.Barriers.Max != 10*time.Millisecond || s.Written.P50 != 12500*time.Microsecond || s.Commit.Max != 75*time.Millisecond {
		t.Errorf("barriers %+v, written %+v, commit %+v; want max 10ms, p50 12.5ms, max 75ms", s.Barriers, s.Written, s.Commit)
	}
	if len(s.Tail) != 2 || s.Tail[0].ID != 1 || s.Tail[1].ID != 2 || s.Tail[1].Commit() != 74250*time.Microsecond {
		t.Errorf("tail %+v, want checkpoints 1 and 2 (at and over p99), the second with a commit of 74.25ms", s.Tail)
	}
	summary := Summary{Checkpoints: s, Restarts: 3, Failures: 2}
	v := summary.Violations(Bounds{MaxRSSGrowthPct: -1, MaxFailedCheckpoints: 0})
	if len(v) != 2 || !strings.Contains(v[0], "1 checkpoints failed") || !strings.Contains(v[1], "3 times for 2 injected failures") {
		t.Errorf("violations %q, want the failed checkpoint and the restart no failure explains", v)
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tdfbench\nVmPeak:\t  900 kB\nVmRSS:\t   600 kB\nRssAnon:\t   400 kB\nRssFile:\t  150 kB\nRssShmem:\t  50 kB\n"
	r, err := parseStatus([]byte(status))
	if want := (RSS{Total: 600 << 10, Anon: 400 << 10, File: 150 << 10, Shmem: 50 << 10}); err != nil || r != want {
		t.Errorf("parseStatus: %+v, %v; want %+v", r, err, want)
	}
	if _, err := parseStatus([]byte("Name:\tx\nVmRSS:\t 600 kB\n")); err == nil {
		t.Error("parseStatus of a status without RssAnon: no error")
	}
	self, err := ReadRSS(os.Getpid())
	if err != nil || self.Total == 0 || self.Anon+self.File+self.Shmem != self.Total {
		t.Errorf("this process: %+v, %v; want parts adding up to a non-zero total", self, err)
	}
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct {
		path string
		size int
	}{{"a", 10}, {"sub/b", 5000}, {"sub/deeper/c", 0}} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := Usage(dir)
	if err != nil || u.Files != 3 || u.Bytes < 5010 {
		t.Errorf("usage %+v, %v; want 3 files taking at least 5010 bytes", u, err)
	}
	if u, err := Usage(filepath.Join(dir, "missing")); err != nil || u != (DirUsage{}) {
		t.Errorf("usage of a missing dir: %+v, %v; want nothing", u, err)
	}
}

// TestRuntimeReader: two collections between reads show as two cycles
// and their pauses, and the memory levels are consistent.
func TestRuntimeReader(t *testing.T) {
	r := NewRuntimeReader()
	runtime.GC()
	runtime.GC()
	got := r.Read()
	if got.GCCycles < 2 || got.GCPauses < 2 || got.GCPauseMax <= 0 {
		t.Errorf("after two collections: %d cycles, %d pauses, longest %v; want at least 2, 2 and some time",
			got.GCCycles, got.GCPauses, got.GCPauseMax)
	}
	if got.HeapLiveBytes == 0 || got.GoHeldBytes < got.HeapObjectsBytes {
		t.Errorf("heap live %d, objects %d, Go held %d: want some live heap, within what Go holds",
			got.HeapLiveBytes, got.HeapObjectsBytes, got.GoHeldBytes)
	}
	if again := r.Read(); again.GCCycles > 1 {
		t.Errorf("a read right after counts %d cycles: want those since the previous read only", again.GCCycles)
	}
}

// TestReadCSV reads back what CSV writes: every field a column holds, in
// its column's precision, and nothing else.
func TestReadCSV(t *testing.T) {
	samples := []Sample{
		{At: 1013 * time.Millisecond, Child: 1, RSS: RSS{Total: 75153408, Anon: 42299392, File: 28643328, Shmem: 4210688},
			Runtime: Runtime{HeapLiveBytes: 22164600, HeapObjectsBytes: 37929848, GoHeldBytes: 46197016, GCCycles: 4,
				GCPauses: 8, GCPauseMax: 655400 * time.Nanosecond, GCAssist: 534 * time.Microsecond},
			State: DirUsage{Bytes: 12288, Files: 8}, Sink: DirUsage{Bytes: 47058944, Files: 3},
			RecordsPerSec: 5269319, LatencyP99: 1851400 * time.Nanosecond, LatencySamples: 5129},
		{At: 92022 * time.Millisecond, Child: 2, RSS: RSS{Total: 220234000}, CheckpointsCompleted: 80, CheckpointsFailed: 1,
			Last:     Checkpoint{ID: 81, Duration: 66855 * time.Microsecond, SyncMax: 3519300 * time.Nanosecond, BytesWritten: 3965951},
			Restarts: 2, Failures: 3, Kills: 1},
		{At: 92022 * time.Millisecond, Child: 2}, // at the same time as the previous: not before it
	}
	var buf bytes.Buffer
	w, err := NewCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if err := w.Write(&samples[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadCSV(strings.NewReader(buf.String() + "\n")) // an empty line at the end is no row
	if err != nil {
		t.Fatalf("ReadCSV: %v\n%s", err, buf.String())
	}
	if len(got) != len(samples) {
		t.Fatalf("%d samples read back, want %d", len(got), len(samples))
	}
	for i := range samples {
		if got[i] != samples[i] {
			t.Errorf("sample %d read back as\n%+v\nwant\n%+v", i+1, got[i], samples[i])
		}
	}
}

// TestReadCSVMalformed: a line CSV would not have written is an error that
// names its line and its column.
func TestReadCSVMalformed(t *testing.T) {
	var row []byte
	row = AppendRow(row, &Sample{At: 2 * time.Second, Child: 1, RSS: RSS{Total: 1000}})
	good := strings.Split(string(row), ",")
	with := func(col int, cell string) string {
		cells := append([]string(nil), good...)
		cells[col] = cell
		return strings.Join(cells, ",")
	}
	ok := string(row)
	header := Header()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "", "empty"},
		{"another header", strings.Replace(header, "rss_bytes", "rss", 1) + "\n" + ok, `line 1: column 3 of the header is "rss", want "rss_bytes"`},
		{"a column more", header + ",extra\n" + ok, "line 1: the header has 31 columns, want 30"},
		{"a cell short", header + "\n" + ok + "\n" + strings.Join(good[1:], ","), "line 3: 29 cells, want one per column: 30"},
		{"not a number", header + "\n" + with(2, "12x"), `line 2: column 3 (rss_bytes): "12x" is not a number`},
		{"NaN", header + "\n" + with(6, "NaN"), `line 2: column 7 (heap_live_bytes): "NaN" is not a number`},
		{"negative", header + "\n" + with(20, "-5"), `line 2: column 21 (ck_last_duration_ms): "-5" is negative`},
		{"a fraction of a count", header + "\n" + with(1, "1.5"), `line 2: column 2 (child): "1.5" is not a whole number`},
		{"out of range", header + "\n" + with(0, "1e12"), `line 2: column 1 (t_s): "1e12" is out of range`},
		{"back in time", header + "\n" + ok + "\n\n" + with(0, "1.5"), "line 4: column 1 (t_s): 1.5 s, before the previous row's 2 s"},
	} {
		samples, err := ReadCSV(strings.NewReader(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %d samples, error %v; want an error with %q", tc.name, len(samples), err, tc.want)
		}
	}
}

// TestReadCSVWithoutLaterColumns: a CSV written before the columns added
// later reads, with zeros in them; a row of it must still be whole.
func TestReadCSVWithoutLaterColumns(t *testing.T) {
	s := Sample{At: 2 * time.Second, Child: 1, RSS: RSS{Total: 1000}, Kills: 3}
	s.Runtime.StateMappedBytes = 77
	cells := strings.Split(string(AppendRow(nil, &s)), ",")
	names := strings.Split(Header(), ",")
	old := strings.Join(names[:requiredColumns], ",") + "\n" + strings.Join(cells[:requiredColumns], ",")
	got, err := ReadCSV(strings.NewReader(old))
	if err != nil || len(got) != 1 || got[0].Kills != 3 || got[0].RSS.Total != 1000 || got[0].Runtime.StateMappedBytes != 0 {
		t.Fatalf("an older CSV read as %+v, %v; want one sample, 3 kills, RSS 1000, no mapped state", got, err)
	}
	short := strings.Join(names[:requiredColumns], ",") + "\n" + strings.Join(cells[:requiredColumns-1], ",")
	if _, err := ReadCSV(strings.NewReader(short)); err == nil || !strings.Contains(err.Error(), "line 2: 28 cells, want one per column: 29") {
		t.Fatalf("a short row of an older CSV: %v", err)
	}
	if _, err := ReadCSV(strings.NewReader(strings.Join(names[:requiredColumns-1], ","))); err == nil ||
		!strings.Contains(err.Error(), `column 29 of the header is nothing, want "kills"`) {
		t.Fatalf("a header short of the required columns: %v", err)
	}
}

// TestCheckpointOf: a checkpoint's split comes from its subtasks' stats:
// the latest synchronous part for the barriers, the last acknowledgement
// for which part was written last.
func TestCheckpointOf(t *testing.T) {
	s := ringflow.CheckpointStats{ID: 9, Status: "completed", Duration: 50 * time.Millisecond, Written: 30 * time.Millisecond,
		Subtasks: []ringflow.SubtaskCheckpointStats{
			{Operator: "src", Subtask: 0, Snapshot: time.Millisecond, Acked: 2 * time.Millisecond},
			{Operator: "count", Subtask: 1, Snapshot: 4 * time.Millisecond, Acked: 30 * time.Millisecond, Sync: 1900 * time.Microsecond,
				SyncCause: "stolen"},
			{Operator: "count", Subtask: 0, Snapshot: 3 * time.Millisecond, Acked: 21 * time.Millisecond, Sync: 1200 * time.Microsecond,
				SyncCause: "preempted"},
		}}
	c := CheckpointOf(s)
	if c.Barriers != 4*time.Millisecond || c.Written != 30*time.Millisecond || c.WrittenLast != "count#1" ||
		c.Commit() != 20*time.Millisecond || c.SyncMax != 1900*time.Microsecond || c.SyncCause != "stolen" {
		t.Errorf("got barriers %v, written %v by %q, commit %v, sync %v (%s); want 4ms, 30ms by count#1, 20ms, 1.9ms (stolen)",
			c.Barriers, c.Written, c.WrittenLast, c.Commit(), c.SyncMax, c.SyncCause)
	}
}

// TestSummarizeStalls: steps and synchronous parts over the bound are
// counted by cause apart, each with its longest first.
func TestSummarizeStalls(t *testing.T) {
	ms := time.Millisecond
	s := SummarizeStalls([]Stall{
		{Duration: 7 * ms, Cause: "preempted"}, {Duration: 2 * ms, Cause: "stolen", Part: true},
		{Duration: 9 * ms, Cause: "blocked"}, {Duration: 3 * ms, Cause: "gc pause", Part: true},
		{Duration: 6 * ms, Cause: "preempted"},
	})
	if !maps.Equal(s.ByCause, map[string]int{"preempted": 2, "blocked": 1}) ||
		!maps.Equal(s.PartsByCause, map[string]int{"stolen": 1, "gc pause": 1}) {
		t.Fatalf("steps by cause %v, parts %v", s.ByCause, s.PartsByCause)
	}
	if len(s.Longest) != 3 || s.Longest[0].Duration != 9*ms || len(s.LongestParts) != 2 || s.LongestParts[0].Cause != "gc pause" {
		t.Fatalf("longest steps %v, parts %v; want 3 from 9ms, 2 from the gc pause", s.Longest, s.LongestParts)
	}
}
