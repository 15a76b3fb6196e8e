package align

import (
	"errors"
	"fmt"
	"time"
)

// Mode is the processing guarantee a task's checkpoints give.
type Mode uint8

const (
	// ExactlyOnce aligns barriers: a channel that delivered barrier n is
	// blocked until every live channel has, or the task switches to an
	// unaligned checkpoint. It is the zero value.
	ExactlyOnce Mode = iota
	// AtLeastOnce never blocks: the snapshot is taken when the last channel
	// delivers its barrier, so records that arrived after an early barrier
	// are in the snapshot and are replayed again after a restore.
	AtLeastOnce
)

func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// AlwaysAligned is the AlignmentTimeout that disables unaligned checkpoints.
// Any negative timeout means the same.
const AlwaysAligned time.Duration = -1

// MaxChannels bounds Config.Channels. A task with more inputs than this is a
// configuration mistake, not a workload.
const MaxChannels = 1 << 20

// Config configures one Aligner: one task's inputs and checkpoint settings.
type Config struct {
	// Channels is the number of input channels, numbered 0..Channels-1.
	Channels int
	// Mode is exactly-once (the zero value) or at-least-once.
	Mode Mode
	// AlignmentTimeout, measured from the trigger time carried in the
	// barrier, after which an unfinished alignment switches to an unaligned
	// checkpoint. 0 means every checkpoint is unaligned from the first
	// barrier; negative (AlwaysAligned) means never switch. Unaligned
	// checkpoints (timeout >= 0) need ExactlyOnce and MaxConcurrent == 1.
	AlignmentTimeout time.Duration
	// MaxConcurrent is the coordinator's max concurrent checkpoints; 0
	// means 1. At-least-once tracks up to this many pending checkpoints.
	MaxConcurrent int
}

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("align: invalid config")

// ErrBadInput is wrapped by every error Step returns: the runtime fed an
// input that cannot happen on a correct ring (a barrier on a blocked or
// ended channel, the same barrier read twice, an id of 0...).
var ErrBadInput = errors.New("align: bad input")

// unaligned reports whether the config allows unaligned checkpoints.
func (c *Config) unaligned() bool {
	return c.Mode == ExactlyOnce && c.AlignmentTimeout >= 0
}

func (c *Config) maxConcurrent() int {
	if c.MaxConcurrent == 0 {
		return 1
	}
	return c.MaxConcurrent
}

func (c *Config) validate() error {
	switch {
	case c.Channels < 1 || c.Channels > MaxChannels:
		return fmt.Errorf("%w: Channels = %d, want 1..%d", ErrInvalidConfig, c.Channels, MaxChannels)
	case c.Mode != ExactlyOnce && c.Mode != AtLeastOnce:
		return fmt.Errorf("%w: unknown Mode %d", ErrInvalidConfig, uint8(c.Mode))
	case c.MaxConcurrent < 0:
		return fmt.Errorf("%w: MaxConcurrent = %d, want >= 0", ErrInvalidConfig, c.MaxConcurrent)
	case c.Mode == AtLeastOnce && c.AlignmentTimeout >= 0:
		return fmt.Errorf("%w: AlignmentTimeout = %v asks for unaligned checkpoints, "+
			"which need exactly-once mode (got at-least-once); use AlwaysAligned",
			ErrInvalidConfig, c.AlignmentTimeout)
	case c.unaligned() && c.maxConcurrent() != 1:
		return fmt.Errorf("%w: AlignmentTimeout = %v asks for unaligned checkpoints, "+
			"which need MaxConcurrent = 1 (got %d)", ErrInvalidConfig, c.AlignmentTimeout, c.MaxConcurrent)
	}
	return nil
}
