package statusui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// formatDuration prints d with three significant digits and its unit:
// "850µs", "12.3ms", "1.25s"; "—" for None (any negative d).
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "—"
	case d == 0:
		return "0"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + "µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + "ms"
	}
	return sig3(d.Seconds()) + "s"
}

// sig3 prints v (at least 1) with three significant digits, without
// trailing zeros.
func sig3(v float64) string {
	decimals := 0
	switch {
	case v < 10:
		decimals = 2
	case v < 100:
		decimals = 1
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if decimals > 0 {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// formatBytes prints n in binary units: "512 B", "1.5 KiB", "12.3 MiB".
func formatBytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return sig3(v) + " " + unit
}

// formatRate prints a rate per second with SI prefixes: "0/s", "12/s",
// "4.5k/s", "1.23M/s".
func formatRate(perSecond float64) string {
	switch {
	case perSecond < 0.5:
		return "0/s"
	case perSecond < 1000:
		return strconv.FormatFloat(perSecond, 'f', 0, 64) + "/s"
	case perSecond < 1e6:
		return sig3(perSecond/1e3) + "k/s"
	case perSecond < 1e9:
		return sig3(perSecond/1e6) + "M/s"
	}
	return sig3(perSecond/1e9) + "G/s"
}

// formatShare prints a share in [0, 1] as a whole percentage.
func formatShare(s float64) string {
	return strconv.FormatFloat(math.Round(s*100), 'f', 0, 64) + "%"
}

// formatClock prints a time of day with milliseconds, or "—" for the zero
// time.
func formatClock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format("15:04:05.000")
}

// formatStamp prints a date and time for tables and titles.
func formatStamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format("2006-01-02 15:04:05.000")
}

// px prints a coordinate with one decimal.
func px(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// axis is a linear time axis: [0, max] drawn over [x0, x0+width] pixels,
// with ticks every step.
type axis struct {
	max      time.Duration
	x0, w    float64
	step     time.Duration
	unit     time.Duration
	unitName string
}

// maxTicks is how many tick intervals an axis aims at: enough to read a
// time off, few enough for labels like "12.5ms" to fit 900 pixels.
const maxTicks = 10

// newAxis returns an axis over [0, end] (at least 1µs) drawn over width
// pixels from x0, its ticks at 1, 2 or 5 times a power of ten, labelled in
// the largest unit end reaches.
func newAxis(end time.Duration, x0, width float64) axis {
	end = max(end, time.Microsecond)
	a := axis{x0: x0, w: width, step: niceStep(end, maxTicks)}
	// NB: the axis ends on a tick, so that its last label is at its end.
	a.max = (end + a.step - 1) / a.step * a.step
	switch {
	case a.max < time.Millisecond:
		a.unit, a.unitName = time.Microsecond, "µs"
	case a.max < time.Second:
		a.unit, a.unitName = time.Millisecond, "ms"
	default:
		a.unit, a.unitName = time.Second, "s"
	}
	return a
}

// niceStep returns the least of 1, 2 or 5 times a power of ten that splits
// end into at most n steps.
func niceStep(end time.Duration, n int) time.Duration {
	for p := time.Duration(1); ; p *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if s := m * p; end <= s*time.Duration(n) {
				return s
			}
		}
	}
}

// x returns the pixel of time d, clamped to the axis.
func (a axis) x(d time.Duration) float64 {
	d = min(max(d, 0), a.max)
	return a.x0 + float64(d)/float64(a.max)*a.w
}

// tick is one labelled tick of an axis.
type tick struct {
	X     float64
	Label string
}

// ticks returns the axis's ticks from 0 to its end, labelled in its unit.
func (a axis) ticks() []tick {
	var out []tick
	for d := time.Duration(0); d <= a.max; d += a.step {
		label := strconv.FormatFloat(float64(d)/float64(a.unit), 'f', -1, 64) + a.unitName
		if d == 0 {
			label = "0"
		}
		out = append(out, tick{X: a.x(d), Label: label})
	}
	return out
}

// rgb is a colour.
type rgb struct{ r, g, b float64 }

func (c rgb) String() string {
	return fmt.Sprintf("#%02x%02x%02x", int(math.Round(c.r)), int(math.Round(c.g)), int(math.Round(c.b)))
}

// The colours of the overview: each operator box is a mix of them in the
// proportions of its task's time.
var (
	colourIdle          = rgb{0xe8, 0xee, 0xf4}
	colourBusy          = rgb{0xe5, 0x48, 0x3a}
	colourBackpressured = rgb{0x5b, 0x3c, 0x99}
)

// shareColour mixes the overview's colours by the shares of r; a task
// without time is idle.
func shareColour(r Rates) rgb {
	idle := 1 - r.BusyShare - r.BackpressuredShare
	if idle < 0 {
		idle = 0
	}
	mix := func(f func(rgb) float64) float64 {
		return f(colourIdle)*idle + f(colourBusy)*r.BusyShare + f(colourBackpressured)*r.BackpressuredShare
	}
	return rgb{mix(func(c rgb) float64 { return c.r }), mix(func(c rgb) float64 { return c.g }),
		mix(func(c rgb) float64 { return c.b })}
}

// inkOn returns the text colour that reads on background c.
func inkOn(c rgb) string {
	// Relative luminance, roughly (sRGB weights, no gamma): dark
	// backgrounds get white text.
	if 0.2126*c.r+0.7152*c.g+0.0722*c.b < 140 {
		return "#ffffff"
	}
	return "#1f2328"
}

// truncate shortens s to at most n runes, ending it with "…" if cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
