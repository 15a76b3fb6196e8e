package statusui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// rowsOf splits a drawing into its timeline rows: the markup of each
// <g class="row ..."> element, by its class.
func rowsOf(t *testing.T, svg template.HTML) (classes, bodies []string) {
	t.Helper()
	re := regexp.MustCompile(`(?s)<g class="(row[^"]*)">(.*?)</g>`)
	for _, m := range re.FindAllStringSubmatch(string(svg), -1) {
		classes, bodies = append(classes, m[1]), append(bodies, m[2])
	}
	return classes, bodies
}

// rectCounts counts the rect elements of markup by class.
func rectCounts(markup string) map[string]int {
	n := map[string]int{}
	for _, m := range regexp.MustCompile(`<rect class="([^"]+)"`).FindAllStringSubmatch(markup, -1) {
		n[m[1]]++
	}
	return n
}

// timelineFixture is a checkpoint of a source, an aligned subtask with two
// channels (the second on the critical path) and an unaligned one whose
// second channel ended before its barrier came.
func timelineFixture() TimelineView {
	src := TimelineRow{Label: "gen#0 (source)", Source: true, Operator: "gen", Channel: -1, Critical: true,
		Left: None, Arrived: None, Done: None, Snapshot: 0, Sync: ms / 2, Forwarded: 1 * ms, Async: 2 * ms, Acked: 4 * ms}
	aligned := TimelineRow{Operator: "count", Subtask: 0, From: "gen", Left: 1 * ms, Arrived: 2 * ms, Done: 2 * ms,
		Snapshot: 5 * ms, Sync: 1 * ms, Forwarded: 6 * ms, Async: 2 * ms, Acked: 9 * ms}
	unaligned := aligned
	unaligned.Subtask, unaligned.Unaligned, unaligned.Snapshot, unaligned.Done = 1, true, 3*ms, 7*ms
	a0, a1 := aligned, aligned
	a0.Label, a0.Channel = "gen#0 → count#0", 0
	a1.Label, a1.Channel, a1.FromSubtask, a1.Arrived, a1.Done, a1.Critical = "gen#1 → count#0", 1, 1, 5*ms, 5*ms, true
	u0, u1 := unaligned, unaligned
	u0.Label, u0.Channel = "gen#0 → count#1", 0
	u1.Label, u1.Channel, u1.FromSubtask, u1.Left, u1.Arrived, u1.Done = "gen#1 → count#1", 1, 1, None, None, None
	return TimelineView{Checkpoint: 7, Duration: 10 * ms, Written: 9 * ms, Rows: []TimelineRow{src, a0, a1, u0, u1}}
}

// TestTimelineSVGRows checks what each kind of row draws: a rect per part
// that happened, none for what did not, and the critical rows marked.
func TestTimelineSVGRows(t *testing.T) {
	svg := TimelineSVG(timelineFixture())
	if !strings.HasPrefix(string(svg), `<svg id="timeline" class="rf-timeline"`) {
		t.Fatalf("the drawing does not start with the timeline's svg element: %.80s", svg)
	}
	classes, bodies := rowsOf(t, svg)
	want := []struct {
		class string
		rects map[string]int
	}{
		{"row source critical", map[string]int{"bg": 1, "path": 1, "sync": 1, "async": 1, "forward": 1, "ack": 1}},
		{"row channel", map[string]int{"transit": 1, "arrived": 1, "blocked": 1, "sync": 1, "async": 1, "ack": 1}},
		{"row channel critical", map[string]int{"bg": 1, "path": 1, "transit": 1, "arrived": 1, "sync": 1, "async": 1, "ack": 1}},
		{"row channel unaligned", map[string]int{"transit": 1, "arrived": 1, "switch": 1, "recorded": 1, "sync": 1, "async": 1, "ack": 1}},
		// The channel ended before its barrier came: nothing of its own.
		{"row channel unaligned", map[string]int{"switch": 1, "sync": 1, "async": 1, "ack": 1}},
	}
	if len(classes) != len(want) {
		t.Fatalf("%d rows %q, want %d", len(classes), classes, len(want))
	}
	for i, w := range want {
		if classes[i] != w.class {
			t.Errorf("row %d: class %q, want %q", i, classes[i], w.class)
		}
		if got := rectCounts(bodies[i]); fmt.Sprint(got) != fmt.Sprint(w.rects) {
			t.Errorf("row %d (%s): rects %v, want %v", i, classes[i], got, w.rects)
		}
	}
	if !strings.Contains(bodies[4], "the channel ended before its barrier came") {
		t.Errorf("the ended channel's tooltip does not say so: %s", bodies[4])
	}
}

// TestTimelineSVGGeometry checks the axis (ticks at round times, labelled
// with their unit, ending on the last time) and that a row's parts sit
// where their times are on it.
func TestTimelineSVGGeometry(t *testing.T) {
	l := layoutTimeline(timelineFixture())
	var labels []string
	for _, tk := range l.Ticks {
		labels = append(labels, tk.Label)
	}
	if want := []string{"0", "1ms", "2ms", "3ms", "4ms", "5ms", "6ms", "7ms", "8ms", "9ms", "10ms"}; !slices.Equal(labels, want) {
		t.Errorf("ticks %q, want %q", labels, want)
	}
	if first, last := l.Ticks[0].X, l.Ticks[len(l.Ticks)-1].X; first != timelineLabelWidth || last != timelineLabelWidth+timelinePlotWidth {
		t.Errorf("ticks from x %v to %v, want the plot's ends %v and %v", first, last, timelineLabelWidth, timelineLabelWidth+timelinePlotWidth)
	}
	xOf := func(d time.Duration) float64 { return timelineLabelWidth + float64(d)/float64(10*ms)*timelinePlotWidth }
	for _, r := range l.Rows[1].Rects { // gen#0 → count#0: blocked from 2ms to the snapshot at 5ms
		if r.Class == "blocked" && (r.X != xOf(2*ms) || r.X+r.W != xOf(5*ms)) {
			t.Errorf("blocked from x %v to %v, want %v to %v", r.X, r.X+r.W, xOf(2*ms), xOf(5*ms))
		}
		if r.Class == "async" && (r.X != xOf(7*ms) || r.X+r.W != xOf(9*ms)) {
			t.Errorf("async from x %v to %v, want %v to %v (it ends at the ack)", r.X, r.X+r.W, xOf(7*ms), xOf(9*ms))
		}
	}
	if l.BottomAxisY != 0 {
		t.Errorf("five rows have an axis below them too")
	}
}

// TestTimelineSVGLongCommit: a commit far longer than the barrier's path
// is noted, not drawn to scale.
func TestTimelineSVGLongCommit(t *testing.T) {
	v := timelineFixture()
	v.Duration = 100 * ms
	l := layoutTimeline(v)
	if last := l.Ticks[len(l.Ticks)-1].Label; last != "9ms" || l.Beyond != "completed at 100ms →" {
		t.Errorf("axis to %s, note %q; want the axis to end at the last ack, 9ms, and the completion noted", last, l.Beyond)
	}
	if !strings.Contains(string(TimelineSVG(v)), "completed at 100ms") {
		t.Errorf("the drawing does not note the completion")
	}
}

// TestTimelineSVGManyRows: hundreds of rows each get a row of their own
// height, and the axis is drawn below them as well.
func TestTimelineSVGManyRows(t *testing.T) {
	v := timelineFixture()
	row := v.Rows[1]
	v.Rows = nil
	for i := range 500 {
		row.Subtask, row.Label = i, fmt.Sprintf("gen#0 → count#%d", i)
		v.Rows = append(v.Rows, row)
	}
	l := layoutTimeline(v)
	if got := l.RowsY1 - l.RowsY0; got != 500*timelineRowHeight {
		t.Errorf("500 rows span %v pixels, want %v", got, 500*timelineRowHeight)
	}
	if l.BottomAxisY < l.RowsY1 || l.Height < l.BottomAxisY+timelineAxis {
		t.Errorf("no axis below the rows: rows end at %v, bottom axis at %v, height %v", l.RowsY1, l.BottomAxisY, l.Height)
	}
	classes, _ := rowsOf(t, TimelineSVG(v))
	if len(classes) != 500 {
		t.Errorf("%d rows drawn, want 500", len(classes))
	}
}

// TestTimelineSVGEmpty: a failed checkpoint has no rows; the drawing says
// why.
func TestTimelineSVGEmpty(t *testing.T) {
	svg := TimelineSVG(TimelineView{Checkpoint: 3, Duration: 5 * ms, ElementID: "tl-3"})
	if !strings.Contains(string(svg), `id="tl-3"`) || !strings.Contains(string(svg), "no subtask statistics") {
		t.Errorf("empty timeline: %s", svg)
	}
}

// TestAxis checks the steps and labels of axes over a range of lengths.
func TestAxis(t *testing.T) {
	for _, tc := range []struct {
		end        time.Duration
		step       time.Duration
		last, unit string
	}{
		{750 * time.Microsecond, 100 * time.Microsecond, "800µs", "µs"},
		{10 * ms, 1 * ms, "10ms", "ms"},
		{13 * ms, 2 * ms, "14ms", "ms"},
		{1200 * ms, 200 * ms, "1.2s", "s"},
		{42 * time.Second, 5 * time.Second, "45s", "s"},
		{0, 100 * time.Nanosecond, "1µs", "µs"},
	} {
		a := newAxis(tc.end, 0, 100)
		ticks := a.ticks()
		if a.step != tc.step || ticks[len(ticks)-1].Label != tc.last || a.unitName != tc.unit || len(ticks)-1 > maxTicks {
			t.Errorf("axis to %v: step %v, %d ticks, last %q in %s; want step %v, last %q in %s",
				tc.end, a.step, len(ticks), ticks[len(ticks)-1].Label, a.unitName, tc.step, tc.last, tc.unit)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{formatDuration(None), "—"},
		{formatDuration(0), "0"},
		{formatDuration(850 * time.Microsecond), "850µs"},
		{formatDuration(12340 * time.Microsecond), "12.3ms"},
		{formatDuration(1250 * ms), "1.25s"},
		{formatDuration(2 * time.Second), "2s"},
		{formatBytes(512), "512 B"},
		{formatBytes(1536), "1.5 KiB"},
		{formatBytes(3 << 30), "3 GiB"},
		{formatRate(0), "0/s"},
		{formatRate(12), "12/s"},
		{formatRate(4500), "4.5k/s"},
		{formatRate(1_234_000), "1.23M/s"},
		{formatShare(0.456), "46%"},
		{truncate("abcdef", 4), "abc…"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

// graphFixture is two sources, one with a chained map, joined by a keyed
// operator into a sink.
func graphFixture() OverviewView {
	return OverviewView{
		Operators: []OperatorView{
			{Name: "left", Kind: "source", Parallelism: 2, Task: "left", Rates: Rates{BusyShare: 1}},
			{Name: "parse", Kind: "operator", Parallelism: 2, Task: "left", Rates: Rates{BusyShare: 1}},
			{Name: "right", Kind: "source", Parallelism: 2, Task: "right", Rates: Rates{BackpressuredShare: 1}},
			{Name: "join", Kind: "operator", Parallelism: 2, Keyed: true, Task: "join", Rates: Rates{IdleShare: 1}},
			{Name: "<sink>", Kind: "sink", Parallelism: 1, Task: "<sink>"},
		},
		Edges: []EdgeView{
			{From: "left", To: "parse", Partitioning: "forward", Chained: true},
			{From: "parse", To: "join", Partitioning: "hash", QueuedBytes: 512, CapacityBytes: 1024},
			{From: "right", To: "join", Partitioning: "hash", Port: 1},
			{From: "join", To: "<sink>", Partitioning: "rebalance"},
		},
	}
}

// TestGraphLayout checks the columns (topological depth), that a chain
// sits in one row with a frame around it, and that tasks in one column
// get rows of their own.
func TestGraphLayout(t *testing.T) {
	l := layoutGraph(graphFixture())
	depth := map[string]int{}
	at := map[string][2]float64{}
	for _, op := range l.Ops {
		depth[op.Name], at[op.Name] = op.Depth, [2]float64{op.X, op.Y}
	}
	if want := map[string]int{"left": 0, "parse": 1, "right": 0, "join": 2, "<sink>": 3}; fmt.Sprint(depth) != fmt.Sprint(want) {
		t.Errorf("depths %v, want %v", depth, want)
	}
	if at["left"][1] != at["parse"][1] || at["left"][0] >= at["parse"][0] {
		t.Errorf("the chain left → parse is not one row, left to right: %v, %v", at["left"], at["parse"])
	}
	if at["right"][0] != at["left"][0] || at["right"][1] == at["left"][1] {
		t.Errorf("the two sources share a box: %v, %v", at["left"], at["right"])
	}
	if len(l.Tasks) != 1 || l.Tasks[0].Name != "left" || l.Tasks[0].X >= at["left"][0] ||
		l.Tasks[0].X+l.Tasks[0].W <= at["parse"][0]+graphBoxWidth {
		t.Errorf("task frames %+v, want one around left and parse", l.Tasks)
	}
	for _, op := range l.Ops {
		if op.X+op.W > l.Width || op.Y+op.H > l.Height {
			t.Errorf("%s at %v,%v is outside the drawing (%v x %v)", op.Name, op.X, op.Y, l.Width, l.Height)
		}
	}
	// Busy boxes are the busy colour, backpressured ones the other.
	if got := l.Ops[0].Fill; got != colourBusy.String() {
		t.Errorf("a busy operator is %s, want %s", got, colourBusy)
	}
	if got := l.Ops[2].Fill; got != colourBackpressured.String() {
		t.Errorf("a backpressured operator is %s, want %s", got, colourBackpressured)
	}
}

// TestGraphSVG checks the selectors the page's users rely on and that
// names are escaped.
func TestGraphSVG(t *testing.T) {
	svg := string(graphSVG(graphFixture()))
	if n := strings.Count(svg, `<g class="op `); n != 5 {
		t.Errorf("%d .op boxes, want 5", n)
	}
	for _, e := range graphFixture().Edges {
		from, to := template.HTMLEscapeString(e.From), template.HTMLEscapeString(e.To)
		if !strings.Contains(svg, fmt.Sprintf(`data-from="%s" data-to="%s"`, from, to)) {
			t.Errorf("no edge %s → %s", e.From, e.To)
		}
	}
	if strings.Count(svg, `<g class="task"`) != 1 || !strings.Contains(svg, "queued 50%") || !strings.Contains(svg, "hash → in 2") {
		t.Errorf("graph lacks the chain's frame, a ring's fill or a join's second input:\n%s", svg)
	}
	if strings.Contains(svg, "<sink>") {
		t.Errorf("an operator's name is not escaped")
	}
}

// TestDurationChartSVG checks a series per label, a dot per point, links,
// and that a distribution ends at 100%.
func TestDurationChartSVG(t *testing.T) {
	c := DurationChart{Title: "durations", Series: []DurationSeries{
		{Label: "aligned", Points: []DurationPoint{{At: 0, Duration: 3 * ms, Link: "checkpoints/1"}, {At: time.Second, Duration: 1 * ms}}},
		{Label: "unaligned", Points: []DurationPoint{{At: 0, Duration: 2 * ms}, {At: time.Second, Duration: 8 * ms}, {At: 2 * time.Second, Duration: 5 * ms}}},
	}}
	svg := string(DurationChartSVG(c))
	if n := strings.Count(svg, `<g class="series"`); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
	if n := strings.Count(svg, `<circle class="point"`); n != 5 {
		t.Errorf("%d points, want 5", n)
	}
	if !strings.Contains(svg, `<a href="checkpoints/1">`) {
		t.Errorf("the linked point has no link")
	}
	c.CDF = true
	l := layoutChart(c)
	for _, s := range l.Series {
		for i, d := range s.Dots[1:] {
			if prev := s.Dots[i]; d.X <= prev.X || d.Y > prev.Y {
				t.Errorf("series %s: the distribution goes from %v,%v to %v,%v", s.Label, prev.X, prev.Y, d.X, d.Y)
			}
		}
		if last := s.Dots[len(s.Dots)-1]; last.X != l.X1 {
			t.Errorf("series %s: the distribution ends at x %v, not at 100%% (%v)", s.Label, last.X, l.X1)
		}
	}
	// The longest of all, 8ms, ends the duration axis.
	if last := l.Series[1].Dots[2]; last.Y != l.Y0 {
		t.Errorf("the longest checkpoint is at y %v, not at the top of the plot (%v)", last.Y, l.Y0)
	}
	if l.XTicks[len(l.XTicks)-1].Label != "100%" {
		t.Errorf("distribution's ticks %v", l.XTicks)
	}
}

// TestPages renders each page of hand-built views: the selectors are there,
// links are relative, and the views' JSON decodes to what they were.
func TestPages(t *testing.T) {
	var b bytes.Buffer
	ov := graphFixture()
	if err := WriteOverview(&b, ov, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`<svg id="graph"`, `<table id="operators">`, `http-equiv="refresh" content="5"`,
		`href="./checkpoints"`} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
	if n := strings.Count(page, `<tr class="operator"`); n != len(ov.Operators) {
		t.Errorf("overview: %d operator rows, want %d", n, len(ov.Operators))
	}

	tl := timelineFixture()
	row := CheckpointRow{ID: 7, Kind: "unaligned", Duration: 10 * ms, Status: "completed", Result: "completed"}
	cv := CheckpointView{Checkpoint: row, Timeline: tl, CriticalPath: []string{"gen#0", "count#0"},
		Subtasks: []SubtaskRow{{Operator: "gen", WaitedOnChannel: -1, Critical: true}, {Operator: "count", WaitedOn: "gen#1", WaitedOnChannel: 1}}}
	b.Reset()
	if err := WriteCheckpoint(&b, cv); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	if n := strings.Count(page, `<tr class="subtask`); n != 2 || !strings.Contains(page, `<tr class="subtask critical"`) {
		t.Errorf("checkpoint page: %d subtask rows, want 2 with one critical", n)
	}
	if !strings.Contains(page, `href="../checkpoints"`) || strings.Contains(page, "http-equiv") {
		t.Errorf("checkpoint page: links not relative to its depth, or it reloads itself")
	}
	classes, _ := rowsOf(t, template.HTML(page))
	if len(classes) != len(tl.Rows) {
		t.Errorf("checkpoint page: %d timeline rows, want %d", len(classes), len(tl.Rows))
	}
	js, err := json.Marshal(cv)
	if err != nil {
		t.Fatal(err)
	}
	var back CheckpointView
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	back.Timeline.ElementID = cv.Timeline.ElementID
	if fmt.Sprint(back) != fmt.Sprint(cv) {
		t.Errorf("the view's JSON decodes to\n%+v\nwant\n%+v", back, cv)
	}

	b.Reset()
	hv := CheckpointsView{Total: 3, Limit: 2, Completed: 2, Failed: 1,
		Checkpoints: []CheckpointRow{row, {ID: 6, Status: "failed: timed out", Result: "failed"}}}
	if err := WriteCheckpoints(&b, hv, 0); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	if n := strings.Count(page, `<tr class="checkpoint `); n != 2 || !strings.Contains(page, `<table id="checkpoints">`) {
		t.Errorf("history: %d checkpoint rows, want 2", n)
	}
	if !strings.Contains(page, `href="./checkpoints/7"`) || !strings.Contains(page, "the newest 2 of 3") {
		t.Errorf("history: no link to checkpoint 7, or no count of those not shown")
	}
}
