package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// sinkJob counts records per key into a file sink: "key:count" lines. Its
// keys differ with offset, so that two jobs' outputs can be told apart.
func sinkJob(stateDir string, out func() ringflow.TwoPhaseSink[string], offset uint64, rerun bool) *ringflow.Job {
	cfg := ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 64, RerunFinished: rerun, Logger: newLogRecorder().logger()}
	if stateDir != "" {
		cfg.Checkpoint = ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: stateDir}
	}
	job := ringflow.NewJob(cfg)
	src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) uint64 { return offset + i%10 },
		ringflow.GenOptions{Count: 10_000}))
	counts := ringflow.Reduce(ringflow.KeyBy(ringflow.Map(src, "one", func(k uint64) [2]uint64 { return [2]uint64{k, 1} }),
		func(kc [2]uint64) uint64 { return kc[0] }), "count", func(a, b [2]uint64) [2]uint64 { return [2]uint64{a[0], a[1] + b[1]} })
	lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) })
	ringflow.TxnSink(lines, "out", out)
	return job
}

func sinkLines(offset uint64) []string {
	var lines []string
	for k := range uint64(10) {
		for c := range uint64(1000) {
			lines = append(lines, fmt.Sprintf("%d:%d", offset+k, c+1))
		}
	}
	return sortedCopy(lines)
}

// TestStaleSinkDirectory checks that a file sink refuses a directory that
// holds another job's output (a job on another state directory, a job
// without checkpoints, or files no job claims), leaving that output as it
// was, and that FileSinkOptions.Fresh replaces it.
func TestStaleSinkDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	run(t, sinkJob(filepath.Join(dir, "state1"), ringflow.FileSink(out), 0, false))
	first := readParts(t, out)
	diffRows(t, first, sinkLines(0))

	for _, c := range []struct {
		name     string
		stateDir string
	}{{"another state directory", filepath.Join(dir, "state2")}, {"no checkpoints", ""}} {
		err := sinkJob(c.stateDir, ringflow.FileSink(out), 100, false).Run(context.Background())
		if !errors.Is(err, ringflow.ErrSinkOwned) {
			t.Fatalf("%s: Run returned %v; want ErrSinkOwned", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
		diffRows(t, readParts(t, out), first)
	}

	job := sinkJob(filepath.Join(dir, "state3"), ringflow.FileSinkWith(out, ringflow.FileSinkOptions{Fresh: true}), 200, false)
	run(t, job)
	diffRows(t, readParts(t, out), sinkLines(200))

	// Output written before directories had owners.
	old := filepath.Join(dir, "old")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "part-0-0"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := sinkJob(filepath.Join(dir, "state4"), ringflow.FileSink(old), 0, false).Run(context.Background())
	if !errors.Is(err, ringflow.ErrSinkOwned) {
		t.Fatalf("a directory of unclaimed output: Run returned %v; want ErrSinkOwned", err)
	}
	if got := readParts(t, old); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("unclaimed output now %q; want it untouched", got)
	}
}

// TestFinishedJobRerun checks that a job started again on the state
// directory of a finished run reports ErrFinished and changes nothing;
// that RerunFinished runs it again from scratch, as a new run, whose sink
// refuses the first run's output unless told to start afresh; and that
// the new run's output is exact, not added to the first.
func TestFinishedJobRerun(t *testing.T) {
	dir := t.TempDir()
	state, out := filepath.Join(dir, "state"), filepath.Join(dir, "out")
	first := sinkJob(state, ringflow.FileSink(out), 0, false)
	run(t, first)
	diffRows(t, readParts(t, out), sinkLines(0))

	err := sinkJob(state, ringflow.FileSink(out), 0, false).Run(context.Background())
	if !errors.Is(err, ringflow.ErrFinished) {
		t.Fatalf("Run on a finished state directory returned %v; want ErrFinished", err)
	}
	t.Logf("%v", err)
	diffRows(t, readParts(t, out), sinkLines(0))

	err = sinkJob(state, ringflow.FileSink(out), 0, true).Run(context.Background())
	if !errors.Is(err, ringflow.ErrSinkOwned) {
		t.Fatalf("a rerun into the first run's sink directory returned %v; want ErrSinkOwned", err)
	}
	diffRows(t, readParts(t, out), sinkLines(0))

	again := sinkJob(state, ringflow.FileSinkWith(out, ringflow.FileSinkOptions{Fresh: true}), 0, true)
	run(t, again)
	if again.RestoredFrom() != 0 {
		t.Fatalf("the rerun restored checkpoint %d; want a start from scratch", again.RestoredFrom())
	}
	diffRows(t, readParts(t, out), sinkLines(0))
}
