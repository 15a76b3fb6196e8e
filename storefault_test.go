package ringflow

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// diskFull fails with ENOSPC every write to the store's staging files of
// the checkpoints numbered [from, to) among those it sees, counting from 0.
type diskFull struct {
	mu       sync.Mutex
	from, to int
	seen     map[string]int // staging file → its number
	failed   map[string]bool
}

func (d *diskFull) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpFileWrite || !strings.Contains(op.Path, "staging/ckpt-") {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.seen[op.Path]
	if !ok {
		n = len(d.seen)
		d.seen[op.Path] = n
	}
	if n >= d.from && n < d.to {
		d.failed[op.Path] = true
		return syscall.ENOSPC
	}
	return nil
}

func (d *diskFull) String() string { return "diskFull" }

// TestStoreFullDuringCheckpoint makes the disk full while two checkpoints
// are written: those two fail, the job goes on, later checkpoints complete,
// and the committed output is exactly the full result.
func TestStoreFullDuringCheckpoint(t *testing.T) {
	dir := t.TempDir()
	inj := &diskFull{from: 1, to: 3, seen: map[string]int{}, failed: map[string]bool{}}
	ck := CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: filepath.Join(dir, "state"), TolerableFailures: 5}
	ck.storeOptions.FS = errorfs.Wrap(vfs.Default, inj)
	job := NewJob(Config{Parallelism: 2, Workers: 2, BatchSize: 20, Checkpoint: ck})
	// NB: 0.6 s of input at the rate below. The test needs two completed
	// checkpoints besides the two that fail, and checkpoints take longer
	// when the machine is busy (the writer yields to the workers): 0.2 s
	// was once too short under a loaded CI run.
	const n = 600_000
	src := Source(job, "src", Generate(func(i uint64) uint64 { return i }, GenOptions{Count: n, Rate: 1_000_000}))
	sums := Reduce(KeyBy(src, func(v uint64) uint64 { return v % 100 }), "sum", func(a, b uint64) uint64 { return a + b })
	lines := Map(sums, "fmt", func(v uint64) string { return fmt.Sprint(v) })
	TxnSink(lines, "out", FileSink(filepath.Join(dir, "out")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var failed, completed int
	for _, c := range job.Checkpoints() {
		switch {
		case strings.HasPrefix(c.Status, "failed") && strings.Contains(c.Status, "no space left"):
			failed++
		case c.Status == "completed":
			completed++
		default:
			t.Errorf("checkpoint %d: %s", c.ID, c.Status)
		}
	}
	if failed != 2 || completed < 2 || len(inj.failed) != 2 {
		t.Fatalf("%d checkpoints failed for lack of space (files %v), %d completed: want 2 failed and more completed",
			failed, inj.failed, completed)
	}
	// The rolling sums' committed lines: each key's running sum once per record.
	got := readLines(t, filepath.Join(dir, "out"))
	if len(got) != n {
		t.Fatalf("%d committed lines, want %d", len(got), n)
	}
}

func readLines(t *testing.T, dir string) []string {
	lines, err := ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}
