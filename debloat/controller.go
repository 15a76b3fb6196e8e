package debloat

import (
	"errors"
	"fmt"
	"time"
)

// Config configures a Controller.
type Config struct {
	// Target is how much of the consumer's busy time the data in flight on
	// each input channel should be worth: a barrier behind that data
	// waits about this long. It sets the period (Target/4).
	Target time.Duration
	// Min and Max bound every limit, in bytes. Min is ring.MinLimit, or
	// more if the producers' frames need it: under a limit L a producer
	// should write frames of at most ring.FramePayloadFor(L) bytes, about
	// L/2. Max is the ring's usable capacity (capacity less the control
	// reserve).
	Min, Max uint64
	// Start is every channel's limit before the first measurement, in
	// [Min, Max]; 0 means Max. Data a producer wrote under a high start
	// stays until the consumer drains it, however low the limit falls:
	// starting at Min, a slow consumer's rings never fill, while a fast
	// one is held back only until its first period ends.
	Start uint64
}

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("debloat: invalid config")

func (c *Config) validate(channels int) error {
	switch {
	case c.Target < periodsPerTarget:
		return fmt.Errorf("%w: Target = %v, want at least %v (a period is Target/%d)",
			ErrInvalidConfig, c.Target, time.Duration(periodsPerTarget), periodsPerTarget)
	case c.Min == 0:
		return fmt.Errorf("%w: Min = 0, want at least 1 byte (normally ring.MinLimit)", ErrInvalidConfig)
	case c.Max < c.Min:
		return fmt.Errorf("%w: Max = %d is below Min = %d", ErrInvalidConfig, c.Max, c.Min)
	case c.Start != 0 && (c.Start < c.Min || c.Start > c.Max):
		return fmt.Errorf("%w: Start = %d is outside [Min = %d, Max = %d]", ErrInvalidConfig, c.Start, c.Min, c.Max)
	case channels < 1:
		return fmt.Errorf("%w: %d channels, want at least 1", ErrInvalidConfig, channels)
	}
	return nil
}

// Controller computes the limits of one consumer's input channels from
// what it observes; see the package doc. It is not safe for concurrent use.
type Controller struct {
	cfg    Config
	period time.Duration

	// The current period: when it began, and the consumer's cumulative
	// busy time then (each channel's cumulative consumed bytes are in
	// chans). started: the first observation has been made.
	start, busy time.Duration
	started     bool
	// measured counts the periods measured; the rates are set once it is
	// not 0.
	measured int

	chans []channel
}

// channel is the controller's state of one input channel.
type channel struct {
	consumed uint64  // cumulative consumed bytes at the start of the period
	rate     float64 // smoothed bytes per busy second
	limit    uint64
}

// New returns a controller for a consumer with the given number of input
// channels, every limit at cfg.Start (cfg.Max if 0).
func New(cfg Config, channels int) (*Controller, error) {
	if err := cfg.validate(channels); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, period: cfg.Target / periodsPerTarget, chans: make([]channel, channels)}
	start := cfg.Start
	if start == 0 {
		start = cfg.Max
	}
	for i := range c.chans {
		c.chans[i].limit = start
	}
	return c, nil
}

// Observe feeds what the consumer measured at time now (since any fixed
// origin): busy, its cumulative time with input to process or blocked on
// its output, and consumed, each input channel's cumulative consumed bytes
// (len(consumed) must be the number of channels). Within a period it only
// compares the time; at the end of one it updates the rates and limits,
// and reports whether any limit changed (read them with Limit).
func (c *Controller) Observe(now, busy time.Duration, consumed []uint64) bool {
	// NB: as unsigned, a time before the period's start is past its end,
	// so a clock that steps back ends the period (and restarts it).
	if c.started && uint64(now-c.start) < uint64(c.period) {
		return false
	}
	return c.endPeriod(now, busy, consumed)
}

// endPeriod measures the period that ends at now, unless it tells nothing,
// and starts the next one.
func (c *Controller) endPeriod(now, busy time.Duration, consumed []uint64) bool {
	if len(consumed) != len(c.chans) {
		panic(fmt.Sprintf("debloat: Observe with %d consumed counts for %d channels", len(consumed), len(c.chans)))
	}
	span, busySpan := now-c.start, busy-c.busy
	measure := c.started && span > 0 && busySpan >= 0 &&
		float64(busySpan) >= minBusyShare*float64(span) && c.forward(consumed)
	changed := false
	if measure {
		changed = c.measure(busySpan, consumed)
	}
	c.start, c.busy, c.started = now, busy, true
	for i := range c.chans {
		c.chans[i].consumed = consumed[i]
	}
	return changed
}

// forward reports whether no channel's consumed count went back (a counter
// the caller reset): such a period is not measured.
func (c *Controller) forward(consumed []uint64) bool {
	for i := range c.chans {
		if consumed[i] < c.chans[i].consumed {
			return false
		}
	}
	return true
}

// measure updates each channel's rate from the bytes it delivered in
// busySpan of busy time, and its limit from the rate.
func (c *Controller) measure(busySpan time.Duration, consumed []uint64) bool {
	changed := false
	for i := range c.chans {
		ch := &c.chans[i]
		m := float64(consumed[i]-ch.consumed) * 1e9 / float64(busySpan)
		if c.measured > 0 {
			// NB: the conversion keeps the product from being fused with
			// the sum, so every platform rounds alike.
			ch.rate += float64(alpha * (m - ch.rate))
		} else {
			ch.rate = m
		}
		if l := c.limitFor(ch.rate); c.moves(ch.limit, l) {
			ch.limit, changed = l, true
		}
	}
	c.measured++
	return changed
}

// limitFor returns the limit for a rate: what the consumer drains in
// Target of busy time, within [Min, Max].
func (c *Controller) limitFor(rate float64) uint64 {
	b := rate * float64(c.cfg.Target) / 1e9
	switch {
	case b <= float64(c.cfg.Min):
		return c.cfg.Min
	case b >= float64(c.cfg.Max):
		return c.cfg.Max
	}
	return uint64(b)
}

// moves reports whether a limit at cur moves to next: when it changes by
// more than threshold of itself, or reaches Min or Max.
func (c *Controller) moves(cur, next uint64) bool {
	switch {
	case next == cur:
		return false
	case next == c.cfg.Min || next == c.cfg.Max:
		return true
	}
	diff := max(cur, next) - min(cur, next)
	return float64(diff) > threshold*float64(cur)
}

// Limit returns channel ch's limit in bytes: Max before the first
// measurement.
func (c *Controller) Limit(ch int) uint64 { return c.chans[ch].limit }

// Rate returns channel ch's smoothed drain rate, in bytes per second of
// the consumer's busy time: 0 before the first measurement.
func (c *Controller) Rate(ch int) float64 { return c.chans[ch].rate }
