package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/bench/hiccups"
	"github.com/ringflow/ringflow/internal/affinity"
)

func TestHiccupsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dfbench([]string{"hiccups", "--duration", "50ms", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res hiccups.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v in %q", err, stdout.String())
	}
	cpus, _ := affinity.Usable()
	if len(res.CPUs) != len(cpus) {
		t.Errorf("%d CPUs measured, want %d", len(res.CPUs), len(cpus))
	}
	for _, c := range res.CPUs {
		if c.Loops == 0 || c.Elapsed.Milliseconds() < 50 {
			t.Errorf("CPU %d: %d loops in %v", c.CPU, c.Loops, c.Elapsed)
		}
	}
}

func TestHiccupsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--duration", "0s"}, {"--threshold", "-1us"}, {"--duration", "soon"}} {
		var stdout, stderr bytes.Buffer
		if code := dfbench(append([]string{"hiccups"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: %q does not name the flag", args, stderr.String())
		}
	}
}
