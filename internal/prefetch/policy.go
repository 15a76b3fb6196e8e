package prefetch

import (
	"fmt"
	"math"
	"time"
)

// Policy decides, batch by batch, whether a keyed operator asks for its
// state a group ahead of its lookups (cow.Map.PrefetchAhead). Whether that
// pays depends on where the state is when it is read, which no size rule
// tells: on the machine of docs/perf.md, keyed-count's 2 MiB of tables per
// subtask at full load ran up to 4% faster without it in some hours and
// 3% slower in others, while the window's panes lost a third without it.
// So the policy measures.
//
// It is a pure state machine: the operator reports each batch it ran (its
// records, and how long it took when the policy asked for the time) and
// asks before each one whether to prefetch. Most of the time it is settled
// on a choice. Now and then it probes: it runs pairs of runs of probeRun
// batches, one run with and one without prefetching, in alternating order,
// and takes each pair's difference in time per record. It skips only if
// the mean difference favours skipping by more than probeSignificance lets
// chance explain (a one-sided paired t-test): prefetching is the default,
// as it bounds the worst case. Noise — preemption, batches of different
// sizes at light load — widens the differences' spread and makes the
// answer "no difference", and so "prefetch"; so do probes with fewer than
// half their pairs usable (a batch of no records, or whose time reads 0,
// spoils its pair).
//
// A choice that a probe confirms is held twice as long before the next
// probe, up to holdMax; a changed choice is held holdMin. The first probe
// comes after holdMin batches, once the state has been filled.
//
// The zero Policy is ready: it prefetches. A Policy is not safe for
// concurrent use.
type Policy struct {
	skip bool // the settled choice: skip prefetching

	probing bool
	batch   int // the next batch of the probe running
	// The pair's batches so far: their records and time with each choice
	// (index 1: prefetching); a pair with an unusable batch is spoilt.
	records [2]int
	took    [2]time.Duration
	spoilt  bool

	// The usable pairs of this probe (or the last): how many, and the sum
	// and sum of squares of their differences, ns per record prefetching
	// less ns per record skipping (> 0: skipping was faster).
	pairs      int
	sum, sumSq float64

	hold int // batches the settled choice is held for; 0 means holdMin
	held int // batches run since it was settled

	probes, flips int // probes run; probes that changed the choice
}

// Ahead reports whether the next batch should prefetch.
func (p *Policy) Ahead() bool {
	if !p.probing {
		return !p.skip
	}
	return probeArm(p.batch)
}

// probeArm is whether batch b of a probe prefetches. A pair is two runs of
// probeRun batches, one each way; the pairs alternate which runs first, so
// that a drift within a pair (a cache warming up, a neighbour starting)
// favours neither.
func probeArm(b int) bool {
	pair, second := b/(2*probeRun), (b/probeRun)%2 == 1
	return (pair%2 == 0) != second
}

// Timed reports whether the policy wants the next batch's duration.
func (p *Policy) Timed() bool { return p.probing }

// Done reports a batch of n records, run as Ahead said, that took took (0
// if the policy did not ask). It returns true when the batch ended a probe.
func (p *Policy) Done(n int, took time.Duration) bool {
	if !p.probing {
		if p.held++; p.held >= max(p.hold, holdMin) {
			p.probing, p.batch, p.pairs, p.sum, p.sumSq = true, 0, 0, 0, 0
		}
		return false
	}
	b := p.batch
	p.batch++
	if n <= 0 || took <= 0 {
		p.spoilt = true
	}
	arm := 0
	if probeArm(b) {
		arm = 1
	}
	p.records[arm] += n
	p.took[arm] += took
	if p.batch%(2*probeRun) != 0 {
		return false
	}
	if !p.spoilt {
		rate := func(arm int) float64 { return float64(p.took[arm]) / float64(p.records[arm]) }
		d := rate(1) - rate(0)
		p.pairs++
		p.sum += d
		p.sumSq += d * d
	}
	p.records, p.took, p.spoilt = [2]int{}, [2]time.Duration{}, false
	if p.batch < 2*probeRun*probePairs {
		return false
	}
	p.settle(p.skipPays())
	return true
}

// skipPays reports whether the probe's pairs show skipping faster: their
// mean difference is above tCritical standard errors.
func (p *Policy) skipPays() bool {
	mean, se := p.difference()
	if p.pairs < probePairs/2 || mean <= 0 {
		return false
	}
	return mean > tCritical(p.pairs-1)*se
}

// difference returns the mean of the probe's differences and its
// standard error (0 for fewer than two pairs).
func (p *Policy) difference() (mean, se float64) {
	if p.pairs == 0 {
		return 0, 0
	}
	n := float64(p.pairs)
	mean = p.sum / n
	if p.pairs < 2 {
		return mean, 0
	}
	v := max(p.sumSq-n*mean*mean, 0) / (n - 1)
	return mean, math.Sqrt(v / n)
}

// settle ends a probe with choice skip.
func (p *Policy) settle(skip bool) {
	p.probes++
	if skip == p.skip {
		p.hold = min(2*max(p.hold, holdMin), holdMax)
	} else {
		p.flips++
		p.skip, p.hold = skip, holdMin
	}
	p.probing, p.held = false, 0
}

// String describes the policy's state, for tests and diagnostics.
func (p *Policy) String() string {
	choice := "ahead"
	if p.skip {
		choice = "skip"
	}
	if p.probing {
		return fmt.Sprintf("%s, probing: batch %d of %d, %s; %d probes, %d flips",
			choice, p.batch, 2*probeRun*probePairs, p.pairsString(), p.probes, p.flips)
	}
	s := fmt.Sprintf("%s, held %d of %d batches", choice, p.held, max(p.hold, holdMin))
	if p.probes > 0 {
		s += "; last probe " + p.pairsString()
	}
	return s + fmt.Sprintf("; %d probes, %d flips", p.probes, p.flips)
}

// pairsString describes the probe's pairs: the mean difference in ns per
// record (> 0: skipping faster) and its standard error.
func (p *Policy) pairsString() string {
	mean, se := p.difference()
	s := fmt.Sprintf("%d pairs, skip faster by %.3g ± %.3g ns a record", p.pairs, mean, se)
	if p.pairs >= 2 {
		s += fmt.Sprintf(" (needs > %.3g)", tCritical(p.pairs-1)*se)
	}
	return s
}

// tCritical returns the one-sided critical value of Student's t with df
// degrees of freedom at level probeSignificance: the Cornish–Fisher
// expansion of t about the normal quantile, to the fourth order in 1/df
// (within 0.001 of the exact value from 15 degrees of freedom up, which
// skipPays requires).
func tCritical(df int) float64 {
	z := math.Sqrt2 * math.Erfinv(1-2*probeSignificance)
	v := float64(df)
	z2 := z * z
	return z + z*(z2+1)/(4*v) +
		z*((5*z2+16)*z2+3)/(96*v*v) +
		z*(((3*z2+19)*z2+17)*z2-15)/(384*v*v*v) +
		z*((((79*z2+776)*z2+1482)*z2-1920)*z2-945)/(92160*v*v*v*v)
}

// The policy's parameters, each with its reason. None is a time: the
// policy compares two ways of running the same batches on the same core,
// so it behaves the same on any host.
const (
	// probePairs is how many pairs of runs a probe has: enough for the
	// t-test to see a difference of a few percent in the batches of a
	// loaded operator (whose pairs differ by a few percent from one to the
	// next), few enough that a probe lasts about 10 ms there.
	probePairs = 32

	// probeRun is how many batches in a row a probe runs each way. Pairs
	// of single batches misjudged keyed-count on the machine of
	// docs/perf.md: in hours when sustained skipping was 2% slower, they
	// found it faster by 1 ns a record, and the policy skipped. A choice
	// changes what the next batches find in the caches, and a run of
	// batches sees some of that.
	probeRun = 8

	// probeSignificance is the t-test's level: how often equal choices
	// would make the policy skip. Skipping when it does not pay costs up
	// to a third of the operator's speed (the window's panes) for holdMin
	// batches, so the bar is high.
	probeSignificance = 0.01

	// holdMin is how many batches a new choice is held before it is
	// probed again: 16 probes' length, so a probe's batches run the losing
	// choice at most 1/32 of the time.
	holdMin = 16 * 2 * probeRun * probePairs

	// holdMax bounds the doubling of a confirmed choice's hold: a probe at
	// least every 64 holdMin, so a change of load is noticed within that
	// many batches (at full load about ten seconds of a keyed operator),
	// and probes take at most 1/1024 of the batches.
	holdMax = 64 * holdMin
)
