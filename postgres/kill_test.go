package postgres_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

const killChildEnv = "RINGFLOW_POSTGRES_KILL_CHILD"

var stress = flag.Bool("stress", false, "run the SIGKILL test with more records and kills")

// killChild runs the keyed count of TestKillAndResume on the state
// directory under dir into database connString, to its end, and returns
// the process's exit code.
func killChild(dir, connString string) int {
	records, _ := parseUint(os.Getenv(killChildEnv + "_RECORDS"))
	par, _ := parseUint(os.Getenv(killChildEnv + "_PAR"))
	job := countJobAt(connString, filepath.Join(dir, "state"), records, killRate, 0, nil, int(par))
	// NB: a child that finds the job finished (the previous one ran to
	// the end before its kill) has nothing left to do.
	if err := job.Run(context.Background()); err != nil && !errors.Is(err, ringflow.ErrFinished) {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func parseUint(s string) (uint64, error) {
	var n uint64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// killRate paces the child's source, so that a run lasts seconds and a
// kill lands mid-run, with checkpoints and transactions in flight.
const killRate = 40_000

// TestKillAndResume runs the keyed count into PostgreSQL in a child
// process, kills it with SIGKILL at random moments several times (in the
// middle of a transaction, often with one prepared and not yet
// committed), resumes it from its state directory each time at a random
// parallelism, and lets the last child run to the end: the table must hold each key's counts 1..n
// exactly once, and no prepared transaction may be left.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	// NB: the kills come sooner than the job's end (at most kills × 550
	// ms of running at killRate), so that each lands mid-run.
	records, kills := uint64(100_000), 4
	if *stress {
		records, kills = 400_000, 15
	}
	connString, conn := newDB(t)
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	dir := t.TempDir()
	// Each child runs the count and the sink at a parallelism of its own,
	// so a restore often finds the prepared transactions of subtasks
	// that no longer exist.
	child := func(par int) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killChildEnv+"_DB="+connString,
			fmt.Sprintf("%s_RECORDS=%d", killChildEnv, records), fmt.Sprintf("%s_PAR=%d", killChildEnv, par))
		cmd.Stderr = os.Stderr
		return cmd
	}
	for i := range kills {
		par := 1 + rng.IntN(4)
		cmd := child(par)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		after := time.Duration(150+rng.IntN(400)) * time.Millisecond
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill %d at parallelism %d after %v: %v; %d rows committed, %d transactions prepared",
			i+1, par, after, err, len(outRows(t, conn)), len(prepared(t, conn)))
	}
	if err := child(1 + rng.IntN(4)).Run(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	diffRows(t, outRows(t, conn), keyCounts(records, countKeys))
	if gids := prepared(t, conn); len(gids) != 0 {
		t.Fatalf("prepared %q left after the job", gids)
	}
}
