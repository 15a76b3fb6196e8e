package statusui

import (
	"bytes"
	"fmt"
	"html/template"
	"strconv"
)

// The overview graph's geometry, in pixels. A column per topological
// depth, a row per task that does not fit beside the tasks before it.
const (
	graphBoxWidth  = 200
	graphBoxHeight = 100
	graphGapX      = 90 // room for an edge's label between columns
	graphGapY      = 20
	graphTaskPad   = 8  // a chain's frame around its operators
	graphTaskHead  = 18 // above it, the task's name
	graphMargin    = 12
)

// graphLayout is the overview graph ready to draw.
type graphLayout struct {
	Width, Height float64
	Tasks         []taskBox // chains of more than one operator
	Ops           []opBox
	Edges         []edgeLine
}

type taskBox struct {
	Name       string
	X, Y, W, H float64
}

type opBox struct {
	OperatorView
	X, Y       float64
	W, H       float64
	Fill, Ink  string
	BusyW, BpW float64 // widths of the share bar's parts
	Depth      int
	NameY      float64
	Lines      []boxLine // the lines of text under the name
	BarY       float64
	Title      string // the tooltip
}

type boxLine struct {
	Y    float64
	Text string
}

type edgeLine struct {
	EdgeView
	Path         string
	LabelX       float64
	LabelY       float64
	Label, Queue string
}

// layoutGraph places each operator in the column of its topological depth
// (the longest path to it from a source) and each task, its chained
// operators side by side, in the first row free over its columns.
func layoutGraph(v OverviewView) graphLayout {
	index := make(map[string]int, len(v.Operators))
	for i, op := range v.Operators {
		index[op.Name] = i
	}
	depth := operatorDepths(v, index)
	tasks := tasksOf(v)
	row, rows := taskRows(tasks, depth)

	var g graphLayout
	cols := 0
	boxes := make([]opBox, len(v.Operators))
	for i, op := range v.Operators {
		cols = max(cols, depth[i]+1)
		boxes[i] = newOpBox(op, colX(depth[i]), rowY(row[i]))
		boxes[i].Depth = depth[i]
	}
	g.Ops = boxes
	for _, t := range tasks {
		if len(t.ops) < 2 {
			continue
		}
		x0, x1 := boxes[t.ops[0]].X, boxes[t.ops[0]].X
		for _, i := range t.ops {
			x0, x1 = min(x0, boxes[i].X), max(x1, boxes[i].X)
		}
		y := boxes[t.ops[0]].Y
		g.Tasks = append(g.Tasks, taskBox{Name: t.name, X: x0 - graphTaskPad, Y: y - graphTaskPad - graphTaskHead,
			W: x1 - x0 + graphBoxWidth + 2*graphTaskPad, H: graphBoxHeight + 2*graphTaskPad + graphTaskHead})
	}
	for _, e := range v.Edges {
		from, okFrom := index[e.From]
		to, okTo := index[e.To]
		if okFrom && okTo {
			g.Edges = append(g.Edges, newEdgeLine(e, boxes[from], boxes[to]))
		}
	}
	g.Width = 2*graphMargin + float64(cols)*graphBoxWidth + float64(max(cols-1, 0))*graphGapX + 2*graphTaskPad
	g.Height = rowY(rows) - graphGapY + graphMargin - graphTaskHead
	return g
}

// operatorDepths returns each operator's topological depth: the longest
// path to it from a source. index finds an operator by name.
func operatorDepths(v OverviewView, index map[string]int) []int {
	// NB: the job lists edges by downstream operator in topological order,
	// so the first round settles every depth; a view built by hand may
	// need more, one per operator at most (a cycle stops there).
	depth := make([]int, len(v.Operators))
	for round, changed := 0, true; changed && round < len(v.Operators); round++ {
		changed = false
		for _, e := range v.Edges {
			from, okFrom := index[e.From]
			to, okTo := index[e.To]
			if okFrom && okTo && depth[to] < depth[from]+1 {
				depth[to], changed = depth[from]+1, true
			}
		}
	}
	return depth
}

// task is a chain of operators, by their indexes, head first.
type task struct {
	name string
	ops  []int
}

// tasksOf returns v's tasks in the order of their heads.
func tasksOf(v OverviewView) []task {
	var tasks []task
	at := map[string]int{}
	for i, op := range v.Operators {
		name := op.Task
		if name == "" {
			name = op.Name
		}
		j, ok := at[name]
		if !ok {
			j = len(tasks)
			at[name] = j
			tasks = append(tasks, task{name: name})
		}
		tasks[j].ops = append(tasks[j].ops, i)
	}
	return tasks
}

// taskRows puts each task in the first row free over the columns of its
// operators (a chain's operators have consecutive depths: a chained
// operator has one input) and returns each operator's row and the number
// of rows.
func taskRows(tasks []task, depth []int) (row []int, rows int) {
	row = make([]int, len(depth))
	used := map[[2]int]bool{} // (row, column)
	for _, t := range tasks {
		first, last := depth[t.ops[0]], depth[t.ops[0]]
		for _, i := range t.ops {
			first, last = min(first, depth[i]), max(last, depth[i])
		}
		r := 0
		for ; ; r++ {
			free := true
			for c := first; c <= last && free; c++ {
				free = !used[[2]int{r, c}]
			}
			if free {
				break
			}
		}
		for c := first; c <= last; c++ {
			used[[2]int{r, c}] = true
		}
		for _, i := range t.ops {
			row[i] = r
		}
		rows = max(rows, r+1)
	}
	return row, rows
}

func colX(c int) float64 {
	return graphMargin + graphTaskPad + float64(c)*(graphBoxWidth+graphGapX)
}

func rowY(r int) float64 {
	return graphMargin + graphTaskPad + graphTaskHead + float64(r)*(graphBoxHeight+2*graphTaskPad+graphTaskHead+graphGapY)
}

// shareBar is the height of the bar at the bottom of an operator's box
// that splits its time into busy, backpressured and idle.
const shareBar = 8

func newOpBox(op OperatorView, x, y float64) opBox {
	fill := shareColour(op.Rates)
	b := opBox{OperatorView: op, X: x, Y: y, W: graphBoxWidth, H: graphBoxHeight, Fill: fill.String(), Ink: inkOn(fill)}
	kind := op.Kind
	if op.Keyed {
		kind += ", keyed"
	}
	rate := "in " + formatRate(op.RecordsInPerSecond)
	if op.Kind == "source" {
		rate = "out " + formatRate(op.RecordsOutPerSecond)
	} else if op.Kind != "sink" {
		rate += " · out " + formatRate(op.RecordsOutPerSecond)
	}
	lines := []string{
		kind + " · ×" + strconv.Itoa(op.Parallelism),
		rate,
		fmt.Sprintf("busy %s · backpr. %s", formatShare(op.BusyShare), formatShare(op.BackpressuredShare)),
		"watermark " + formatClock(op.Watermark),
	}
	b.NameY = y + 18
	for i, text := range lines {
		b.Lines = append(b.Lines, boxLine{Y: b.NameY + 17 + float64(i)*16, Text: text})
	}
	b.BarY = y + graphBoxHeight - shareBar
	b.Title = fmt.Sprintf("%s (task %s)\nrecords in %s, out %s\nbusy %s, backpressured %s, idle %s\nwatermark %s",
		op.Name, op.Task, formatRate(op.RecordsInPerSecond), formatRate(op.RecordsOutPerSecond),
		formatShare(op.BusyShare), formatShare(op.BackpressuredShare), formatShare(op.IdleShare), formatStamp(op.Watermark))
	b.BusyW = graphBoxWidth * op.BusyShare
	b.BpW = graphBoxWidth * op.BackpressuredShare
	return b
}

func newEdgeLine(e EdgeView, from, to opBox) edgeLine {
	x1, y1 := from.X+from.W, from.Y+from.H/2
	x2, y2 := to.X, to.Y+to.H/2
	dx := (x2 - x1) / 2
	l := edgeLine{EdgeView: e,
		Path:   fmt.Sprintf("M%s %s C%s %s, %s %s, %s %s", px(x1), px(y1), px(x1+dx), px(y1), px(x2-dx), px(y2), px(x2), px(y2)),
		LabelX: (x1 + x2) / 2, LabelY: (y1+y2)/2 - 4, Label: e.Partitioning}
	if e.Chained {
		l.Label = "chained"
	}
	if e.Port > 0 {
		l.Label += " → in " + strconv.Itoa(e.Port+1)
	}
	if e.CapacityBytes > 0 {
		l.Queue = "queued " + formatShare(float64(e.QueuedBytes)/float64(e.CapacityBytes))
	}
	return l
}

// graphSVG draws the overview's job graph.
func graphSVG(v OverviewView) template.HTML {
	var b bytes.Buffer
	if err := svgTemplates.ExecuteTemplate(&b, "graph", layoutGraph(v)); err != nil {
		return errorSVG(err)
	}
	return template.HTML(b.String())
}

// errorSVG stands in for a drawing that failed.
func errorSVG(err error) template.HTML {
	return template.HTML("<p class=\"error\">" + template.HTMLEscapeString(err.Error()) + "</p>")
}
