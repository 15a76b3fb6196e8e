package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

const killChildEnv = "RINGFLOW_KILL_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		// NB: a child that finds the job finished (a previous child ran
		// to the end before its kill) has nothing left to do.
		mode := os.Getenv(killChildEnv + "_MODE")
		job := killChildJob(dir, mode)
		if loop, ok := strings.CutPrefix(mode, "loop/"); ok {
			job = killLoopJob(dir, loop)
		}
		err := job.Run(context.Background())
		if err != nil && !errors.Is(err, ringflow.ErrFinished) {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	raiseTestProcs()
	os.Exit(m.Run())
}

const killRecords = 300_000

// killChildJob is the job the SIGKILL test runs in a child process: a
// keyed count over a paced source into a transactional file sink, with
// checkpoints every 10 ms.
func killChildJob(dir, mode string) *ringflow.Job {
	var m checkpointMode
	for _, cm := range checkpointModes {
		if cm.name == mode {
			m = cm
		}
	}
	ck := m.ck
	ck.Interval, ck.StateDir = 10*time.Millisecond, filepath.Join(dir, "state")
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, Debloat: m.debloat, Checkpoint: ck})
	src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event {
		return event{Seq: i, Key: i % 1000}
	}, ringflow.GenOptions{Count: killRecords, Rate: 150_000}))
	counts := ringflow.Aggregate(ringflow.KeyBy(src, func(e event) uint64 { return e.Key }), "count", keyCount{})
	lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string {
		// Slower than the source for the hot half of the keys: rings fill
		// up, and barriers meet backpressure on one channel.
		if kc[0]%2 == 0 {
			spin(25 * time.Microsecond)
		}
		return fmt.Sprintf("%d:%d", kc[0], kc[1])
	})
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

// TestKillAndResume runs the job in a child process, kills it with SIGKILL
// at random moments several times, then lets it run to the end: the sink
// directory must hold exactly the lines of an uninterrupted run.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	seed := seeds.Seed(t)
	for i, m := range checkpointModes {
		t.Run(m.name, func(t *testing.T) { killAndResume(t, m.name, seed+uint64(i)) })
	}
}

func killAndResume(t *testing.T, mode string, seed uint64) {
	dir := killAndResumeChild(t, mode, seed)
	var want []string
	for k := range uint64(1000) {
		for c := range uint64(killRecords / 1000) {
			want = append(want, fmt.Sprintf("%d:%d", k, c+1))
		}
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
}

// killAndResumeChild runs the child job of mode in a new directory, kills
// it four times at seeded random moments, then runs it to the end; it
// returns the directory.
func killAndResumeChild(t *testing.T, mode string, seed uint64) string {
	rnd := rand.New(rand.NewPCG(seed, 13))
	dir := t.TempDir()
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killChildEnv+"_MODE="+mode)
		cmd.Stderr = os.Stderr
		return cmd
	}
	for i := range 4 {
		cmd := child()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		after := time.Duration(100+rnd.IntN(300)) * time.Millisecond
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill %d after %v: %v", i+1, after, err)
		if err == nil {
			t.Logf("the child finished before the kill")
		}
	}
	if err := child().Run(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	return dir
}
