package compare

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ringflow/ringflow/internal/statusui"
)

//go:embed templates/report.tmpl
var reportTemplate string

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"q":        q,
	"ms":       func(d time.Duration) string { return fmt.Sprintf("%.2f", ms(d)) },
	"pct":      func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) },
	"timeline": statusui.TimelineSVG,
	"chart":    statusui.DurationChartSVG,
	"rel": func(m ModeResult, none *ModeResult) string {
		if none == nil || none.RecordsPerSec == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", m.RecordsPerSec/none.RecordsPerSec)
	},
}).Parse(reportTemplate))

// reportData is what the report's template gets.
type reportData struct {
	Report
	Config    Config
	Machine   string
	Generated time.Time
	// Distribution and OverTime chart every mode's checkpoint durations.
	Distribution, OverTime statusui.DurationChart
}

// WriteHTML writes r, the comparison cfg ran, as one self-contained HTML
// page: the modes' figures, their checkpoint durations charted as
// distributions and over time, and for each mode its slowest checkpoint's
// barrier timeline and the heaviest frames of its fgprof profile (when
// cfg.ProfileDir was set). It fetches nothing and runs no script.
func WriteHTML(w io.Writer, r Report, cfg Config) error {
	r.Modes = slices.Clone(r.Modes) // the views are copied below, not changed
	d := reportData{Report: r, Config: cfg.WithDefaults(), Machine: machine(), Generated: time.Now(),
		Distribution: statusui.DurationChart{Title: "checkpoint duration, distribution", CDF: true, ElementID: "durations-cdf"},
		OverTime:     statusui.DurationChart{Title: "checkpoint duration over the run", ElementID: "durations-time"}}
	for i, m := range r.Modes {
		var points []statusui.DurationPoint
		var start time.Time
		for _, c := range m.Checkpoints {
			if c.Status != "completed" || c.Final {
				continue
			}
			if start.IsZero() {
				start = c.Trigger
			}
			points = append(points, statusui.DurationPoint{At: c.Trigger.Sub(start), Duration: c.Duration,
				Title: fmt.Sprintf("%s checkpoint %d: %.1f ms", m.Name(), c.ID, ms(c.Duration))})
		}
		series := statusui.DurationSeries{Label: m.Name(), Points: points}
		d.Distribution.Series = append(d.Distribution.Series, series)
		d.OverTime.Series = append(d.OverTime.Series, series)
		if m.Slowest != nil {
			// NB: one page holds every mode's timeline: each needs an id
			// of its own.
			v := *m.Slowest
			v.Timeline.ElementID = "timeline-" + m.fileKey()
			d.Modes[i].Slowest = &v
		}
	}
	return reportPage.Execute(w, d)
}

// machine describes the machine the comparison ran on: the CPU model (from
// /proc/cpuinfo, on Linux), the CPUs Go may use, and the Go version.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
