package sched

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/scenario"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*/*.txt")

// TestBackgroundScenarios runs the narrated scenarios of the background
// policy in testdata/background/*.txt. Commands:
//
//	observe now=D busy=D    (the worker's cumulative time in rounds with progress)
//	round now=D [progress=B] [resting=B] [running=B] [spare=B] [patient-from=D] [cpu=D]
//	drained                 (the worker's last pending job ended)
//	state
//
// round prints the action and, for a slice, its length; cpu is the
// thread's CPU clock the worker reads for a busy slice (0: unknown).
func TestBackgroundScenarios(t *testing.T) {
	scenario.RunGlob(t, "testdata/background/*.txt", *rewrite, func() scenario.Interpreter {
		var p bgPolicy
		return func(t *testing.T, c scenario.Command) []string { return runBackgroundCommand(t, &p, c) }
	})
}

func runBackgroundCommand(t *testing.T, p *bgPolicy, c scenario.Command) []string {
	switch c.Name {
	case "observe":
		c.Allow(t, "now busy")
		if !p.observe(c.Duration(t, "now", 0), c.Duration(t, "busy", 0)) {
			return []string{"-"}
		}
		return []string{fmt.Sprintf("mean idle=%.2f saturated=%v", p.idleShare(), p.saturated())}
	case "round":
		c.Allow(t, "now progress resting running spare patient-from cpu")
		r := bgRound{now: c.Duration(t, "now", 0), progress: c.Bool(t, "progress", false),
			resting: c.Bool(t, "resting", false), running: c.Bool(t, "running", false), spare: c.Bool(t, "spare", false),
			patientFrom: c.Duration(t, "patient-from", 0)}
		a := p.next(r)
		switch a {
		case bgNone, bgOffload:
			return []string{a.String()}
		}
		return []string{fmt.Sprintf("%v %v", a, p.slice(r, a, c.Duration(t, "cpu", 0)))}
	case "drained":
		c.Allow(t, "")
		p.drained()
		return []string{"ok"}
	case "state":
		c.Allow(t, "")
		last, cpu := "never", "after-idle"
		if p.lastSet {
			last = time.Duration(p.last).String()
		}
		if p.lastCPU != afterIdle {
			cpu = time.Duration(p.lastCPU).String()
		}
		return []string{fmt.Sprintf("mean idle=%.2f saturated=%v last-slice=%s last-cpu=%s", p.idleShare(), p.saturated(), last, cpu)}
	}
	t.Fatalf("%s: unknown command %q", c.Where, c.Name)
	return nil
}
