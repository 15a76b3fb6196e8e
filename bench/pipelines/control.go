package pipelines

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// UntilStopped is a Config.Records for a run that ends when its Control
// stops it: more records than any run generates.
const UntilStopped = 1 << 62

// Control steers a running ringflow pipeline from another goroutine
// (Config.Control): it fails the job on demand, and ends the sources so
// that the job finishes with all its output committed. A long run (dfbench
// soak) uses it to fail its job at chosen times and to end it in a state
// whose output can be checked. The zero value is ready to use; the
// baseline ignores it.
//
// NB: a Control adds the "fail" map behind the (left) source whether or
// not Fail is ever called, so that every run of one configuration has the
// same operators, and a run killed and resumed on its state directory
// restores into the graph that wrote it.
type Control struct {
	fail     atomic.Bool  // a failure is due: the next record behind the source fails its task
	stop     atomic.Bool  // the sources end at their next read
	failures atomic.Int64 // failures injected so far
	mu       struct {
		sync.Mutex
		ends map[int]uint64 // by (left) source subtask: records generated when it stopped
	}
}

// Fail makes the next record behind the (left) source fail its task with
// a panic, once; the job then restores its latest complete checkpoint in
// place if its restart strategy allows. A second Fail before that record
// comes makes no second failure.
func (c *Control) Fail() { c.fail.Store(true) }

// Failures returns the number of failures Fail has injected so far.
func (c *Control) Failures() int { return int(c.failures.Load()) }

// Stop ends every source at its next read, as if its input ended there:
// the job then takes its final checkpoint, commits all its output, and
// its Run returns. A source that restarts after Stop (a restore after a
// failure) ends at the position it restored.
func (c *Control) Stop() { c.stop.Store(true) }

// Ends returns, after a run that Stop ended, how many records each subtask
// of the (left) source had generated when it ended, by subtask; entries of
// subtasks that have not ended are 0. The committed output is exactly the
// effect of those records: subtask i generated sequence numbers i, i+P,
// ..., below i + Ends()[i]·P.
func (c *Control) Ends(parallelism int) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ends := make([]uint64, parallelism)
	for sub, n := range c.mu.ends {
		if sub < parallelism {
			ends[sub] = n
		}
	}
	return ends
}

// ended records that source subtask sub ended after generating n records.
func (c *Control) ended(sub int, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.ends == nil {
		c.mu.ends = map[int]uint64{}
	}
	c.mu.ends[sub] = n
}

// failNow reports whether the record at hand is to fail its task, and
// counts the failure if so.
func (c *Control) failNow() (failure int64, ok bool) {
	// NB: the Load keeps the common path to one read of a line that is
	// written only when a failure is asked for.
	if !c.fail.Load() || !c.fail.CompareAndSwap(true, false) {
		return 0, false
	}
	return c.failures.Add(1), true
}

// stopSource ends source subtask s if the Control says so, recording
// where; s is then exhausted.
func (c *Control) stopSource(s *engineSource) {
	if c == nil || !c.stop.Load() || s.exhausted() {
		return
	}
	s.bounded, s.limit = true, s.emitted
	if s.first == 0 {
		c.ended(int(s.sub), s.emitted)
	}
}

// InjectedMark is in the panic message of every failure Control.Fail
// injects, and so in the job's error and log lines about it.
const InjectedMark = "injected on demand (Control.Fail)"

func injectedFailure(n int64) string {
	return fmt.Sprintf("dfbench: failure %d %s", n, InjectedMark)
}
