package ringflow_test

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow"
)

// testProcs is the least GOMAXPROCS the package's tests run under: a P
// for each of the (at most 2) workers their jobs ask for, and the spare
// one. With fewer, when a test's checkpoints complete and how much
// backpressure it sees depend on when the runtime preempts a worker (see
// Config.RaiseGOMAXPROCS); the tests of a job without a spare P set
// GOMAXPROCS themselves.
const testProcs = 3

// raiseTestProcs raises GOMAXPROCS to testProcs if it is lower. Called
// before any test runs.
func raiseTestProcs() {
	if runtime.GOMAXPROCS(0) < testProcs {
		runtime.GOMAXPROCS(testProcs)
	}
}

// withGOMAXPROCS sets GOMAXPROCS to n for the rest of the test.
func withGOMAXPROCS(t *testing.T, n int) {
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// usableCPUs returns the CPUs of the process's affinity mask.
func usableCPUs(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// hostJob runs a small job with cfg and returns the GOMAXPROCS its sink
// saw, and the job.
func hostJob(t *testing.T, cfg ringflow.Config) (procs int, job *ringflow.Job) {
	t.Helper()
	job = ringflow.NewJob(cfg)
	var seen atomic.Int64
	ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1, 2, 3})), "sink", func(_ context.Context, _ int64) error {
		seen.Store(int64(runtime.GOMAXPROCS(0)))
		return nil
	})
	run(t, job)
	return int(seen.Load()), job
}

// TestDefaultLeavesGOMAXPROCS checks that a job with the default Config
// leaves GOMAXPROCS as it is and runs one worker fewer than there are Ps
// (the spare one), at most one per CPU and at least one.
func TestDefaultLeavesGOMAXPROCS(t *testing.T) {
	withGOMAXPROCS(t, 2)
	logs := newLogRecorder()
	procs, job := hostJob(t, ringflow.Config{Logger: logs.logger()})
	if procs != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("GOMAXPROCS was %d during the run and %d after; want 2 throughout", procs, runtime.GOMAXPROCS(0))
	}
	if n := len(job.WorkerStats()); n != 1 {
		t.Errorf("%d workers with GOMAXPROCS 2; want 1, leaving a spare P", n)
	}
	for _, r := range logs.records() {
		if r.level >= slog.LevelWarn {
			t.Errorf("logged %v; want no warning for the default workers", r)
		}
	}
}

// TestWorkersWithoutSpareP checks that Workers that leave no spare P run
// as asked, GOMAXPROCS untouched, with a warning that names the setting
// that would fix it.
func TestWorkersWithoutSpareP(t *testing.T) {
	withGOMAXPROCS(t, 2)
	logs := newLogRecorder()
	procs, job := hostJob(t, ringflow.Config{Workers: 2, Logger: logs.logger()})
	if procs != 2 || len(job.WorkerStats()) != 2 {
		t.Errorf("GOMAXPROCS %d and %d workers during the run; want 2 and 2", procs, len(job.WorkerStats()))
	}
	warned := false
	for _, r := range logs.records() {
		warned = warned || r.level == slog.LevelWarn && strings.Contains(r.msg, "RaiseGOMAXPROCS") &&
			r.attrs["workers"].Int64() == 2 && r.attrs["GOMAXPROCS"].Int64() == 2
	}
	if !warned {
		t.Errorf("no warning naming RaiseGOMAXPROCS, 2 workers and GOMAXPROCS 2; logged %v", logs.records())
	}
}

// TestRaiseGOMAXPROCS checks that RaiseGOMAXPROCS gives the run a P per
// worker and a spare one, and sets GOMAXPROCS back after.
func TestRaiseGOMAXPROCS(t *testing.T) {
	withGOMAXPROCS(t, 2)
	procs, job := hostJob(t, ringflow.Config{Workers: 3, RaiseGOMAXPROCS: true})
	if procs != 4 {
		t.Errorf("GOMAXPROCS %d during a run of 3 workers with RaiseGOMAXPROCS; want 4", procs)
	}
	if after := runtime.GOMAXPROCS(0); after != 2 || len(job.WorkerStats()) != 3 {
		t.Errorf("GOMAXPROCS %d after the run and %d workers; want 2 and 3", after, len(job.WorkerStats()))
	}
}

// TestCPUs checks that Config.CPUs sets the default number of workers and
// the CPU each is pinned to.
func TestCPUs(t *testing.T) {
	withGOMAXPROCS(t, 4)
	usable := usableCPUs(t)
	cpu := usable[len(usable)-1]
	job := ringflow.NewJob(ringflow.Config{CPUs: []int{cpu}})
	var masks [][]int
	ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1, 2, 3})), "sink", func(_ context.Context, _ int64) error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		var mask []int
		for c := range len(set) * 64 {
			if set.IsSet(c) {
				mask = append(mask, c)
			}
		}
		masks = append(masks, mask)
		return nil
	})
	run(t, job)
	if n := len(job.WorkerStats()); n != 1 {
		t.Errorf("%d workers for CPUs [%d]; want 1", n, cpu)
	}
	for _, m := range masks {
		if !slices.Equal(m, []int{cpu}) {
			t.Fatalf("the sink ran on a thread whose affinity is %v; want [%d]", m, cpu)
		}
	}
	if len(masks) != 3 {
		t.Fatalf("the sink saw %d records, want 3", len(masks))
	}
}

// TestBadCPUs checks that CPUs the process may not use, a CPU named twice,
// and CPUs with NoPin are each refused as a ConfigError for CPUs.
func TestBadCPUs(t *testing.T) {
	usable := usableCPUs(t)
	for name, cfg := range map[string]ringflow.Config{
		"negative":   {CPUs: []int{-1}},
		"not usable": {CPUs: []int{usable[len(usable)-1] + 1}},
		"twice":      {CPUs: []int{usable[0], usable[0]}},
		"with NoPin": {CPUs: []int{usable[0]}, NoPin: true},
	} {
		t.Run(name, func(t *testing.T) {
			job := ringflow.NewJob(cfg)
			ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1})), "sink", func(_ context.Context, _ int64) error { return nil })
			errs := ringflow.ConfigErrors(job.Run(context.Background()))
			if len(errs) != 1 || errs[0].Field != "CPUs" {
				t.Fatalf("config errors %v; want one for CPUs", errs)
			}
			t.Log(errs[0])
		})
	}
}
