package soak

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgElement is an element of a plot, with its attributes by name.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string // of a <text>
}

// parseSVG parses a plot as XML, and returns its elements in order.
func parseSVG(t *testing.T, svg []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []svgElement
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			inText = e.name == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				out[len(out)-1].text += string(tok)
			}
		}
	}
}

// ofClass returns the elements of class class.
func ofClass(elems []svgElement, class string) []svgElement {
	var out []svgElement
	for _, e := range elems {
		if e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

// points returns the points of a polyline.
func points(t *testing.T, e svgElement) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, p := range strings.Fields(e.attrs["points"]) {
		x, y, ok := strings.Cut(p, ",")
		fx, errX := strconv.ParseFloat(x, 64)
		fy, errY := strconv.ParseFloat(y, 64)
		if !ok || errX != nil || errY != nil {
			t.Fatalf("polyline point %q", p)
		}
		out = append(out, [2]float64{fx, fy})
	}
	return out
}

// plotOf draws samples and parses the plot.
func plotOf(t *testing.T, samples []Sample, title string, opts PlotOptions) []svgElement {
	t.Helper()
	var buf bytes.Buffer
	if err := PlotSVG(&buf, samples, title, opts); err != nil {
		t.Fatal(err)
	}
	return parseSVG(t, buf.Bytes())
}

// TestPlotSVG draws three children's samples, a kill between each two: a
// line of RSS, of heap live and of state mapped outside the heap per
// child, within the memory panel; a dot
// per sample after the first checkpoint; a kill line at each change of
// child; the bounds and the warm-up's end.
func TestPlotSVG(t *testing.T) {
	children := []struct{ child, from, to int }{{1, 1, 4}, {2, 6, 8}, {3, 10, 11}} // seconds, inclusive
	var samples []Sample
	for _, c := range children {
		for sec := c.from; sec <= c.to; sec++ {
			s := Sample{At: time.Duration(sec) * time.Second, Child: c.child, RSS: RSS{Total: uint64(100+sec) * 1e6}}
			if sec > c.from { // heap live is 0 until a child's first GC
				s.Runtime.HeapLiveBytes = uint64(40+sec) * 1e6
			}
			s.Runtime.StateMappedBytes = uint64(60+sec) * 1e6
			if sec > 2 {
				s.Last = Checkpoint{ID: uint64(sec - 2), Duration: time.Duration(sec) * 10 * time.Millisecond}
			}
			samples = append(samples, s)
		}
	}
	opts := PlotOptions{Warmup: 3 * time.Second, RSSBoundPct: 10, DurationBound: 50 * time.Millisecond}
	elems := plotOf(t, samples, `soak <keyed-count> & "kills"`, opts)

	for _, series := range []struct {
		class      string
		lines, pts int
	}{{"rss", 3, 9}, {"heap-live", 3, 6}, {"state-mapped", 3, 9}} {
		lines, n := ofClass(elems, series.class), 0
		for _, l := range lines {
			for _, p := range points(t, l) {
				n++
				if p[0] < plotLeft || p[0] > plotRight || p[1] < memTop || p[1] > memBottom {
					t.Errorf("%s point %v outside the memory panel", series.class, p)
				}
			}
		}
		if len(lines) != series.lines || n != series.pts {
			t.Errorf("%s: %d polylines of %d points in all, want %d of %d", series.class, len(lines), n, series.lines, series.pts)
		}
	}
	if ck := ofClass(elems, "ck"); len(ck) != 1 || strings.Count(ck[0].attrs["d"], "M") != 7 {
		t.Errorf("checkpoint dots %v: want one path of 7, a sample each from the first checkpoint on", ck)
	}
	if kills := ofClass(elems, "kill"); len(kills) != 2 {
		t.Errorf("%d kill lines, want 2", len(kills))
	}
	for _, class := range []string{"warmup", "rss-bound", "duration-bound"} {
		if n := len(ofClass(elems, class)); n != 1 {
			t.Errorf("%d lines of class %s, want 1", n, class)
		}
	}
	texts := map[string]bool{}
	for _, e := range elems {
		if e.name == "text" {
			texts[e.text] = true
		}
	}
	for _, want := range []string{`soak <keyed-count> & "kills"`, "kills: 2", "RSS bound: warm-up peak +10% (112 MB)",
		"bound: 50ms", "memory (MB)", "time since the start (min)", "0.2"} {
		if !texts[want] {
			t.Errorf("no text %q in the plot", want)
		}
	}
}

// TestPlotSVGFew: no samples, or one, make a plot of empty panels or a
// single point, well-formed, with no kill line, and no mark of a warm-up
// that ends after the last sample, nor of an RSS bound after it.
func TestPlotSVGFew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		rssPts  int
	}{
		{"none", nil, 0},
		{"one", []Sample{{At: 0, Child: 1, RSS: RSS{Total: 50e6}}}, 1},
		{"one, idle", []Sample{{At: time.Second, Child: 1}}, 1},
	} {
		elems := plotOf(t, tc.samples, tc.name, PlotOptions{Warmup: time.Minute, RSSBoundPct: 5, DurationBound: time.Second})
		n := 0
		for _, l := range ofClass(elems, "rss") {
			n += len(points(t, l))
		}
		kills, marks := len(ofClass(elems, "kill")), len(ofClass(elems, "warmup"))+len(ofClass(elems, "rss-bound"))
		if n != tc.rssPts || kills != 0 || marks != 0 || len(ofClass(elems, "duration-bound")) != 1 {
			t.Errorf("%s: %d RSS points, %d kill lines, %d warm-up marks, %d duration bounds; want %d, none, none and 1",
				tc.name, n, kills, marks, len(ofClass(elems, "duration-bound")), tc.rssPts)
		}
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct {
		top       float64
		ticks     int
		hi, step  float64
		lastLabel string
	}{
		{263.4, 6, 300, 50, "300"},
		{203.265, 5, 250, 50, "250"},
		{100, 5, 100, 20, "100"},
		{2.98, 12, 3, 0.5, "3"},
		{0.29, 10, 0.3, 0.05, "0.3"},
		{0, 5, 1, 0.2, "1"},
		{720, 12, 800, 100, "800"},
	} {
		s := niceScale(tc.top, tc.ticks)
		ticks := s.ticks()
		if math.Abs(s.hi-tc.hi) > 1e-9 || math.Abs(s.step-tc.step) > 1e-9 || len(ticks)-1 > tc.ticks || s.label(ticks[len(ticks)-1]) != tc.lastLabel {
			t.Errorf("niceScale(%v, %d) = %+v, %d ticks, the last %q; want %v every %v, at most %d, the last %q",
				tc.top, tc.ticks, s, len(ticks), s.label(ticks[len(ticks)-1]), tc.hi, tc.step, tc.ticks+1, tc.lastLabel)
		}
	}
}
