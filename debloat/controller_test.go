package debloat

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("seed", "")

// TestNewErrors checks that New names what is wrong with a bad config.
func TestNewErrors(t *testing.T) {
	good := Config{Target: 100 * time.Millisecond, Min: 520, Max: 1 << 20}
	for _, c := range []struct {
		name     string
		mangle   func(*Config)
		channels int
		want     string
	}{
		{"zero target", func(c *Config) { c.Target = 0 }, 1, "Target = 0s, want at least 4ns"},
		{"negative target", func(c *Config) { c.Target = -time.Second }, 1, "Target = -1s"},
		{"target under a period", func(c *Config) { c.Target = 3 }, 1, "Target = 3ns"},
		{"zero min", func(c *Config) { c.Min = 0 }, 1, "Min = 0"},
		{"max below min", func(c *Config) { c.Max = 100 }, 1, "Max = 100 is below Min = 520"},
		{"no channels", func(*Config) {}, 0, "0 channels"},
		{"negative channels", func(*Config) {}, -2, "-2 channels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.mangle(&cfg)
			ctl, err := New(cfg, c.channels)
			if ctl != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New(%+v, %d) = %v, %v; want ErrInvalidConfig mentioning %q", cfg, c.channels, ctl, err, c.want)
			}
		})
	}
	ctl, err := New(Config{Target: 4, Min: 7, Max: 7}, 3)
	if err != nil {
		t.Fatalf("smallest valid config: %v", err)
	}
	for ch := range 3 {
		if ctl.Limit(ch) != 7 || ctl.Rate(ch) != 0 {
			t.Fatalf("channel %d before any measurement: limit %d, rate %v; want Max and 0", ch, ctl.Limit(ch), ctl.Rate(ch))
		}
	}
}

// TestObserveWrongLength checks that a consumed slice of the wrong length
// is reported as the caller's bug it is.
func TestObserveWrongLength(t *testing.T) {
	c, err := New(Config{Target: 100 * time.Millisecond, Min: 1, Max: 100}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "1 consumed counts for 2 channels") {
			t.Fatalf("panic %v, want one naming the lengths", r)
		}
	}()
	c.Observe(0, 0, []uint64{1})
}

// TestRandomObservations feeds random observations (steps within and
// across periods, idle and busy stretches, stalls, bursts, counts going
// back) and checks after each one what every rule promises: limits within
// [Min, Max]; nothing changes within a period, or at the end of one in
// which the consumer was busy less than minBusyShare of the time; a limit
// moves only by more than the threshold or to Min or Max; and Observe
// reports true exactly when a limit moved.
func TestRandomObservations(t *testing.T) {
	rnd := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	for round := range 200 {
		cfg := Config{
			Target: time.Duration(1+rnd.IntN(1000)) * time.Millisecond,
			Min:    uint64(1 + rnd.IntN(10000)),
		}
		cfg.Max = cfg.Min + uint64(rnd.IntN(1<<20))
		chans := 1 + rnd.IntN(4)
		c, err := New(cfg, chans)
		if err != nil {
			t.Fatal(err)
		}
		var now, busy time.Duration
		consumed := make([]uint64, chans)
		for i := range 500 {
			before := snapshot(c)
			start, busyStart, started := c.start, c.busy, c.started
			step := time.Duration(rnd.Int64N(int64(c.period) * 3 / 2))
			if rnd.IntN(50) == 0 {
				step = -step // a clock that steps back
			}
			now += step
			busy += time.Duration(rnd.Float64() * float64(max(step, 0)))
			for ch := range consumed {
				switch rnd.IntN(20) {
				case 0: // a counter reset
					consumed[ch] = 0
				case 1: // a burst
					consumed[ch] += uint64(rnd.IntN(100 << 20))
				default:
					consumed[ch] += uint64(rnd.IntN(1 << 16))
				}
			}
			changed := c.Observe(now, busy, consumed)
			after := snapshot(c)
			span := now - start
			within := started && span >= 0 && span < c.period
			idle := started && span >= c.period && float64(busy-busyStart) < minBusyShare*float64(span)
			if err := checkStep(c, before, after, changed, within || idle); err != nil {
				t.Fatalf("round %d, observation %d (now=%v busy=%v): %v", round, i, now, busy, err)
			}
		}
	}
}

type state struct {
	rates  []float64
	limits []uint64
	n      int
}

func snapshot(c *Controller) state {
	s := state{n: c.measured}
	for ch := range c.chans {
		s.rates = append(s.rates, c.Rate(ch))
		s.limits = append(s.limits, c.Limit(ch))
	}
	return s
}

// checkStep checks one observation; unmeasured says it was within a
// period or ended one in which the consumer was too idle to measure.
func checkStep(c *Controller, before, after state, changed, unmeasured bool) error {
	moved := false
	for ch := range before.limits {
		b, a := before.limits[ch], after.limits[ch]
		switch {
		case a < c.cfg.Min || a > c.cfg.Max:
			return fmt.Errorf("channel %d limit %d outside [%d, %d]", ch, a, c.cfg.Min, c.cfg.Max)
		case (unmeasured || after.n == before.n) && (a != b || after.rates[ch] != before.rates[ch]):
			return fmt.Errorf("channel %d changed (limit %d→%d, rate %v→%v) without a measured period",
				ch, b, a, before.rates[ch], after.rates[ch])
		case a != b && a != c.cfg.Min && a != c.cfg.Max && float64(max(a, b)-min(a, b)) <= threshold*float64(b):
			return fmt.Errorf("channel %d limit moved %d→%d, not more than the threshold", ch, b, a)
		}
		moved = moved || a != b
	}
	if moved != changed {
		return fmt.Errorf("Observe reported %v, limits moved: %v", changed, moved)
	}
	return nil
}
