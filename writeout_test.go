package ringflow

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteOutOnWorkers: a task's state is written out by the worker that
// runs the task, as background work between its steps, never by another
// thread: every key group is written on a thread that also ran the job's
// user functions (the workers'), and the job's checkpoints complete.
func TestWriteOutOnWorkers(t *testing.T) {
	var (
		mu      sync.Mutex
		workers = map[int]bool{} // threads that ran the user function
		writers = map[int]int{}  // threads that wrote key groups, and how many
	)
	testOnPutKeyGroup = func() {
		mu.Lock()
		writers[unix.Gettid()]++
		mu.Unlock()
	}
	defer func() { testOnPutKeyGroup = nil }()

	dir := t.TempDir()
	job := NewJob(Config{Parallelism: 2, Workers: 2,
		Checkpoint: CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: filepath.Join(dir, "state")}})
	const n = 300_000
	src := Source(job, "gen", Generate(func(i uint64) uint64 { return i % 20_000 }, GenOptions{Count: n}))
	keyed := KeyBy(src, func(k uint64) uint64 { return k })
	counts := MapWithState(keyed, "count", func(c *int64, k uint64) int64 {
		*c++
		return *c
	})
	Sink(counts, "sink", func(int64) error {
		mu.Lock()
		workers[unix.Gettid()] = true
		mu.Unlock()
		return nil
	})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			completed++
		}
	}
	if completed == 0 || len(writers) == 0 {
		t.Fatalf("%d checkpoints completed, key groups written on %d threads; want some", completed, len(writers))
	}
	for tid, n := range writers {
		if !workers[tid] {
			t.Errorf("thread %d wrote %d key groups but is not a worker (workers: %v)", tid, n, workers)
		}
	}
}
