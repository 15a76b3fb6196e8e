package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// rescaleCluster is process p of procs of the distributed job, started
// from the savepoints from (none: as it stands).
func rescaleCluster(brokers []string, p, procs int, from []string, logger *slog.Logger) *ringflow.Cluster {
	return &ringflow.Cluster{JobID: distJobID, Process: p, Processes: procs, Partitions: 12, RestoreFrom: from,
		Exchange: Exchange(ExchangeConfig{Brokers: brokers, Logger: logger})}
}

// rescaleStage runs the job as procs processes in this process, each of
// parallelism par, process p on the state directory dir/<stage>-<p>,
// started from the savepoints from; after stopAfter (if not 0) of the
// first completed checkpoint it stops every process with a savepoint and
// returns the savepoints, else it waits for all to end.
func rescaleStage(t *testing.T, brokers []string, dir string, stage, procs, par int, from []string, stopAfter time.Duration) []string {
	t.Helper()
	logger := testLogger(t)
	jobs := make([]*ringflow.Job, procs)
	errs := make(chan error, procs)
	checkpointed := make(chan struct{}, procs)
	for p := range procs {
		jobs[p] = distJob(distJobOpts{brokers: brokers, stateDir: filepath.Join(dir, fmt.Sprintf("%d-%d", stage, p)), out: "out",
			cluster: rescaleCluster(brokers, p, procs, from, logger), logger: logger, parallelism: par,
			check:      func() { spin(300 * time.Microsecond) },
			savepoints: filepath.Join(dir, fmt.Sprintf("savepoints-%d", stage)),
			events: &ringflow.EventListener{CheckpointCompleted: func(ringflow.CheckpointStats) {
				select {
				case checkpointed <- struct{}{}:
				default:
				}
			}}})
		go func() { errs <- jobs[p].Run(context.Background()) }()
	}
	if stopAfter == 0 {
		for range procs {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatalf("stage %d: %v", stage, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("stage %d: a process still runs after a minute", stage)
			}
		}
		return nil
	}
	select {
	case <-checkpointed:
	case <-time.After(30 * time.Second):
		t.Fatalf("stage %d: no checkpoint in 30 s", stage)
	}
	time.Sleep(stopAfter)
	type saved struct {
		p    int
		path string
		err  error
	}
	done := make(chan saved, procs)
	for p, job := range jobs {
		go func() {
			path, err := job.StopWithSavepoint(context.Background())
			done <- saved{p, path, err}
		}()
	}
	paths := make([]string, procs)
	for range procs {
		s := <-done
		if s.err != nil {
			t.Fatalf("stage %d: process %d: stop with a savepoint: %v (did it finish first? the stage's input is too short)", stage, s.p, s.err)
		}
		paths[s.p] = s.path
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Fatalf("stage %d: %v", stage, err)
		}
	}
	return paths
}

// cutGenerations counts the data records of a repartition topic, as a
// read_committed consumer sees them, by the layout generation of their
// producers (see cluster_exchange.go in package ringflow).
func cutGenerations(t *testing.T, brokers []string, topic string) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	for _, v := range readTopic(t, brokers, topic, true) {
		switch {
		case v[0] == 'd':
			out[0]++
		case v[0] == 'D':
			g, k := binary.Uvarint([]byte(v[1:]))
			if k <= 0 {
				t.Fatalf("topic %s: a record with a bad generation: %q", topic, v)
			}
			out[g]++
		}
	}
	return out
}

// TestDistributedRescale runs the windowed job as 3 processes, stops them
// all with savepoints mid-stream at a seeded random moment, starts 2
// processes from those 3 savepoints, stops them so too, and starts 4 from
// the 2 savepoints, which run to the end: a read_committed consumer of the
// output finds exactly what one process wrote, and each repartition topic
// holds each record once. The operators' parallelism in each process
// changes too: 2, then 3, then 1. Along the way it checks that a rescaled start
// fails, naming what is wrong, without a savepoint of every old process,
// with one twice, or with another job's, and that a process does not
// restore its own savepoint at another layout.
func TestDistributedRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nine processes' jobs for a few seconds")
	}
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 7))
	c, evs, want := distReference(t, 1000)
	brokers := c.ListenAddrs()
	dir := t.TempDir()
	stop := func() time.Duration { return time.Duration(50+rng.IntN(250)) * time.Millisecond }

	three := rescaleStage(t, brokers, dir, 0, 3, 2, nil, stop())
	t.Logf("3 processes stopped: %v", three)

	logger := testLogger(t)
	for name, tc := range map[string]struct {
		job  string
		from []string
		want string
	}{
		"missing": {distJobID, three[:2], "no savepoint of process 2 of the 3 processes"},
		"twice":   {distJobID, []string{three[0], three[1], three[1]}, "are both of process 1"},
		"job":     {"other", three, `is of distributed job "dist", this is "other"`},
	} {
		cl := rescaleCluster(brokers, 0, 2, tc.from, logger)
		cl.JobID = tc.job
		job := distJob(distJobOpts{brokers: brokers, stateDir: filepath.Join(dir, "bad-"+name), out: "out", cluster: cl,
			logger: logger, check: func() {}})
		err := job.Run(context.Background())
		if !errors.Is(err, ringflow.ErrCluster) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrCluster saying %q", name, err, tc.want)
		}
	}
	// A process restores a savepoint of its own layout only.
	job := distJob(distJobOpts{brokers: brokers, stateDir: filepath.Join(dir, "bad-layout"), out: "out",
		cluster: rescaleCluster(brokers, 0, 2, nil, logger), restoreFrom: three[0], logger: logger, check: func() {}})
	if err := job.Run(context.Background()); !errors.Is(err, ringflow.ErrCluster) ||
		!strings.Contains(err.Error(), "a process restores its own checkpoints only") {
		t.Errorf("Config.RestoreFrom a savepoint of process 0 of 3 in process 0 of 2: got %v", err)
	}

	two := rescaleStage(t, brokers, dir, 1, 2, 3, three, stop())
	t.Logf("2 processes stopped: %v", two)
	rescaleStage(t, brokers, dir, 2, 4, 1, two, 0)

	diff(t, readTopic(t, brokers, "out", true), want)
	for topic, want := range map[string]int{"dist-rp0-check-window": len(evs), "dist-rp1-window-groups": len(windowOracle(evs))} {
		gens := cutGenerations(t, brokers, topic)
		t.Logf("topic %s: data records by layout generation: %v", topic, gens)
		if n := gens[0] + gens[1] + gens[2]; n != want || len(gens) > 3 {
			t.Errorf("topic %s holds %d committed records (%v by generation), want %d", topic, n, gens, want)
		}
	}
	if gens := cutGenerations(t, brokers, "dist-rp0-check-window"); gens[0] == 0 || gens[1] == 0 {
		t.Fatalf("the first two layouts wrote %d and %d records: a stop came too late, the test tested little", gens[0], gens[1])
	}
}

// TestDistributedRescaleProcesses rescales the job run as child processes,
// as TestDistributedStopAndRestore stops and restores it: 3 processes,
// each stopped with a savepoint (SIGTERM) at a seeded random moment, one
// after the other while the others run; then 2 from those savepoints,
// stopped so too; then 4, which run to the end. In each rescaled layout
// one process is killed (SIGKILL) after its first checkpoint and started
// again as it was, which resumes its own checkpoints. The output is the
// one process's.
func TestDistributedRescaleProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 8))
	c, _, want := distReference(t, 2500)
	brokers := c.ListenAddrs()
	dir := t.TempDir()
	var from []string
	for stage, n := range []int{3, 2, 4} {
		procs := make([]*distProc, n)
		for p := range procs {
			procs[p] = startDistRescaled(t, dir, brokers, p, n, fmt.Sprintf("%d-%d", stage, p), "", from)
		}
		defer func() {
			for _, p := range procs {
				p.kill()
			}
		}()
		if stage > 0 {
			// A rescaled process killed after its first checkpoint and
			// started again as it was resumes its own checkpoints.
			p := rng.IntN(n)
			<-procs[p].ready
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
			t.Logf("stage %d: kill process %d: %v", stage, p, procs[p].kill())
			procs[p] = startDistRescaled(t, dir, brokers, p, n, fmt.Sprintf("%d-%d", stage, p), "", from)
		}
		if stage == 2 {
			waitDist(t, procs)
			break
		}
		for _, proc := range procs {
			<-proc.ready
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			proc.cmd.Process.Signal(syscall.SIGTERM)
		}
		waitDist(t, procs)
		from = nil
		for p := range procs {
			saved := filepath.Join(dir, "savepoints", fmt.Sprintf("%d-%d", stage, p))
			if entries, _ := os.ReadDir(saved); len(entries) == 0 {
				t.Fatalf("stage %d: process %d finished before its stop: the input is too short", stage, p)
			}
			from = append(from, saved)
		}
		t.Logf("%d processes stopped with savepoints", n)
	}
	diff(t, readTopic(t, brokers, "out", true), want)
}
