package statusui

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"time"
)

// The timeline's geometry, in pixels. Its height grows with its rows, a
// fixed height each, so that a job with hundreds of channels draws one
// legible row per channel (the page scrolls; the axis is drawn above and
// below the rows).
const (
	timelineLabelWidth = 240
	timelinePlotWidth  = 880
	timelineRowHeight  = 16
	timelineBarHeight  = 10
	timelineLegend     = 44
	timelineAxis       = 22
	timelineMarkWidth  = 2
	// timelineCommitStretch is how much longer than the barrier's path
	// the whole checkpoint may take and still be drawn to scale.
	timelineCommitStretch = 3
	// timelineLabelRunes is as much of a row's label as fits its column;
	// its tooltip has it all.
	timelineLabelRunes = 36
)

// timelineLayout is a timeline ready to draw.
type timelineLayout struct {
	ID              string
	Width, Height   float64
	PlotX0, PlotX1  float64
	RowsY0, RowsY1  float64
	TopAxisY        float64
	BottomAxisY     float64 // 0: no axis below (few rows)
	Ticks           []tick
	Ends            []endLine
	Rows            []timelineRowBox
	Legend          []legendItem
	Empty           bool
	CheckpointLabel string
	// Beyond notes the checkpoint's completion when it lies off the axis.
	Beyond  string
	BeyondY float64
}

type endLine struct {
	X     float64
	Class string
	Label string
}

type legendItem struct {
	X, Y  float64
	Class string
	Label string
	Mark  bool // a tick, not a bar
}

type timelineRowBox struct {
	Class      string // "row channel", "row source", plus "critical", "unaligned"
	Y          float64
	BarY       float64
	TextY      float64
	Label      string
	Title      string
	Critical   bool
	Separator  bool // the first row of its subtask
	Rects      []timelineRect
	Width      float64
	LabelClass string
}

type timelineRect struct {
	Class string
	X, W  float64
	Y, H  float64
}

// TimelineSVG draws a checkpoint's barrier timeline as an svg element (id
// v.ElementID, "timeline" by default) with its own styles, to put in any
// HTML page: one row (a g element of class "row") per input channel
// ("channel") and per source subtask ("source"), on a common time axis from
// the trigger. A channel's row shows the barrier in transit from the
// producer (its Left) to the input (Arrived); for an aligned subtask, the
// channel blocked from Done until the snapshot; for an unaligned one, the
// switch (the snapshot) and the in-flight data recorded until Done; then
// the subtask's synchronous part, its asynchronous part and the ack. A
// source's row shows its snapshot, the barrier forwarded, and the same
// parts. Rows on the critical path have the class "critical" and a
// highlighted background; every row has a tooltip with its times.
func TimelineSVG(v TimelineView) template.HTML {
	var b bytes.Buffer
	if err := svgTemplates.ExecuteTemplate(&b, "timeline", layoutTimeline(v)); err != nil {
		return errorSVG(err)
	}
	return template.HTML(b.String())
}

// layoutTimeline places v's rows under a common axis.
func layoutTimeline(v TimelineView) timelineLayout {
	l := timelineLayout{ID: v.ElementID, CheckpointLabel: fmt.Sprintf("checkpoint %d", v.Checkpoint)}
	if l.ID == "" {
		l.ID = "timeline"
	}
	end := v.Written
	for _, r := range v.Rows {
		end = max(end, r.Left, r.Arrived, r.Done, r.Snapshot+max(r.Sync, 0), r.Forwarded, r.Acked)
	}
	// NB: a commit far longer than the barrier's path (an fsync, say)
	// would squeeze every row into the left of the axis; it is noted at
	// the axis's end instead.
	completedOnAxis := v.Duration <= end*timelineCommitStretch || len(v.Rows) == 0
	if completedOnAxis {
		end = max(end, v.Duration)
	}
	l.PlotX0 = timelineLabelWidth
	l.PlotX1 = timelineLabelWidth + timelinePlotWidth
	l.Width = l.PlotX1 + 40 // the last tick's label
	a := newAxis(end, l.PlotX0, timelinePlotWidth)
	l.Ticks = a.ticks()
	l.Legend = timelineLegendItems(l.Width)
	l.TopAxisY = timelineLegend + timelineAxis
	l.RowsY0 = l.TopAxisY + 4
	l.Empty = len(v.Rows) == 0
	for i, r := range v.Rows {
		y := l.RowsY0 + float64(i*timelineRowHeight)
		box := timelineRowOf(r, a, y, l.Width)
		box.Separator = i > 0 && (r.Operator != v.Rows[i-1].Operator || r.Subtask != v.Rows[i-1].Subtask)
		l.Rows = append(l.Rows, box)
	}
	l.RowsY1 = l.RowsY0 + float64(max(len(v.Rows), 1)*timelineRowHeight)
	l.Height = l.RowsY1 + 8
	// NB: beyond a screenful of rows, the axis is drawn below them too.
	if len(v.Rows) > 30 {
		l.BottomAxisY = l.RowsY1 + 4
		l.Height = l.BottomAxisY + timelineAxis
	}
	if v.Written > 0 {
		l.Ends = append(l.Ends, endLine{X: a.x(v.Written), Class: "written", Label: "written"})
	}
	switch {
	case v.Duration <= 0:
	case completedOnAxis:
		l.Ends = append(l.Ends, endLine{X: a.x(v.Duration), Class: "completed", Label: "completed"})
	default:
		// NB: below the rows: at the axis it would cover the labels of
		// the lines near the axis's end.
		l.Beyond = "completed at " + formatDuration(v.Duration) + " →"
		l.BeyondY = l.Height + 4
		l.Height += timelineAxis
	}
	return l
}

// timelineRowOf draws row r at height y.
func timelineRowOf(r TimelineRow, a axis, y, width float64) timelineRowBox {
	box := timelineRowBox{Y: y, BarY: y + (timelineRowHeight-timelineBarHeight)/2, TextY: y + timelineRowHeight - 4,
		Label: truncate(r.Label, timelineLabelRunes), Title: rowTitle(r), Critical: r.Critical, Width: width}
	classes := []string{"row"}
	switch {
	case r.Source:
		classes = append(classes, "source")
	case r.Channel >= 0:
		classes = append(classes, "channel")
	default:
		classes = append(classes, "subtask") // a subtask without channel statistics
	}
	if r.Critical {
		classes = append(classes, "critical")
	}
	if r.Unaligned {
		classes = append(classes, "unaligned")
	}
	box.Class = strings.Join(classes, " ")
	bar := func(class string, from, to time.Duration) {
		if from < 0 || to < from {
			return
		}
		x0, x1 := a.x(from), a.x(to)
		box.Rects = append(box.Rects, timelineRect{Class: class, X: x0, W: max(x1-x0, 1), Y: box.BarY, H: timelineBarHeight})
	}
	thin := func(class string, from, to time.Duration) {
		if from < 0 || to < from {
			return
		}
		x0, x1 := a.x(from), a.x(to)
		box.Rects = append(box.Rects, timelineRect{Class: class, X: x0, W: max(x1-x0, 1),
			Y: box.BarY + timelineBarHeight/2 - 1, H: 2})
	}
	mark := func(class string, at time.Duration) {
		if at < 0 {
			return
		}
		box.Rects = append(box.Rects, timelineRect{Class: class, X: a.x(at) - timelineMarkWidth/2, W: timelineMarkWidth,
			Y: y + 1, H: timelineRowHeight - 2})
	}
	if r.Channel < 0 {
		bar("sync", r.Snapshot, r.Snapshot+r.Sync)
		bar("async", r.Acked-r.Async, r.Acked)
		mark("forward", r.Forwarded)
		mark("ack", r.Acked)
		return box
	}
	thin("transit", r.Left, r.Arrived)
	switch {
	case r.Unaligned:
		if r.Done > r.Snapshot {
			bar("recorded", r.Snapshot, r.Done)
		}
	case r.Done >= 0 && r.Snapshot > r.Done:
		bar("blocked", r.Done, r.Snapshot)
	}
	bar("sync", r.Snapshot, r.Snapshot+r.Sync)
	bar("async", r.Acked-r.Async, r.Acked)
	mark("arrived", r.Arrived)
	if r.Unaligned {
		mark("switch", r.Snapshot)
	}
	mark("ack", r.Acked)
	return box
}

// rowTitle is a row's tooltip: its label and every time it has.
func rowTitle(r TimelineRow) string {
	var b strings.Builder
	b.WriteString(r.Label)
	if r.Critical {
		b.WriteString(" (critical path)")
	}
	add := func(name string, d time.Duration) {
		if d >= 0 {
			fmt.Fprintf(&b, "\n%s %s", name, formatDuration(d))
		}
	}
	if !r.Source {
		add("left producer", r.Left)
		add("arrived", r.Arrived)
		add("done", r.Done)
		if r.Arrived < 0 {
			b.WriteString("\nthe channel ended before its barrier came")
		}
	}
	if r.Unaligned {
		add("switched to unaligned", r.Snapshot)
	} else {
		add("snapshot", r.Snapshot)
	}
	add("sync", r.Sync)
	if r.Forwarded > 0 {
		add("forwarded", r.Forwarded)
	}
	add("async", r.Async)
	add("acked", r.Acked)
	if r.InflightBytes > 0 {
		b.WriteString("\nin-flight data persisted " + formatBytes(r.InflightBytes))
	}
	return b.String()
}

// timelineLegendItems lays the legend out in lines of at most width
// pixels.
func timelineLegendItems(width float64) []legendItem {
	items := []legendItem{
		{Class: "transit", Label: "barrier in transit"},
		{Class: "arrived", Label: "arrived", Mark: true},
		{Class: "blocked", Label: "blocked (aligning)"},
		{Class: "switch", Label: "switched to unaligned", Mark: true},
		{Class: "recorded", Label: "recording in-flight data"},
		{Class: "sync", Label: "sync part"},
		{Class: "forward", Label: "forwarded (source)", Mark: true},
		{Class: "async", Label: "async part"},
		{Class: "ack", Label: "acked", Mark: true},
		{Class: "critical-key", Label: "critical path"},
	}
	x, y := 4.0, 12.0
	for i := range items {
		// NB: 6.2 pixels a rune is the legend font's average advance.
		w := 22 + 6.2*float64(len([]rune(items[i].Label))) + 14
		if x+w > width {
			x, y = 4, y+timelineLegend/2
		}
		items[i].X, items[i].Y = x, y
		x += w
	}
	return items
}
