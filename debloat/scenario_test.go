package debloat

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/scenario"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt")

// TestScenarios runs the narrated golden scenarios in testdata/*.txt.
// Commands:
//
//	init target=D min=N max=N [start=N] [channels=N]
//	observe now=D busy=D consumed=N,N,...
//	                    (the consumer's cumulative busy time and consumed bytes)
//	run periods=N drain=R,R,... [busy=F]
//	                    (N periods, each ending one period after the last
//	                    observation, busy for F of it (default 1), with each
//	                    channel drained at R bytes per busy second)
//	state
//
// An observation within a period prints "-". One that ends a period prints
// the rates (bytes per busy second) and limits, and "changed" if Observe
// reported a change; or why the period was not measured. Durations (D) are
// Go durations from the clock's zero. With -rewrite the expected output is
// regenerated; the comments and commands are kept.
func TestScenarios(t *testing.T) {
	scenario.RunGlob(t, "testdata/*.txt", *rewrite, func() scenario.Interpreter {
		var h harness
		return h.run
	})
}

// harness is the interpreter's state: the controller and the consumer's
// cumulative counters as last observed.
type harness struct {
	c        *Controller
	now      time.Duration
	busy     time.Duration
	consumed []uint64
}

func (h *harness) run(t *testing.T, c scenario.Command) []string {
	if c.Name == "init" {
		c.Allow(t, "target min max start channels")
		return h.init(t, c)
	}
	if h.c == nil {
		t.Fatalf("%s: %s before init", c.Where, c.Name)
	}
	switch c.Name {
	case "observe":
		c.Allow(t, "now busy consumed")
		return []string{h.observe(c.Duration(t, "now", 0), c.Duration(t, "busy", 0), h.counts(t, c, "consumed"))}
	case "run":
		c.Allow(t, "periods drain busy")
		return h.runPeriods(t, c)
	case "state":
		c.Allow(t, "")
		return h.state()
	}
	t.Fatalf("%s: unknown command %q", c.Where, c.Name)
	return nil
}

func (h *harness) init(t *testing.T, c scenario.Command) []string {
	cfg := Config{
		Target: c.Duration(t, "target", 0),
		Min:    uint64(c.Int(t, "min", 0)),
		Max:    uint64(c.Int(t, "max", 0)),
		Start:  uint64(c.Int(t, "start", 0)),
	}
	ctl, err := New(cfg, c.Int(t, "channels", 1))
	if err != nil {
		h.c = nil
		return []string{"error: " + err.Error()}
	}
	*h = harness{c: ctl, consumed: make([]uint64, len(ctl.chans))}
	return []string{fmt.Sprintf("ok period=%v", ctl.period)}
}

// counts parses a comma-separated list of one number per channel.
func (h *harness) counts(t *testing.T, c scenario.Command, key string) []uint64 {
	fields := strings.Split(c.String(key, ""), ",")
	if len(fields) != len(h.c.chans) {
		t.Fatalf("%s: %s has %d values for %d channels", c.Where, key, len(fields), len(h.c.chans))
	}
	out := make([]uint64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", c.Where, key, err)
		}
		out[i] = n
	}
	return out
}

// observe feeds one observation and describes what it did.
func (h *harness) observe(now, busy time.Duration, consumed []uint64) string {
	c := h.c
	started, start, busyStart, measured := c.started, c.start, c.busy, c.measured
	back := now < h.now || busy < h.busy
	for i := range consumed {
		back = back || consumed[i] < h.consumed[i]
	}
	changed := c.Observe(now, busy, consumed)
	h.now, h.busy, h.consumed = now, busy, consumed
	switch {
	case !started:
		return "first observation: the first period starts"
	case c.start == start:
		return "-"
	case c.measured > measured:
		s := fmt.Sprintf("rates=%s limits=%s", h.rates(), h.limits())
		if changed {
			s += " changed"
		}
		return s
	case back:
		return "not measured: a count went back; the period restarts"
	}
	return fmt.Sprintf("not measured: busy %.0f%% of the period; rates kept",
		100*float64(busy-busyStart)/float64(now-start))
}

func (h *harness) runPeriods(t *testing.T, c scenario.Command) []string {
	n := c.Int(t, "periods", 1)
	share := c.Float(t, "busy", 1)
	fields := strings.Split(c.String("drain", ""), ",")
	if len(fields) != len(h.c.chans) {
		t.Fatalf("%s: drain has %d rates for %d channels", c.Where, len(fields), len(h.c.chans))
	}
	var out []string
	for range n {
		busy := time.Duration(share * float64(h.c.period))
		consumed := make([]uint64, len(fields))
		for i, f := range fields {
			r, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("%s: drain: %v", c.Where, err)
			}
			consumed[i] = h.consumed[i] + uint64(math.Round(r*busy.Seconds()))
		}
		now := h.now + h.c.period
		out = append(out, fmt.Sprintf("%v: %s", now, h.observe(now, h.busy+busy, consumed)))
	}
	return out
}

func (h *harness) state() []string {
	c := h.c
	return []string{
		fmt.Sprintf("now=%v busy=%v consumed=%s", h.now, h.busy, join(h.consumed)),
		fmt.Sprintf("period started=%v at=%v busy=%v; %d measured", c.started, c.start, c.busy, c.measured),
		fmt.Sprintf("rates=%s limits=%s", h.rates(), h.limits()),
	}
}

func (h *harness) rates() string {
	s := make([]string, len(h.c.chans))
	for i := range s {
		s[i] = strconv.FormatFloat(h.c.Rate(i), 'f', 0, 64)
	}
	return strings.Join(s, ",")
}

func (h *harness) limits() string {
	l := make([]uint64, len(h.c.chans))
	for i := range l {
		l[i] = h.c.Limit(i)
	}
	return join(l)
}

func join(v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(s, ",")
}
