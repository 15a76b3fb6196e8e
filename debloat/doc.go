// Package debloat sizes the data in flight on a consumer's input channels:
// it is the controller of buffer debloating.
//
// Under backpressure every ring fills to its capacity, and a checkpoint
// barrier written behind that data waits until the consumer has drained it
// all: at a slow consumer, seconds. Debloating bounds what each ring may
// hold (ring.Reader.SetLimit) to what the consumer drains in a target time,
// so that a barrier waits about that long, and the memory in flight
// follows the throughput rather than the configured capacity. It is Flink's
// buffer debloating, applied to rings.
//
// The controller is a deterministic core: no goroutines, no clock reads, no
// rings. The consumer's task feeds it what it measured and applies the
// limits when they change:
//
//	consumer task                                    Controller
//	-------------                                    ----------
//	Observe(now, busy, consumed)  ─────────────────▶  within a period: one comparison
//	                                                  at its end: rates, then limits
//	changed? ◀──────────────────────────────────────  true if a limit moved
//	ring(ch).Reader().SetLimit(int(c.Limit(ch)))  ──▶ the producer of ch sees it
//
// # Rules
//
// Every constant comes from Config.Target or is a share; see params.go.
//
// Period. The controller measures once a period, Target/4: the data in
// flight drains in about a target, so the limits must follow the rate
// faster than that. The first observation starts the first period; an
// observation at least a period after the start of the current one ends
// it (a longer gap counts as one period) and starts the next. Observations
// within a period cost two comparisons: the task may observe at every
// round.
//
// Measured rate. A channel's measured rate is the bytes it delivered in the
// period over the consumer's busy time in it: time it had input to process
// or was blocked on its output. Busy time, because under backpressure, the
// case the limit is for, the consumer is busy all the time and busy time
// is wall time; when it is not, its rate per busy second is how fast it
// drains data that waits, and that is what a barrier behind the data waits
// for. All channels share the consumer's busy time, so their limits add up
// to what it drains in a target.
//
// Idle periods. A period in which the consumer was busy less than a quarter
// of the time (minBusyShare) is not measured: the rates stay. A consumer
// that idle is much faster than its input, its rings are nearly empty
// whatever their limits, and the few frames it drained say little about
// how fast it drains a full ring. So an idle consumer does not shrink its
// rings, and a consumer faster than its producer keeps a large limit (Max,
// if it was never measured) and is not starved when the producer speeds
// up.
//
// Smoothing. rate += alpha·(measured − rate), alpha = 1/4 a period, so that
// one period's noise moves the limit little while a lasting change is
// followed within a few targets:
//
//	after       1 target   2 targets   3 targets
//	followed    68%        90%         97%
//
// The first measurement sets the rate directly: before it there is nothing
// to smooth, and the limits are Config.Start (Max, no limit, if unset).
// ringflow starts them at Min: what a producer writes under a higher start
// stays in the ring until the consumer drains it, however low the limit
// then falls, so a slow consumer's rings would fill once at every start
// and every restore; a fast consumer is held back for one period only.
//
// Limit. limit = rate × Target clamped to [Min, Max]: the bytes the
// consumer drains in Target of busy time. A limit moves only when the new
// value differs from it by more than a quarter of it (threshold, as in
// Flink), or reaches Min or Max: the producer reloads the limit's word when
// it changes, so small moves would only cost it cache misses. (So a first
// measurement within a quarter of Max leaves a channel unlimited.)
//
// Consequences. A burst, one period at ten times the rate, raises the rate
// by alpha of its jump (to 3.25 times), and the limit with it, and decays
// afterwards. A stalled consumer, busy but consuming nothing (blocked on
// its output), measures 0: its rates fall by a quarter a period, 68% a
// target, and its limits reach Min from ten times Min in 9 periods (a
// little over two targets), from a hundred times in 17. So upstream stops
// filling rings whose consumer cannot drain them.
//
// Bad input. A clock, a busy time or a consumed count that goes back (a
// clock step, a counter reset on restore) restarts the period without
// measuring it. Observe with a consumed slice of the wrong length panics:
// that is a bug in the caller, not an input.
//
// testdata/*.txt are the narrated golden scenarios: a first measurement,
// a step down and up, a burst, a stall, an idle consumer, the clamps, the
// threshold, channels sharing a consumer, and counts that go back. Each
// fails if the rule it shows breaks.
package debloat
