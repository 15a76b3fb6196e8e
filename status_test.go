package ringflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/statusui"
)

// statusJob builds the job of TestCheckpointTimeline: gen (with double
// chained to it) → keyBy → count → sink, two subtasks each but the sink's,
// checkpointed every 20ms, aligned or unaligned; count gen's records into
// records. It has not run.
func statusJob(t testing.TB, unaligned bool, count uint64, records func()) *ringflow.Job {
	t.Helper()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 20 * time.Millisecond, Unaligned: unaligned,
			StateDir: filepath.Join(t.TempDir(), "state")}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: count, Rate: 2_000_000}))
	doubled := ringflow.Map(src, "double", func(v uint64) uint64 { return 2 * v })
	counts := ringflow.MapWithState(ringflow.KeyBy(doubled, func(v uint64) uint64 { return v % 100 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(context.Context, int64) error { records(); return nil }, ringflow.Parallelism(1))
	return job
}

// get serves path from h and returns the status and the body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// getOK serves path from h and fails t unless it is served.
func getOK(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	code, body := get(t, h, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// getJSON serves path from h and decodes it into v.
func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getOK(t, h, path)), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// timelineRowRE matches one row of a timeline and its class.
var timelineRowRE = regexp.MustCompile(`(?s)<g class="(row [^"]*)"><title>(.*?)(?:\n|</title>)`)

// TestStatusHandler runs a checkpointed job, aligned and unaligned, and
// checks every view of its status pages against the job's own figures.
func TestStatusHandler(t *testing.T) {
	for _, unaligned := range []bool{false, true} {
		t.Run(fmt.Sprintf("unaligned=%v", unaligned), func(t *testing.T) {
			job := statusJob(t, unaligned, 400_000, func() {})
			if err := job.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			h := ringflow.StatusHandler(job)
			checkOverview(t, h, job.Graph())
			checkHistory(t, h, job.Checkpoints())
			checked := 0
			for _, c := range job.Checkpoints() {
				if c.Status == "completed" && checked < 3 {
					checkCheckpoint(t, h, c, unaligned)
					checked++
				}
			}
			if checked == 0 {
				t.Fatalf("no checkpoint completed")
			}
			checkNotFound(t, h, job.Checkpoints())
			if m := getOK(t, h, "/metrics"); !strings.Contains(m, `ringflow_records_in_total{operator="count",subtask="0"}`) ||
				!strings.Contains(m, "go_goroutines") {
				t.Errorf("/metrics lacks the job's or the Go runtime's metrics:\n%.2000s", m)
			}
		})
	}
}

// checkOverview checks that the overview has every operator of g and every
// edge, in the page and in its JSON.
func checkOverview(t *testing.T, h http.Handler, g ringflow.Graph) {
	t.Helper()
	page := getOK(t, h, "/")
	graph := page[strings.Index(page, `<svg id="graph"`):]
	graph = graph[:strings.Index(graph, "</svg>")]
	if n := strings.Count(graph, `<g class="op `); n != len(g.Operators) {
		t.Errorf("overview: %d operator boxes, want %d", n, len(g.Operators))
	}
	for _, op := range g.Operators {
		if !strings.Contains(graph, fmt.Sprintf(`data-operator="%s"`, op.Name)) {
			t.Errorf("overview: no box for operator %s", op.Name)
		}
	}
	for _, e := range g.Edges {
		if !strings.Contains(graph, fmt.Sprintf(`data-from="%s" data-to="%s" data-partitioning="%s"`, e.From, e.To, e.Partitioning)) {
			t.Errorf("overview: no edge %s → %s (%s)", e.From, e.To, e.Partitioning)
		}
	}
	var v statusui.OverviewView
	getJSON(t, h, "/api/overview", &v)
	if len(v.Operators) != len(g.Operators) || len(v.Edges) != len(g.Edges) {
		t.Fatalf("/api/overview: %d operators, %d edges; want %d and %d", len(v.Operators), len(v.Edges),
			len(g.Operators), len(g.Edges))
	}
	for i, op := range g.Operators {
		if got := v.Operators[i]; got.Name != op.Name || got.Task != op.Task || len(got.Subtasks) != op.Parallelism {
			t.Errorf("/api/overview: operator %d is %s of task %s with %d subtasks; want %s of %s with %d",
				i, got.Name, got.Task, len(got.Subtasks), op.Name, op.Task, op.Parallelism)
		}
	}
}

// checkHistory checks one row per checkpoint, newest first, in the page and
// its JSON.
func checkHistory(t *testing.T, h http.Handler, cps []ringflow.CheckpointStats) {
	t.Helper()
	page := getOK(t, h, "/checkpoints")
	ids := regexp.MustCompile(`<tr class="checkpoint [a-z]+" data-id="(\d+)">`).FindAllStringSubmatch(page, -1)
	if len(ids) != len(cps) {
		t.Fatalf("/checkpoints: %d rows, want one per checkpoint, %d", len(ids), len(cps))
	}
	for i, m := range ids {
		if want := fmt.Sprint(cps[len(cps)-1-i].ID); m[1] != want {
			t.Errorf("/checkpoints: row %d is checkpoint %s, want %s (newest first)", i, m[1], want)
		}
	}
	var v statusui.CheckpointsView
	getJSON(t, h, "/api/checkpoints", &v)
	if v.Total != len(cps) || len(v.Checkpoints) != len(cps) || v.Completed == 0 {
		t.Errorf("/api/checkpoints: total %d, %d rows, %d completed; want %d, all, some", v.Total, len(v.Checkpoints),
			v.Completed, len(cps))
	}
	getJSON(t, h, "/api/checkpoints?limit=2", &v)
	if v.Total != len(cps) || len(v.Checkpoints) != 2 || v.Checkpoints[0].ID != cps[len(cps)-1].ID {
		t.Errorf("/api/checkpoints?limit=2: total %d, %d rows from %d; want %d, the newest 2", v.Total,
			len(v.Checkpoints), v.Checkpoints[0].ID, len(cps))
	}
}

// checkCheckpoint checks the page of completed checkpoint c: a subtask row
// per subtask, a timeline row per input channel and per source subtask,
// the critical path's rows marked, and the JSON with the same rows.
func checkCheckpoint(t *testing.T, h http.Handler, c ringflow.CheckpointStats, unaligned bool) {
	t.Helper()
	page := getOK(t, h, fmt.Sprintf("/checkpoints/%d", c.ID))
	if n := strings.Count(page, `<tr class="subtask`); n != len(c.Subtasks) {
		t.Errorf("checkpoint %d: %d subtask rows, want %d", c.ID, n, len(c.Subtasks))
	}
	// The rows the timeline should have, by label, and the critical ones.
	want := map[string]bool{}
	for _, st := range c.Subtasks {
		name := fmt.Sprintf("%s#%d", st.Operator, st.Subtask)
		if len(st.Inputs) == 0 {
			want[name+" (source)"] = false
		}
		for _, in := range st.Inputs {
			want[fmt.Sprintf("%s#%d → %s", in.From, in.FromSubtask, name)] = false
		}
	}
	path := c.CriticalPath()
	for i, step := range path {
		name := fmt.Sprintf("%s#%d", step.Operator, step.Subtask)
		if i == 0 {
			want[name+" (source)"] = true
		} else {
			want[fmt.Sprintf("%s#%d → %s", path[i-1].Operator, path[i-1].Subtask, name)] = true
		}
	}
	rows := timelineRowRE.FindAllStringSubmatch(page, -1)
	if len(rows) != len(want) {
		t.Fatalf("checkpoint %d: %d timeline rows, want %d: %q", c.ID, len(rows), len(want), rows)
	}
	critical := 0
	for _, r := range rows {
		class, label := r[1], strings.TrimSuffix(r[2], " (critical path)")
		isCritical, ok := want[label]
		if !ok {
			t.Errorf("checkpoint %d: timeline row %q is not a channel or source of the checkpoint", c.ID, label)
		}
		if strings.Contains(class, "critical") != isCritical {
			t.Errorf("checkpoint %d: row %q has class %q; on the critical path %v: %+v", c.ID, label, class, isCritical, path)
		}
		if strings.Contains(class, "critical") {
			critical++
		}
		if src := strings.HasSuffix(label, "(source)"); strings.Contains(class, "source") != src ||
			strings.Contains(class, "channel") == src {
			t.Errorf("checkpoint %d: row %q has class %q", c.ID, label, class)
		}
		if unaligned && !src(label) && !strings.Contains(class, "unaligned") {
			t.Errorf("checkpoint %d of an unaligned job: row %q has class %q", c.ID, label, class)
		}
	}
	if critical != len(path) {
		t.Errorf("checkpoint %d: %d critical rows, want one per step of %+v", c.ID, critical, path)
	}

	var v statusui.CheckpointView
	getJSON(t, h, fmt.Sprintf("/api/checkpoints/%d", c.ID), &v)
	if len(v.Timeline.Rows) != len(rows) || len(v.Subtasks) != len(c.Subtasks) {
		t.Fatalf("checkpoint %d JSON: %d timeline rows, %d subtasks; want %d and %d", c.ID, len(v.Timeline.Rows),
			len(v.Subtasks), len(rows), len(c.Subtasks))
	}
	for i, r := range v.Timeline.Rows {
		if label := strings.TrimSuffix(rows[i][2], " (critical path)"); r.Label != label || r.Critical != want[label] {
			t.Errorf("checkpoint %d JSON: row %d is %q (critical %v), the page's %q", c.ID, i, r.Label, r.Critical, label)
		}
	}
	if wantKind := map[bool]string{false: "aligned", true: "unaligned"}[unaligned]; v.Checkpoint.Kind != wantKind {
		t.Errorf("checkpoint %d JSON: kind %q, want %q", c.ID, v.Checkpoint.Kind, wantKind)
	}
}

func src(label string) bool { return strings.HasSuffix(label, "(source)") }

// checkNotFound: ids not in the history, and ids that are not numbers, get
// a 404 naming them.
func checkNotFound(t *testing.T, h http.Handler, cps []ringflow.CheckpointStats) {
	t.Helper()
	missing := fmt.Sprint(cps[len(cps)-1].ID + 1000)
	for _, path := range []string{"/checkpoints/" + missing, "/api/checkpoints/" + missing, "/checkpoints/x7",
		"/api/checkpoints/x7"} {
		code, body := get(t, h, path)
		id := path[strings.LastIndexByte(path, '/')+1:]
		if code != http.StatusNotFound || !strings.Contains(body, id) {
			t.Errorf("GET %s: %d %q; want 404 naming %s", path, code, body, id)
		}
	}
	if code, _ := get(t, h, "/checkpoints?limit=-1"); code != http.StatusBadRequest {
		t.Errorf("GET /checkpoints?limit=-1: %d, want 400", code)
	}
}

// TestStatusHandlerLifecycle serves every view of a job before it runs,
// while it runs and after it has ended (under -race, concurrently with
// the job), and checks the overview's rates: over the lifetime at first,
// then over the interval since the view before.
func TestStatusHandlerLifecycle(t *testing.T) {
	var once sync.Once
	running := make(chan struct{})
	job := statusJob(t, false, 1<<62, func() { once.Do(func() { close(running) }) })
	h := ringflow.StatusHandler(job)
	paths := []string{"/", "/checkpoints", "/api/overview", "/api/checkpoints", "/metrics"}
	for _, p := range paths {
		getOK(t, h, p)
	}
	if code, body := get(t, h, "/checkpoints/1"); code != http.StatusNotFound || !strings.Contains(body, "no checkpoint has ended") {
		t.Errorf("before the run, GET /checkpoints/1: %d %q", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	<-running
	for _, p := range paths {
		getOK(t, h, p)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// After the end nothing moves: the counters' rates since the view
	// before are 0, while a fresh handler's first view has the job's
	// lifetime rates.
	h = ringflow.StatusHandler(job)
	var first, second statusui.OverviewView
	getJSON(t, h, "/api/overview", &first)
	getJSON(t, h, "/api/overview", &second)
	gen := func(v statusui.OverviewView) statusui.OperatorView { return v.Operators[0] }
	if !first.Lifetime || gen(first).RecordsOutPerSecond <= 0 || gen(first).BusyShare+gen(first).IdleShare+gen(first).BackpressuredShare < 0.99 {
		t.Errorf("first overview: lifetime %v, gen %+v; want lifetime rates", first.Lifetime, gen(first))
	}
	if second.Lifetime || gen(second).RecordsOutPerSecond != 0 || gen(second).BusyShare != 0 {
		t.Errorf("second overview, after the end: lifetime %v, gen %+v; want nothing since the first", second.Lifetime,
			gen(second))
	}
	for _, p := range paths {
		getOK(t, h, p)
	}
}
