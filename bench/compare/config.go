package compare

import (
	"errors"
	"fmt"
	"github.com/ringflow/ringflow"
	"strings"
	"time"
)

// Pipelines lists the pipelines Compare runs.
var Pipelines = []string{"keyed-count", "window", "join"}

// Mode is one checkpoint configuration of a comparison.
type Mode string

// The modes, in the order Compare runs them by default.
const (
	Aligned   Mode = "aligned"   // aligned checkpoints, no timeout
	Unaligned Mode = "unaligned" // every checkpoint unaligned from the start
	Timeout   Mode = "timeout"   // aligned, unaligned after Config.AlignmentTimeout
	None      Mode = "none"      // no checkpoints: the throughput reference
)

// AllModes is the default Config.Modes.
var AllModes = []Mode{Aligned, Unaligned, Timeout, None}

// Config describes one comparison.
type Config struct {
	// Pipeline is one of Pipelines.
	Pipeline string
	// Skew is the fraction of records that carry the one hot key, in [0, 1].
	Skew float64
	// SlowSink is the busy wait of the sink per record; 0: none.
	SlowSink time.Duration
	// Interval is the checkpoint interval; default 1 s.
	Interval time.Duration
	// AlignmentTimeout is the timeout of the timeout mode; default 10 ms.
	AlignmentTimeout time.Duration
	// Duration is how long each mode runs; default 10 s.
	Duration time.Duration
	// Modes are the modes to run, in order; default AllModes.
	Modes []Mode
	// Parallelism of every operator; default 2.
	Parallelism int
	// Workers is the engine's worker threads; 0: the usable CPUs.
	Workers int
	// Keys is the number of keys besides the hot one; default 10000.
	Keys uint64
	// RingCapacity is the bytes of each ring (a power of two); default 1 MiB.
	RingCapacity int
	// FrameBytes is the target payload of a DATA frame; 0: the engine's
	// default (32 KiB). A task handles up to 16 frames per step and looks
	// for barriers between steps, so with a slow sink smaller frames let
	// an unaligned barrier be seen sooner.
	FrameBytes int
	// Debloat, if positive, runs every mode twice: first with buffer
	// debloating off (rings fill to RingCapacity, which is what the modes
	// are compared on), then with ringflow.Config.Debloat set to it. 0:
	// each mode once, debloating off.
	Debloat time.Duration
	// ProfileDir, if set, receives an fgprof profile per mode and
	// stalls.txt.
	ProfileDir string
	// TempDir is where the state directories go; default os.TempDir().
	TempDir string
	// OnJob, if set, is called with each ringflow job the comparison
	// builds, once it is built, before it runs (to serve its status pages,
	// say).
	OnJob func(*ringflow.Job)
}

// ErrConfig is wrapped by every error about a bad Config.
var ErrConfig = errors.New("bad compare config")

// Defaults.
const (
	DefaultInterval         = time.Second
	DefaultAlignmentTimeout = 10 * time.Millisecond
	DefaultDuration         = 10 * time.Second
	DefaultParallelism      = 2
	DefaultKeys             = 10_000
	DefaultRingCapacity     = 1 << 20
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.AlignmentTimeout == 0 {
		c.AlignmentTimeout = DefaultAlignmentTimeout
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if len(c.Modes) == 0 {
		c.Modes = AllModes
	}
	if c.Parallelism == 0 {
		c.Parallelism = DefaultParallelism
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.RingCapacity == 0 {
		c.RingCapacity = DefaultRingCapacity
	}
	return c
}

// Validate says what is wrong with c (after WithDefaults).
func (c Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !contains(Pipelines, c.Pipeline) {
		bad("pipeline %q: want one of %s", c.Pipeline, strings.Join(Pipelines, ", "))
	}
	if !(c.Skew >= 0 && c.Skew <= 1) {
		bad("skew %v: want a fraction in [0, 1]", c.Skew)
	}
	if c.SlowSink < 0 {
		bad("slow sink %v: negative", c.SlowSink)
	}
	if c.Debloat < 0 {
		bad("debloat %v: negative", c.Debloat)
	}
	if c.Interval <= 0 {
		bad("checkpoint interval %v: want > 0", c.Interval)
	}
	if c.AlignmentTimeout <= 0 {
		bad("alignment timeout %v: want > 0 (the unaligned mode is timeout 0)", c.AlignmentTimeout)
	}
	if c.Duration <= 0 {
		bad("duration %v: want > 0", c.Duration)
	}
	seen := map[Mode]bool{}
	for _, m := range c.Modes {
		if !contains(AllModes, m) || seen[m] {
			bad("mode %q: want distinct modes among aligned, unaligned, timeout, none", m)
		}
		seen[m] = true
	}
	if c.Parallelism < 1 || c.Parallelism > 128 {
		bad("parallelism %d: want 1..128", c.Parallelism)
	}
	if c.Workers < 0 {
		bad("workers %d: negative", c.Workers)
	}
	if c.Keys < 1 {
		bad("keys %d: want >= 1", c.Keys)
	}
	if c.RingCapacity < 4096 || c.RingCapacity&(c.RingCapacity-1) != 0 {
		bad("ring capacity %d: want a power of two >= 4096", c.RingCapacity)
	}
	if c.FrameBytes < 0 || c.FrameBytes > c.RingCapacity/4 {
		bad("frame bytes %d: want 0 (default) up to a quarter of the ring capacity", c.FrameBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return nil
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// eventTimeStep says how event time advances with the sequence number:
// seq·mul/div ms. The window pipeline puts about ten records of a key in
// a window; the join about ten records of each side in a window, so that
// the hot key's pairs per window stay few.
func (c Config) eventTimeStep() (mul, div uint64) {
	switch c.Pipeline {
	case "window":
		return 1, max(1, 10*c.Keys/uint64(windowSize/time.Millisecond))
	case "join":
		return uint64(windowSize/time.Millisecond) / 10, 1
	}
	return 1, 1
}
