package ringflow_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// gatedReader returns 0, 1, 2, ... up to n, blocking before record
// blockAt until gate is closed (or the source is: ctx is done, or the
// reader is closed).
type gatedReader struct {
	next, n, blockAt uint64
	gate, closed     chan struct{}
	blocked          chan struct{} // closed when it blocks, if not nil
}

func (r *gatedReader) Next(ctx context.Context) (uint64, []byte, error) {
	if r.next == r.n {
		return 0, nil, io.EOF
	}
	if r.next == r.blockAt {
		if r.blocked != nil {
			close(r.blocked)
		}
		select {
		case <-r.gate:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-r.closed:
			return 0, nil, errors.New("closed")
		}
	}
	v := r.next
	r.next++
	return v, binary.LittleEndian.AppendUint64(nil, r.next), nil
}

func (r *gatedReader) Close() error { close(r.closed); return nil }

// TestBlockingSourceCheckpoints checks that a source whose reads block
// (through FromBlocking) lets checkpoints complete while it waits for
// input, and that a job restored from one of them gives every record
// exactly once.
func TestBlockingSourceCheckpoints(t *testing.T) {
	const n, blockAt = 20_000, 5_000
	dir := t.TempDir()
	gate := make(chan struct{})
	build := func(gate, blocked chan struct{}) *ringflow.Job {
		job := ringflow.NewJob(ringflow.Config{Workers: 2, BatchSize: 100, Logger: newLogRecorder().logger(),
			Checkpoint: checkpointed(dir, 2*time.Millisecond)})
		src := ringflow.Source(job, "blocking", ringflow.FromBlocking(
			func(sub, par int, pos []byte) (ringflow.BlockingReader[uint64], error) {
				r := &gatedReader{n: n, blockAt: blockAt, gate: gate, closed: make(chan struct{}), blocked: blocked}
				if pos != nil {
					r.next = binary.LittleEndian.Uint64(pos)
				}
				return r, nil
			}, 64))
		ringflow.TxnSink(ringflow.Map(src, "fmt", func(v uint64) string { return fmt.Sprint(v) }), "out",
			ringflow.FileSink(filepath.Join(dir, "out")))
		return job
	}
	// The first run blocks at record blockAt for good: checkpoints must
	// still complete, several of them after it blocked.
	blocked := make(chan struct{})
	job := build(gate, blocked)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	select {
	case <-blocked:
	case err := <-done:
		t.Fatalf("the job ended (%v) before its source blocked", err)
	}
	base := completed(job)
	for completed(job) < base+3 {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) while its source was blocked", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	// The second run restores, and its reader does not block.
	open := make(chan struct{})
	close(open)
	job = build(open, nil)
	run(t, job)
	if job.RestoredFrom() == 0 {
		t.Fatal("the second run did not restore")
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
}
