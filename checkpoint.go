package ringflow

import (
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
	// SavepointDir is where Job.Savepoint and Job.StopWithSavepoint write
	// savepoints, each into a new directory of its own in it (Flink's
	// state.savepoints.dir).
	SavepointDir string
	// NoRaise leaves a subtask's synchronous part of a snapshot in the
	// fair scheduling class. By default its thread is raised to the
	// real-time class (SCHED_FIFO, lowest priority) for the part's few
	// microseconds, so that no other thread of the machine's fair class —
	// another job's, the runtime's, the checkpoint's own write-out — takes
	// its core in the middle of it and stretches the stop in processing
	// to a scheduler's turn. That needs CAP_SYS_NICE or an RLIMIT_RTPRIO
	// above 0; without either the part runs unraised, as with NoRaise.
	NoRaise bool
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

// validate returns every problem of the checkpoint configuration, each a
// *ConfigError.
func (c *CheckpointConfig) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configErrorf("Checkpoint."+field, format, args...))
	}
	if c.Mode != ExactlyOnce && c.Mode != AtLeastOnce {
		bad("Mode", "%d: want ExactlyOnce or AtLeastOnce", int(c.Mode))
	}
	if c.Unaligned && c.AlignmentTimeout != 0 {
		bad("AlignmentTimeout", "%v with Unaligned: unaligned checkpoints never align, so they have no alignment timeout (set one or the other)",
			c.AlignmentTimeout)
	}
	if c.AlignmentTimeout < 0 {
		bad("AlignmentTimeout", "%v: must not be negative (0 never switches to unaligned)", c.AlignmentTimeout)
	}
	if c.Interval < 0 {
		bad("Interval", "%v: must not be negative (0 turns checkpoints off)", c.Interval)
	}
	if !c.enabled() {
		if c.SavepointDir != "" {
			bad("SavepointDir", "%q without an Interval: a savepoint is taken as a checkpoint (set Checkpoint.Interval and StateDir)",
				c.SavepointDir)
		}
		if c.StateDir != "" {
			bad("StateDir", "%q without an Interval: the job would take no checkpoints and never use the directory (set Checkpoint.Interval)",
				c.StateDir)
		}
		return errs
	}
	if c.StateDir == "" {
		bad("StateDir", "checkpoints (Interval %v) need a state directory", c.Interval)
	}
	if c.MinPause < 0 {
		bad("MinPause", "%v: must not be negative", c.MinPause)
	}
	if c.Timeout < 0 {
		bad("Timeout", "%v: must not be negative", c.Timeout)
	}
	if c.MaxConcurrent < 1 {
		bad("MaxConcurrent", "%d: must be at least 1", c.MaxConcurrent)
	}
	if c.TolerableFailures < 0 {
		bad("TolerableFailures", "%d: must not be negative", c.TolerableFailures)
	}
	if c.Retained < 1 {
		bad("Retained", "%d: must be at least 1", c.Retained)
	}
	if c.AlignmentTimeout > 0 && c.Timeout > 0 && c.AlignmentTimeout >= c.Timeout {
		bad("AlignmentTimeout", "%v is not below Timeout %v: a checkpoint would time out before it switched to unaligned",
			c.AlignmentTimeout, c.Timeout)
	}
	if c.alignTimeout() >= 0 {
		if c.Mode == AtLeastOnce {
			bad("Mode", "at-least-once with unaligned checkpoints (Unaligned or an AlignmentTimeout): unaligned checkpoints are exactly-once")
		}
		if c.MaxConcurrent > 1 {
			bad("MaxConcurrent", "%d with unaligned checkpoints (Unaligned or an AlignmentTimeout): must be 1", c.MaxConcurrent)
		}
	}
	return errs
}
