package ringflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
)

type sensorTotal struct {
	Sensor uint64 `json:"sensor"`
	Seq    uint64 `json:"seq"` // the reading this total includes up to
	Total  uint64 `json:"total"`
}

// A transactional file sink with checkpoints, and a restore: a task fails
// once midway, the job restores its latest checkpoint and rewinds its
// source, and the committed output still holds every running total exactly
// once — what was written after that checkpoint was never committed.
func Example_transactionalSink() {
	dir, err := os.MkdirTemp("", "ringflow-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: filepath.Join(dir, "state")},
		Restart:    ringflow.RestartStrategy{Attempts: 1}})
	const readings = 20_000
	src := ringflow.Source(job, "readings", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: readings, Rate: 400_000}))
	var failed atomic.Bool
	checked := ringflow.Map(src, "check", func(i uint64) uint64 {
		if i == readings/2 && failed.CompareAndSwap(false, true) {
			panic("a failure, once")
		}
		return i
	})
	totals := ringflow.MapWithState(ringflow.KeyBy(checked, func(i uint64) uint64 { return i % 10 }), "sum",
		func(total *uint64, i uint64) sensorTotal {
			*total += i
			return sensorTotal{Sensor: i % 10, Seq: i, Total: *total}
		})
	out := filepath.Join(dir, "out")
	ringflow.TxnSink(totals, "out", ringflow.FileSinkEncoded(out, ringflow.FileSinkOptions{}, ringflow.JSONLines[sensorTotal]()))
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got, err := ringflow.ReadFileSinkJSON[sensorTotal](out)
	if err != nil {
		fmt.Println(err)
		return
	}
	seen := map[uint64]bool{}
	exact := true
	for _, t := range got {
		exact = exact && !seen[t.Seq]
		seen[t.Seq] = true
	}
	final := map[uint64]uint64{}
	for _, t := range got {
		final[t.Sensor] = max(final[t.Sensor], t.Total)
	}
	fmt.Println("restarts:", job.Restarts())
	fmt.Println("totals committed:", len(got), "each once:", exact && len(seen) == readings)
	fmt.Println("sensor 3:", final[3])
	// Output:
	// restarts: 1
	// totals committed: 20000 each once: true
	// sensor 3: 19996000
}
