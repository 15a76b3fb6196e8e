package ringflow

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/sched"
)

// TestWriteOutOnWorkers: a task's state is written out by the pool that
// runs the task, as background work on a worker between its steps or, when
// the workers are saturated, on the pool's own thread; never by the
// coordinator's writer thread, which commits, at niceness sched.HelperNice and
// the kernel's shortest slice. The job's checkpoints complete.
func TestWriteOutOnWorkers(t *testing.T) {
	var (
		mu      sync.Mutex
		writers = map[int]int{} // threads that wrote key groups, and how many
		commit  = map[int]bool{}
		policy  affinity.Policy // the writer thread's
	)
	testOnWriterThread = func() {
		mu.Lock()
		commit[unix.Gettid()] = true
		policy, _ = affinity.ThreadPolicy()
		mu.Unlock()
	}
	defer func() { testOnWriterThread = nil }()
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
	Sink(counts, "sink", func(context.Context, int64) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			completed++
		}
	}
	want := affinity.Policy{Nice: sched.HelperNice, Slice: affinity.ShortSlice}
	if def, _ := affinity.ThreadPolicy(); def.Slice == 0 {
		want.Slice = 0 // a kernel without custom slices
	}
	if policy != want {
		t.Errorf("the writer thread's policy is %+v, want %+v", policy, want)
	}
	if completed == 0 || len(writers) == 0 || len(commit) == 0 {
		t.Fatalf("%d checkpoints completed, key groups written on %d threads, %d writer threads; want some",
			completed, len(writers), len(commit))
	}
	for tid, n := range writers {
		if commit[tid] {
			t.Errorf("the coordinator's writer thread %d wrote %d key groups", tid, n)
		}
	}
}
