package soak

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// PlotOptions are the marks PlotSVG draws beside the samples; the zero
// value draws none.
type PlotOptions struct {
	// Warmup marks the end of the warm-up on the memory panel; 0, or
	// after the last sample, no mark.
	Warmup time.Duration
	// RSSBoundPct draws, from the end of the warm-up on, a dashed line at
	// the largest RSS during the warm-up times 1+RSSBoundPct/100: what
	// Bounds.MaxRSSGrowthPct holds RSS to. NB: 0 is a bound (no growth);
	// negative, or without a Warmup, draws none.
	RSSBoundPct float64
	// DurationBound draws a dashed line at this checkpoint duration; 0:
	// none.
	DurationBound time.Duration
}

// The plot's layout, in SVG user units (pixels of the PNG). The two
// panels share the time axis, whose labels are under the lower one.
const (
	plotWidth, plotHeight = 1000, 600
	plotLeft, plotRight   = 72, 976 // the panels' edges; the y labels are left of them
	plotTitleY            = 24
	plotLegendY           = 48
	memTop, memBottom     = 62, 308
	ckTop, ckBottom       = 344, 534
	plotXLabelsY          = ckBottom + 17
	plotXTitleY           = 586
	// plotMemTicks, plotCkTicks and plotTimeTicks are the most intervals
	// between ticks an axis is divided into.
	plotMemTicks, plotCkTicks, plotTimeTicks = 6, 5, 12
)

// The colours of the plot's series and marks.
const (
	rssColour    = "#1f77b4"
	heapColour   = "#2ca02c"
	mappedColour = "#ff7f0e"
	ckColour     = "#9467bd"
	killColour   = "#d62728"
	warmupColour = "#7f7f7f"
	gridColour   = "#e6e6e6"
)

// PlotSVG draws samples, in the order they were taken, as a self-contained
// SVG of two panels over the minutes of the soak: memory in MB (RSS, and
// the Go heap marked live), and the latest checkpoint's duration in ms, a
// dot per sample. A thin line across both panels marks each kill, where
// the child changes; each child's memory is a line of its own.
func PlotSVG(w io.Writer, samples []Sample, title string, opts PlotOptions) error {
	p := newPlot(samples, opts)
	b := &p.b
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", plotWidth, plotHeight)
	// NB: a long title is drawn smaller, to fit the panels' width.
	size := max(9, min(14, float64(plotRight-plotLeft)*14/textWidth(title, 14)))
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"%.1f\" font-weight=\"bold\">%s</text>\n", plotLeft, plotTitleY, size, escape(title))
	p.axes()
	p.memory()
	p.checkpoints()
	p.killLines()
	p.legend()
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// plot is one PlotSVG being drawn.
type plot struct {
	samples  []Sample
	opts     PlotOptions
	mem, ck  panel
	warmup   bool      // whether to mark the warm-up's end: within the samples
	rssBound float64   // in MB; 0: none
	kills    []float64 // where each kill is drawn, in minutes
	killed   int       // children killed: a kill line can stand for more
	mapped   bool      // whether any sample has state mapped outside the Go heap
	b        bytes.Buffer
}

func newPlot(samples []Sample, opts PlotOptions) *plot {
	p := &plot{samples: samples, opts: opts}
	var minutes, memMax, ckMax, peak float64
	for i := range samples {
		s := &samples[i]
		minutes = s.At.Minutes()
		memMax = max(memMax, mb(s.RSS.Total), mb(s.Runtime.HeapLiveBytes), mb(s.Runtime.StateMappedBytes))
		p.mapped = p.mapped || s.Runtime.StateMappedBytes > 0
		ckMax = max(ckMax, ms(s.Last.Duration))
		if s.At < opts.Warmup {
			peak = max(peak, mb(s.RSS.Total))
		}
		if i > 0 && s.Child != samples[i-1].Child {
			// NB: the kill is somewhere between the killed child's last
			// sample and the next child's first; the middle is as good
			// as any.
			p.kills = append(p.kills, (s.At.Minutes()+samples[i-1].At.Minutes())/2)
			p.killed += max(s.Child-samples[i-1].Child, 1)
		}
	}
	p.warmup = opts.Warmup > 0 && len(samples) > 0 && opts.Warmup <= samples[len(samples)-1].At
	if p.warmup && opts.RSSBoundPct >= 0 && peak > 0 {
		p.rssBound = peak * (1 + opts.RSSBoundPct/100)
	}
	ckMax = max(ckMax, ms(opts.DurationBound))
	t := niceScale(minutes, plotTimeTicks)
	p.mem = panel{top: memTop, bottom: memBottom, x: t, y: niceScale(max(memMax, p.rssBound), plotMemTicks)}
	p.ck = panel{top: ckTop, bottom: ckBottom, x: t, y: niceScale(ckMax, plotCkTicks)}
	return p
}

// axes draws each panel's frame, grid, ticks and labels, and the time
// axis under the lower panel.
func (p *plot) axes() {
	b := &p.b
	for _, pn := range []struct {
		*panel
		label string
	}{{&p.mem, "memory (MB)"}, {&p.ck, "latest checkpoint's duration (ms)"}} {
		for i, v := range pn.x.ticks() {
			if i > 0 {
				x := pn.px(v)
				fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n", x, pn.top, x, pn.bottom, gridColour)
			}
		}
		for _, v := range pn.y.ticks() {
			y := pn.py(v)
			fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n", plotLeft, y, plotRight, y, gridColour)
			fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", plotLeft-6, y+4, pn.y.label(v))
		}
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
			plotLeft, pn.top, plotRight-plotLeft, pn.bottom-pn.top)
		fmt.Fprintf(b, "<text transform=\"translate(18 %d) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
			(pn.top+pn.bottom)/2, escape(pn.label))
	}
	for _, v := range p.ck.x.ticks() {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", p.ck.px(v), plotXLabelsY, p.ck.x.label(v))
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since the start (min)</text>\n",
		(plotLeft+plotRight)/2, plotXTitleY)
	if len(p.samples) == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#999\">no samples</text>\n",
			(plotLeft+plotRight)/2, (memTop+memBottom)/2)
	}
}

// memory draws the memory panel: the warm-up's end and the RSS bound, and
// a line of RSS, one of Go heap live and, where there is any, one of the
// state mapped outside the heap, per child.
func (p *plot) memory() {
	b, m := &p.b, &p.mem
	if p.warmup {
		x := m.px(p.opts.Warmup.Minutes())
		fmt.Fprintf(b, "<line class=\"warmup\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"2 3\"/>\n",
			x, m.top, x, m.bottom, warmupColour)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" fill=\"%s\" font-size=\"11\">warm-up end (%v)</text>\n",
			x+4, m.top+13, warmupColour, p.opts.Warmup)
	}
	if p.rssBound > 0 {
		y := m.py(p.rssBound)
		fmt.Fprintf(b, "<line class=\"rss-bound\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n",
			m.px(p.opts.Warmup.Minutes()), y, plotRight, y, rssColour)
	}
	p.perChild("rss", rssColour, func(s *Sample) (float64, bool) { return mb(s.RSS.Total), true })
	// NB: heap live is 0 until a child's first GC, which is no reading.
	p.perChild("heap-live", heapColour, func(s *Sample) (float64, bool) {
		return mb(s.Runtime.HeapLiveBytes), s.Runtime.HeapLiveBytes > 0
	})
	if p.mapped {
		p.perChild("state-mapped", mappedColour, func(s *Sample) (float64, bool) { return mb(s.Runtime.StateMappedBytes), true })
	}
}

// perChild draws a polyline of class class on the memory panel for each
// child's samples, of the values value reports.
func (p *plot) perChild(class, colour string, value func(*Sample) (float64, bool)) {
	b, m := &p.b, &p.mem
	for i := 0; i < len(p.samples); {
		j := i
		n := 0
		for ; j < len(p.samples) && p.samples[j].Child == p.samples[i].Child; j++ {
			v, ok := value(&p.samples[j])
			if !ok {
				continue
			}
			if n == 0 {
				fmt.Fprintf(b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"", class, colour)
			} else {
				b.WriteByte(' ')
			}
			n++
			fmt.Fprintf(b, "%.1f,%.1f", m.px(p.samples[j].At.Minutes()), m.py(v))
		}
		if n > 0 {
			b.WriteString("\"/>\n")
		}
		i = j
	}
}

// checkpoints draws the checkpoint panel: the bound, and a dot per sample
// after the first checkpoint, at its latest checkpoint's duration.
func (p *plot) checkpoints() {
	b, c := &p.b, &p.ck
	if p.opts.DurationBound > 0 {
		y := c.py(ms(p.opts.DurationBound))
		fmt.Fprintf(b, "<line class=\"duration-bound\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n",
			plotLeft, y, plotRight, y, ckColour)
	}
	// NB: a dot is a subpath of no length, which a round cap draws; one
	// path of them is a third of the size of as many circles.
	b.WriteString("<path class=\"ck\" fill=\"none\" stroke=\"" + ckColour + "\" stroke-width=\"3.5\" stroke-linecap=\"round\" d=\"")
	for i := range p.samples {
		s := &p.samples[i]
		if s.Last.ID == 0 {
			continue
		}
		fmt.Fprintf(b, "M%.1f %.1fh0", c.px(s.At.Minutes()), c.py(ms(s.Last.Duration)))
	}
	b.WriteString("\"/>\n")
}

// killLines draws a thin line across both panels at each kill, broken
// between them, where the checkpoint panel's legend is.
func (p *plot) killLines() {
	for _, t := range p.kills {
		x := p.mem.px(t)
		fmt.Fprintf(&p.b, "<path class=\"kill\" d=\"M%.1f %dV%dM%.1f %dV%d\" stroke=\"%s\" stroke-opacity=\"0.7\"/>\n",
			x, memTop, memBottom, x, ckTop, ckBottom, killColour)
	}
}

// legend draws a swatch and a label for each series and mark drawn: those
// of the memory panel and the kills above it, those of the checkpoint
// panel between the two.
func (p *plot) legend() {
	line := func(colour, dash string) string {
		return fmt.Sprintf("<line x1=\"0\" y1=\"-4\" x2=\"20\" y2=\"-4\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"%s\"/>", colour, dash)
	}
	top := []legendEntry{{line(rssColour, "none"), "RSS"}, {line(heapColour, "none"), "Go heap live"}}
	if p.mapped {
		top = append(top, legendEntry{line(mappedColour, "none"), "state outside the heap"})
	}
	if p.rssBound > 0 {
		top = append(top, legendEntry{line(rssColour, "6 4"),
			fmt.Sprintf("RSS bound: warm-up peak +%g%% (%.0f MB)", p.opts.RSSBoundPct, p.rssBound)})
	}
	top = append(top, legendEntry{line(killColour, "none"), fmt.Sprintf("kills: %d", p.killed)})
	p.legendRow(plotLegendY, top)
	dot := fmt.Sprintf("<path d=\"M10 -4h0\" stroke=\"%s\" stroke-width=\"3.5\" stroke-linecap=\"round\"/>", ckColour)
	between := []legendEntry{{dot, "the latest checkpoint's duration at each sample"}}
	if p.opts.DurationBound > 0 {
		between = append(between, legendEntry{line(ckColour, "6 4"), "bound: " + p.opts.DurationBound.String()})
	}
	p.legendRow(ckTop-10, between)
}

// legendEntry is a swatch, drawn left of a baseline at 0, and its label.
type legendEntry struct {
	swatch, label string
}

// legendRow draws entries left to right, on baseline y.
func (p *plot) legendRow(y int, entries []legendEntry) {
	x := float64(plotLeft)
	for _, e := range entries {
		fmt.Fprintf(&p.b, "<g transform=\"translate(%.0f %d)\">%s<text x=\"26\">%s</text></g>\n", x, y, e.swatch, escape(e.label))
		x += 26 + textWidth(e.label, 12) + 18
	}
}

// textWidth estimates the width of text in a font of size px: no font is
// measured, and an average character is 0.6 of its size wide.
func textWidth(text string, px float64) float64 {
	return 0.6 * px * float64(utf8.RuneCountInString(text))
}

// panel is where one plot is drawn: from top to bottom, between the
// plot's left and right edges.
type panel struct {
	top, bottom int
	x, y        scale
}

func (p *panel) px(v float64) float64 { return plotLeft + p.x.frac(v)*(plotRight-plotLeft) }
func (p *panel) py(v float64) float64 { return float64(p.bottom) - p.y.frac(v)*float64(p.bottom-p.top) }

// scale is an axis from 0 to a round number, ticked every step.
type scale struct {
	hi, step float64
}

// niceScale returns the axis from 0 up to top or more that has the finest
// step of 1, 2 or 5 times a power of ten with at most ticks steps.
func niceScale(top float64, ticks int) scale {
	if !(top > 0) || math.IsInf(top, 0) {
		top = 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(top/float64(ticks))))
	step := 10 * mag // NB: more than top/ticks, so fewer than ticks steps
	for _, m := range []float64{1, 2, 5} {
		if m*mag*float64(ticks) >= top {
			step = m * mag
			break
		}
	}
	n := max(1, math.Ceil(top/step-1e-9))
	return scale{hi: n * step, step: step}
}

func (s scale) frac(v float64) float64 { return v / s.hi }

// ticks returns the values of the ticks, from 0 to hi.
func (s scale) ticks() []float64 {
	n := int(math.Round(s.hi / s.step))
	t := make([]float64, n+1)
	for i := range t {
		t[i] = float64(i) * s.step
	}
	return t
}

// label formats a tick's value with as many decimals as the step has.
func (s scale) label(v float64) string {
	decimals := max(0, -int(math.Floor(math.Log10(s.step)+1e-9)))
	scale := math.Pow10(decimals)
	return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64)
}

func mb(bytes uint64) float64 { return float64(bytes) / 1e6 }

// escape returns s as XML text.
func escape(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
