package prefetch

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/scenario"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt")

// TestPolicyScenarios runs the narrated golden scenarios of the prefetch
// policy in testdata/*.txt. Commands:
//
//	batch n=N took=D     one batch of N records that took D; prints the
//	                     choice it ran with, whether it was timed, and the
//	                     decision if it ended a probe
//	run batches=N n=N ahead=D skip=D
//	                     N batches, each taking D with and D without
//	                     prefetching; prints how many ran each way, how
//	                     many were timed, and each probe's decision
//	probe ahead=D skip=D [spread=D] [n=N] [slow=B] [by=D] [empty=K]
//	                     batches until a probe starts, then the whole
//	                     probe, of batches
//	                     of N records (1000) taking D with and D without
//	                     prefetching, each plus a fixed pseudo-random share
//	                     of ±spread, batch B (from 0) slower by D, and
//	                     the last batch of the first K pairs empty;
//	                     prints the first two pairs' arms and the decision
//	state                the policy's String
//	constants            the parameters, and the sign test's threshold
//
// With -rewrite the expected output is regenerated; the comments and
// commands are kept.
func TestPolicyScenarios(t *testing.T) {
	scenario.RunGlob(t, "testdata/policy_*.txt", *rewrite, func() scenario.Interpreter {
		var p Policy
		return func(t *testing.T, c scenario.Command) []string { return runPolicy(t, &p, c) }
	})
}

func runPolicy(t *testing.T, p *Policy, c scenario.Command) []string {
	switch c.Name {
	case "batch":
		c.Allow(t, "n took")
		return []string{batchLine(p, c.Int(t, "n", 0), c.Duration(t, "took", 0))}
	case "run":
		c.Allow(t, "batches n ahead skip")
		return runBatches(p, c.Int(t, "batches", 0), c.Int(t, "n", 0), c.Duration(t, "ahead", 0), c.Duration(t, "skip", 0))
	case "probe":
		c.Allow(t, "ahead skip spread n slow by empty")
		return []string{runProbe(t, p, c)}
	case "state":
		c.Allow(t, "")
		return []string{p.String()}
	case "constants":
		c.Allow(t, "")
		return []string{
			fmt.Sprintf("probePairs=%d probeSignificance=%v tCritical(%d)=%.4f tCritical(%d)=%.4f",
				probePairs, probeSignificance, probePairs-1, tCritical(probePairs-1), probePairs/2-1, tCritical(probePairs/2-1)),
			fmt.Sprintf("probeRun=%d holdMin=%d holdMax=%d", probeRun, holdMin, holdMax),
		}
	}
	t.Fatalf("%s: unknown command %q", c.Where, c.Name)
	return nil
}

// runs describes a sequence of arms as runs: "ahead×8 skip×8".
func runs(arms []string) string {
	var b strings.Builder
	for i := 0; i < len(arms); {
		j := i
		for j < len(arms) && arms[j] == arms[i] {
			j++
		}
		fmt.Fprintf(&b, "%s×%d ", arms[i], j-i)
		i = j
	}
	return b.String()
}

func arm(ahead bool) string {
	if ahead {
		return "ahead"
	}
	return "skip"
}

// batchLine runs one batch and describes it.
func batchLine(p *Policy, n int, took time.Duration) string {
	ahead, timed := p.Ahead(), p.Timed()
	if !timed {
		took = 0
	}
	line := arm(ahead)
	if timed {
		line += " timed"
	}
	if p.Done(n, took) {
		line += "; probe ends: " + p.String()
	}
	return line
}

// runBatches runs batches of n records, each taking ahead or skip.
func runBatches(p *Policy, batches, n int, ahead, skip time.Duration) []string {
	var aheads, skips, timed int
	var out []string
	for i := 0; i < batches; i++ {
		took := skip
		if p.Ahead() {
			aheads++
			took = ahead
		} else {
			skips++
		}
		if !p.Timed() {
			took = 0
		} else {
			timed++
		}
		if p.Done(n, took) {
			out = append(out, fmt.Sprintf("batch %d: probe ends: %s", i, p.String()))
		}
	}
	return append(out, fmt.Sprintf("ran %d ahead, %d skip, %d timed", aheads, skips, timed))
}

// runProbe runs a whole probe; see the probe command.
func runProbe(t *testing.T, p *Policy, c scenario.Command) string {
	waited := 0
	for ; !p.probing || p.batch != 0; waited++ {
		p.Done(1000, 0) // untimed: a probe running ends undecided
	}
	ahead, skip, spread := c.Duration(t, "ahead", 0), c.Duration(t, "skip", 0), c.Duration(t, "spread", 0)
	n, slow, by, empty := c.Int(t, "n", 1000), c.Int(t, "slow", -1), c.Duration(t, "by", 0), c.Int(t, "empty", 0)
	var arms []string
	for b := 0; b < 2*probeRun*probePairs; b++ {
		on := p.Ahead()
		if b < 4*probeRun {
			arms = append(arms, arm(on))
		}
		took := skip
		if on {
			took = ahead
		}
		// A share in [-1, 1] that looks random and is the same each run.
		share := float64((b*7919)%17)/8 - 1
		took += time.Duration(share * float64(spread))
		if b == slow {
			took += by
		}
		records := n
		if b%(2*probeRun) == 2*probeRun-1 && b/(2*probeRun) < empty {
			records = 0
		}
		if ended := p.Done(records, took); ended != (b == 2*probeRun*probePairs-1) {
			t.Fatalf("%s: Done reported %v at batch %d", c.Where, ended, b)
		}
	}
	return fmt.Sprintf("after %d batches, the first two pairs %s…\n→ %s", waited, runs(arms), p.String())
}

// TestTCritical checks the expansion against tables of Student's t at the
// 0.99 quantile.
func TestTCritical(t *testing.T) {
	if probeSignificance != 0.01 {
		t.Skip("the table is for probeSignificance 0.01")
	}
	for df, want := range map[int]float64{15: 2.6025, 20: 2.5280, 31: 2.4528, 60: 2.3901, 120: 2.3578} {
		if got := tCritical(df); math.Abs(got-want) > 0.001 {
			t.Errorf("tCritical(%d) = %.4f, want %.4f", df, got, want)
		}
	}
}
