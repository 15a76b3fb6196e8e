package statusui

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.tmpl
var templateFiles embed.FS

// svgFuncs are the functions of the drawings' templates.
var svgFuncs = template.FuncMap{
	"px":  px,
	"add": func(a, b float64) float64 { return a + b },
}

// pageFuncs are the functions of the pages' templates.
var pageFuncs = template.FuncMap{
	"inc":   func(i int) int { return i + 1 },
	"dur":   formatDuration,
	"rate":  formatRate,
	"share": formatShare,
	"stamp": formatStamp,
	"join":  strings.Join,
	"kind":  kindOf,
	"bytes": func(n any) (string, error) {
		switch n := n.(type) {
		case int:
			return formatBytes(uint64(max(n, 0))), nil
		case uint64:
			return formatBytes(n), nil
		}
		return "", fmt.Errorf("bytes of a %T", n)
	},
	"graph":    graphSVG,
	"timeline": TimelineSVG,
}

var (
	svgTemplates  = template.Must(template.New("svg").Funcs(svgFuncs).ParseFS(templateFiles, "templates/svg.tmpl"))
	pageTemplates = template.Must(template.New("pages").Funcs(pageFuncs).ParseFS(templateFiles, "templates/pages.tmpl"))
)

// page is what every page's template gets.
type page struct {
	Title string
	// Base leads from the page to the root of the status pages, so that
	// every link is relative and the pages work under any prefix
	// (http.StripPrefix).
	Base string
	// API is the path of the page's JSON, from Base.
	API            string
	RefreshSeconds int
	Now            time.Time
	View           any
}

// WriteOverview writes the overview page of v, reloading itself every
// refresh (0: never). Its links assume it is served at the root of the
// status pages.
func WriteOverview(w io.Writer, v OverviewView, refresh time.Duration) error {
	return pageTemplates.ExecuteTemplate(w, "overview", page{Title: "overview", Base: "./", API: "api/overview",
		RefreshSeconds: seconds(refresh), Now: v.Generated, View: v})
}

// WriteCheckpoints writes the checkpoint history page of v, reloading
// itself every refresh (0: never). Its links assume it is served at
// "checkpoints" under the root of the status pages.
func WriteCheckpoints(w io.Writer, v CheckpointsView, refresh time.Duration) error {
	return pageTemplates.ExecuteTemplate(w, "checkpoints", page{Title: "checkpoints", Base: "./",
		API: "api/checkpoints", RefreshSeconds: seconds(refresh), Now: v.Generated,
		View: checkpointsPage{CheckpointsView: v, Base: "./"}})
}

// WriteCheckpoint writes the page of one checkpoint. Its links assume it is
// served at "checkpoints/{id}" under the root of the status pages.
func WriteCheckpoint(w io.Writer, v CheckpointView) error {
	id := strconv.FormatUint(v.Checkpoint.ID, 10)
	return pageTemplates.ExecuteTemplate(w, "checkpoint", page{Title: "checkpoint " + id, Base: "../",
		API: "api/checkpoints/" + id, View: v})
}

// checkpointsPage is the history page's view with its chart.
type checkpointsPage struct {
	CheckpointsView
	Base string
}

// Chart draws the durations of the history's checkpoints over time, the
// completed ones apart from the others, each leading to its page.
func (p checkpointsPage) Chart() template.HTML {
	var first time.Time
	for _, c := range p.Checkpoints {
		if first.IsZero() || c.Trigger.Before(first) {
			first = c.Trigger
		}
	}
	completed := DurationSeries{Label: "completed"}
	other := DurationSeries{Label: "failed or aborted"}
	// NB: the rows are newest first; the lines run oldest first.
	for i := len(p.Checkpoints) - 1; i >= 0; i-- {
		c := p.Checkpoints[i]
		pt := DurationPoint{At: c.Trigger.Sub(first), Duration: c.Duration,
			Link:  p.Base + "checkpoints/" + strconv.FormatUint(c.ID, 10),
			Title: fmt.Sprintf("checkpoint %d: %s, %s", c.ID, formatDuration(c.Duration), c.Result)}
		if c.Result == "completed" {
			completed.Points = append(completed.Points, pt)
		} else {
			other.Points = append(other.Points, pt)
		}
	}
	chart := DurationChart{Title: "Checkpoint durations", Series: []DurationSeries{completed}}
	if len(other.Points) > 0 {
		chart.Series = append(chart.Series, other)
	}
	return DurationChartSVG(chart)
}

func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(int(d.Round(time.Second)/time.Second), 1)
}

// kindOf describes a checkpoint's kind: "aligned", "unaligned", either
// with ", final"; "—" when unknown.
func kindOf(c CheckpointRow) string {
	k := c.Kind
	if k == "" {
		k = "—"
	}
	if c.Final {
		k += ", final"
	}
	return k
}
