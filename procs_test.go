package ringflow

import "testing"

// TestFitProcs checks the number of workers a run settles on and the
// GOMAXPROCS it raises to: by default as many workers as CPUs but one P
// spare, GOMAXPROCS untouched; an explicit Workers as asked; and with
// RaiseGOMAXPROCS every CPU a worker and GOMAXPROCS raised to make room.
func TestFitProcs(t *testing.T) {
	for _, c := range []struct {
		workers, cpus, procs int
		raise                bool
		want, wantRaise      int
	}{
		{workers: 0, cpus: 8, procs: 8, want: 7},
		{workers: 0, cpus: 4, procs: 8, want: 4},
		{workers: 0, cpus: 8, procs: 4, want: 3},
		{workers: 0, cpus: 8, procs: 1, want: 1}, // no spare to be had
		{workers: 0, cpus: 1, procs: 1, want: 1},
		{workers: 6, cpus: 8, procs: 4, want: 6}, // as asked; Run warns
		{workers: 2, cpus: 8, procs: 8, want: 2},
		{workers: 0, cpus: 8, procs: 8, raise: true, want: 8, wantRaise: 9},
		{workers: 0, cpus: 4, procs: 8, raise: true, want: 4},
		{workers: 6, cpus: 8, procs: 4, raise: true, want: 6, wantRaise: 7},
		{workers: 3, cpus: 8, procs: 4, raise: true, want: 3},
	} {
		n, raiseTo := fitProcs(c.workers, c.cpus, c.procs, c.raise)
		if n != c.want || raiseTo != c.wantRaise {
			t.Errorf("fitProcs(workers %d, cpus %d, GOMAXPROCS %d, raise %v) = %d workers, raise to %d; want %d, %d",
				c.workers, c.cpus, c.procs, c.raise, n, raiseTo, c.want, c.wantRaise)
		}
	}
}
