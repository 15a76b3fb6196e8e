package affinity

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestPin(t *testing.T) {
	cpus, err := Usable()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Usable: %v %v", cpus, err)
	}
	last := cpus[len(cpus)-1]
	unpin, err := Pin(last)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	unix.SchedGetaffinity(0, &set)
	if set.Count() != 1 || !set.IsSet(last) {
		t.Errorf("pinned thread's mask has %d CPUs, want only CPU %d", set.Count(), last)
	}
	unpin()
	if _, err := Pin(1 << 20); err == nil {
		t.Error("pinning to a CPU that does not exist succeeded")
	}
}
