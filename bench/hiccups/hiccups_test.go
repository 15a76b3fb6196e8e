package hiccups

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

func TestAddClassifies(t *testing.T) {
	const us = time.Microsecond
	var c CPU
	for _, g := range []struct{ wall, cpu time.Duration }{
		{5 * us, 5 * us},     // under the threshold: not a gap
		{30 * us, 30 * us},   // on its core
		{150 * us, 149 * us}, // on its core, over 100µs
		{40 * us, 19 * us},   // the clock counted under half: off its core
		{3 * time.Millisecond, 10 * us},
		{20 * us, 10 * us}, // exactly half: on its core
	} {
		c.Add(g.wall, g.cpu, 20*us)
	}
	wantOn := Gaps{Count: 3, Total: 200 * us, Max: 150 * us, Over100us: 1}
	wantOff := Gaps{Count: 2, Total: 3040 * us, Max: 3 * time.Millisecond, Over100us: 1}
	if c.On != wantOn {
		t.Errorf("on cpu %+v, want %+v", c.On, wantOn)
	}
	if c.Off != wantOff {
		t.Errorf("off cpu %+v, want %+v", c.Off, wantOff)
	}
}

func TestParseSteal(t *testing.T) {
	got, err := parseSteal("cpu  4421955 8899 451351 1336634 27373 0 12878 2230 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil || got != 22300*time.Millisecond {
		t.Errorf("parseSteal = %v, %v; want 22.3s", got, err)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x 9"} {
		if _, err := parseSteal(bad); err == nil || !strings.Contains(err.Error(), "/proc/stat") {
			t.Errorf("parseSteal(%q): error %v, want one naming /proc/stat", bad, err)
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{{}, {Duration: time.Second, Threshold: -1}} {
		if _, err := Run(c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		}
	}
}

// TestCompetitorIsOffCPU pins a spinning thread to the CPU being measured:
// the kernel shares the CPU between the two, so the measuring thread must
// see gaps off its core that add up to a good part of the run. Without the
// CPU clock's reading (every gap on its core) or without the gaps (none
// counted), it fails.
func TestCompetitorIsOffCPU(t *testing.T) {
	cpus, err := affinity.Usable()
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpus[len(cpus)-1]
	var stop atomic.Bool
	pinned := make(chan error)
	go func() {
		unpin, err := affinity.Pin(cpu)
		pinned <- err
		if err != nil {
			return
		}
		defer unpin()
		for !stop.Load() {
		}
	}()
	if err := <-pinned; err != nil {
		t.Fatal(err)
	}
	res, err := Run(Config{Duration: 400 * time.Millisecond, CPUs: []int{cpu}})
	stop.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	c := res.CPUs[0]
	t.Logf("CPU %d: %d loops in %v; off cpu %+v; on cpu %+v", c.CPU, c.Loops, c.Elapsed, c.Off, c.On)
	if c.Off.Count == 0 || c.Off.Total < c.Elapsed/5 {
		t.Errorf("with a spinning thread on its CPU, off cpu %v of %v, want at least a fifth", c.Off.Total, c.Elapsed)
	}
	if c.Loops == 0 || c.Elapsed < 400*time.Millisecond {
		t.Errorf("%d loops in %v", c.Loops, c.Elapsed)
	}
}
