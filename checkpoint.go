package ringflow

import (
	"errors"
	"fmt"
	"time"

	"github.com/ringflow/ringflow/align"
	"github.com/ringflow/ringflow/snapshot"
)

// CheckpointMode is the consistency a checkpoint gives.
type CheckpointMode int

const (
	// ExactlyOnce aligns barriers: every record affects state exactly once.
	ExactlyOnce CheckpointMode = iota
	// AtLeastOnce never blocks an input: after a restore, records that were
	// in flight during the checkpoint may affect state twice.
	AtLeastOnce
)

func (m CheckpointMode) String() string {
	if m == AtLeastOnce {
		return "at-least-once"
	}
	return "exactly-once"
}

// CheckpointConfig configures checkpoints, with Flink's names and meanings.
// Checkpoints are on when Interval is positive.
type CheckpointConfig struct {
	// Interval between checkpoint triggers; 0 turns checkpoints off.
	Interval time.Duration
	// MinPause is the least time between the end of one checkpoint and the
	// trigger of the next.
	MinPause time.Duration
	// Timeout aborts a checkpoint that has not completed this long after
	// its trigger; default 10 minutes.
	Timeout time.Duration
	// MaxConcurrent is the most checkpoints in progress at once; default 1.
	MaxConcurrent int
	// TolerableFailures is how many checkpoint failures in a row the job
	// tolerates before it fails; default 0 (Flink's default).
	TolerableFailures int
	// Retained is how many complete checkpoints are kept; default 3.
	Retained int
	// Mode is exactly-once (default) or at-least-once.
	Mode CheckpointMode
	// StateDir is the directory of the checkpoint store. A job started on
	// a directory holding checkpoints resumes from the latest complete one.
	StateDir string
	// AlignmentTimeout switches an aligned checkpoint to unaligned, subtask
	// by subtask, once this long has passed since its trigger; 0 never
	// switches.
	AlignmentTimeout time.Duration
	// Unaligned makes every checkpoint unaligned from the start (Flink's
	// aligned-checkpoint-timeout of 0).
	Unaligned bool
	// store options for tests (fault injection).
	storeOptions snapshot.Options
}

// RestartStrategy says what the job does when a task fails: restore the
// latest complete checkpoint in place and go on, up to Attempts times,
// waiting Delay before each.
type RestartStrategy struct {
	Attempts int
	Delay    time.Duration
}

func (c *CheckpointConfig) enabled() bool { return c.Interval > 0 }

func (c CheckpointConfig) withDefaults() CheckpointConfig {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 1
	}
	if c.Retained == 0 {
		c.Retained = snapshot.DefaultRetained
	}
	return c
}

// alignTimeout is the aligner's form of the alignment settings.
func (c *CheckpointConfig) alignTimeout() time.Duration {
	switch {
	case c.Unaligned:
		return 0
	case c.AlignmentTimeout > 0:
		return c.AlignmentTimeout
	}
	return align.AlwaysAligned
}

func (c *CheckpointConfig) validate() error {
	if !c.enabled() {
		return nil
	}
	var errs []error
	if c.StateDir == "" {
		errs = append(errs, errors.New("checkpoints need a StateDir"))
	}
	if c.MinPause < 0 || c.Timeout < 0 || c.MaxConcurrent < 1 || c.TolerableFailures < 0 || c.Retained < 1 {
		errs = append(errs, fmt.Errorf("min pause %v, timeout %v, max concurrent %d, tolerable failures %d, retained %d: out of range",
			c.MinPause, c.Timeout, c.MaxConcurrent, c.TolerableFailures, c.Retained))
	}
	if c.alignTimeout() >= 0 {
		if c.Mode != ExactlyOnce {
			errs = append(errs, errors.New("unaligned checkpoints (an alignment timeout) need exactly-once mode"))
		}
		if c.MaxConcurrent != 1 {
			errs = append(errs, errors.New("unaligned checkpoints (an alignment timeout) need max concurrent checkpoints 1"))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ringflow: checkpoint config: %w", errors.Join(errs...))
	}
	return nil
}
