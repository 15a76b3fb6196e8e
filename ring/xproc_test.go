package ring

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

const childEnv = "RINGFLOW_RING_CHILD"

// TestMain lets the test binary act as the producing child process of
// TestCrossProcess.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	os.Exit(m.Run())
}

const crossProcessRecords = 1_000_000

func runChild(path string) int {
	r, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer r.Close()
	t := &childT{}
	produceSeq(t, r.Writer(), 1, crossProcessRecords, 256, rand.New(rand.NewPCG(7, 7)))
	if t.failed {
		return 1
	}
	return 0
}

// childT is the sliver of testing.TB that produceSeq needs in the child.
type childT struct {
	testing.TB
	failed bool
}

func (c *childT) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
	c.failed = true
}

// TestCrossProcess creates a ring under /dev/shm, re-executes the test binary
// as a child that attaches to it and produces 10^6 records, and verifies them
// here: every value once, in order.
func TestCrossProcess(t *testing.T) {
	dir := "/dev/shm"
	if _, err := os.Stat(dir); err != nil {
		dir = t.TempDir()
	}
	path := fmt.Sprintf("%s/ringflow-test-%d", dir, os.Getpid())
	r, err := Create(path, Options{Capacity: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("ring file %s still exists after Close (stat: %v)", path, err)
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	consumeSeq(t, r.Reader(), 1, crossProcessRecords)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
