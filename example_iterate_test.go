package ringflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ringflow/ringflow"
)

// step is a record going round the Collatz loop: a number and the rounds
// it took so far.
type step struct {
	Start, N uint64
	Rounds   int
}

// An iteration: every number goes round the loop, one Collatz step a
// round, until it reaches 1, and then leaves it with the number of steps
// it took. The job ends on its own once nothing goes round any more.
func Example_iterate() {
	dir, err := os.MkdirTemp("", "ringflow-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state")}})
	starts := ringflow.Source(job, "numbers", ringflow.FromSlice([]step{{Start: 6, N: 6}, {Start: 7, N: 7}, {Start: 27, N: 27}}))
	done := ringflow.Iterate(starts, "collatz", func(in ringflow.Stream[step]) (ringflow.Stream[step], ringflow.Stream[step]) {
		next := ringflow.Map(in, "step", func(s step) step {
			if s.N%2 == 0 {
				s.N /= 2
			} else {
				s.N = 3*s.N + 1
			}
			s.Rounds++
			return s
		})
		return ringflow.Filter(next, "again", func(s step) bool { return s.N != 1 }),
			ringflow.Filter(next, "reached 1", func(s step) bool { return s.N == 1 })
	})
	var mu sync.Mutex
	var out []string
	ringflow.Sink(done, "print", func(_ context.Context, s step) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, fmt.Sprintf("%d reaches 1 in %d steps", s.Start, s.Rounds))
		return nil
	})
	if err := job.Run(context.Background()); err != nil {
		panic(err)
	}
	slices.Sort(out)
	for _, line := range out {
		fmt.Println(line)
	}
	// Output:
	// 27 reaches 1 in 111 steps
	// 6 reaches 1 in 8 steps
	// 7 reaches 1 in 16 steps
}
