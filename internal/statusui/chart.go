package statusui

import (
	"bytes"
	"cmp"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The duration chart's geometry, in pixels.
const (
	chartWidth   = 900
	chartHeight  = 280
	chartLeft    = 64 // the duration labels
	chartRight   = 32 // half the last label
	chartTop     = 42 // the title and the legend
	chartBottom  = 40 // the axis's labels and its name
	chartRadius  = 2.5
	chartMaxDots = 400 // beyond, a series is drawn as a line only
)

// chartPalette colours the series, in order (then again).
var chartPalette = []string{"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83"}

type chartLayout struct {
	ID, Title     string
	Width, Height float64
	X0, X1        float64
	Y0, Y1        float64 // top and bottom of the plot
	XTicks        []tick
	YTicks        []yTick
	XLabel        string
	XLabelX       float64
	Series        []chartSeries
	Empty         bool
}

type yTick struct {
	Y     float64
	Label string
}

type chartSeries struct {
	Label   string
	Colour  string
	Points  string // the polyline
	Dots    []chartDot
	LegendX float64
}

type chartDot struct {
	X, Y  float64
	Link  string
	Title string
}

// DurationChartSVG draws c as an svg element (id c.ElementID, "durations"
// by default) with its own styles, to put in any HTML page: each series a
// coloured line (a g element of class "series") with a dot per checkpoint,
// labelled in a legend, durations up the side. Against time, the bottom
// axis is DurationPoint.At; as a distribution (c.CDF), it is the share of
// the series' checkpoints, from 0 to 100%, each series sorted by duration.
// A dot with a Link leads there.
func DurationChartSVG(c DurationChart) template.HTML {
	var b bytes.Buffer
	if err := svgTemplates.ExecuteTemplate(&b, "chart", layoutChart(c)); err != nil {
		return errorSVG(err)
	}
	return template.HTML(b.String())
}

func layoutChart(c DurationChart) chartLayout {
	l := chartLayout{ID: c.ElementID, Title: c.Title, Width: chartWidth, Height: chartHeight,
		X0: chartLeft, X1: chartWidth - chartRight, Y0: chartTop, Y1: chartHeight - chartBottom}
	l.XLabelX = (l.X0 + l.X1) / 2
	if l.ID == "" {
		l.ID = "durations"
	}
	var longest, latest time.Duration
	points := 0
	for _, s := range c.Series {
		for _, p := range s.Points {
			longest, latest = max(longest, p.Duration), max(latest, p.At)
			points++
		}
	}
	l.Empty = points == 0
	y := newAxis(longest, 0, l.Y1-l.Y0)
	for _, t := range y.ticks() {
		l.YTicks = append(l.YTicks, yTick{Y: l.Y1 - t.X, Label: t.Label})
	}
	yOf := func(d time.Duration) float64 { return l.Y1 - y.x(d) }
	var xOf func(i, n int, p DurationPoint) float64
	if c.CDF {
		l.XLabel = "share of checkpoints"
		for pct := 0; pct <= 100; pct += 25 {
			l.XTicks = append(l.XTicks, tick{X: l.X0 + float64(pct)/100*(l.X1-l.X0), Label: strconv.Itoa(pct) + "%"})
		}
		xOf = func(i, n int, _ DurationPoint) float64 {
			// NB: the i-th of n sorted durations is the (i+1)/n quantile.
			return l.X0 + float64(i+1)/float64(n)*(l.X1-l.X0)
		}
	} else {
		l.XLabel = "time since the first trigger"
		x := newAxis(latest, l.X0, l.X1-l.X0)
		l.XTicks = x.ticks()
		xOf = func(_, _ int, p DurationPoint) float64 { return x.x(p.At) }
	}
	legendX := l.X0
	for i, s := range c.Series {
		pts := slices.Clone(s.Points)
		if c.CDF {
			slices.SortStableFunc(pts, func(a, b DurationPoint) int { return cmp.Compare(a.Duration, b.Duration) })
		}
		cs := chartSeries{Label: s.Label, Colour: chartPalette[i%len(chartPalette)], LegendX: legendX}
		legendX += 30 + 6.5*float64(len([]rune(s.Label)))
		var line strings.Builder
		for j, p := range pts {
			x, y := xOf(j, len(pts), p), yOf(p.Duration)
			line.WriteString(px(x) + "," + px(y) + " ")
			if len(pts) <= chartMaxDots {
				title := p.Title
				if title == "" {
					title = s.Label + ": " + formatDuration(p.Duration)
				}
				cs.Dots = append(cs.Dots, chartDot{X: x, Y: y, Link: p.Link, Title: title})
			}
		}
		cs.Points = strings.TrimSpace(line.String())
		l.Series = append(l.Series, cs)
	}
	return l
}
