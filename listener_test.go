package ringflow

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// notes records the checkpoint notifications of one kind of user code,
// over its subtasks.
type notes struct {
	mu       sync.Mutex
	complete map[int][]uint64 // by subtask
	aborted  map[int][]uint64
}

func newNotes() *notes { return &notes{complete: map[int][]uint64{}, aborted: map[int][]uint64{}} }

func (n *notes) add(sub int, id uint64, complete bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if complete {
		n.complete[sub] = append(n.complete[sub], id)
	} else {
		n.aborted[sub] = append(n.aborted[sub], id)
	}
}

// listeningSource is a generator that records its notifications.
type listeningSource struct {
	SourceFunc[uint64]
	sub   int
	notes *notes
}

func (s *listeningSource) Open(sub, par int, pos []byte) error {
	s.sub = sub
	return s.SourceFunc.Open(sub, par, pos)
}
func (s *listeningSource) NotifyComplete(id uint64) error { s.notes.add(s.sub, id, true); return nil }
func (s *listeningSource) NotifyAborted(id uint64)        { s.notes.add(s.sub, id, false) }

// listeningProcess sums per key and records its notifications.
type listeningProcess struct {
	sum   *ValueState[uint64, uint64]
	notes *notes
}

func (p *listeningProcess) Open(s *KeyedScope[uint64]) error {
	p.sum = NewValueState[uint64, uint64](s, "sum")
	return nil
}

func (p *listeningProcess) Process(ctx *KeyedContext[uint64], v uint64, out *Collector[string]) error {
	sum, _ := p.sum.Value()
	p.sum.Update(sum + v)
	out.Emit(fmt.Sprint(sum + v))
	return nil
}

func (p *listeningProcess) OnTimer(*KeyedContext[uint64], int64, TimeDomain, *Collector[string]) error {
	return nil
}

func (p *listeningProcess) NotifyComplete(id uint64) error { p.notes.add(0, id, true); return nil }
func (p *listeningProcess) NotifyAborted(id uint64)        { p.notes.add(0, id, false) }

// listeningSink is a file sink that records its notifications.
type listeningSink struct {
	*fileSink[string]
	notes *notes
}

func (s *listeningSink) NotifyComplete(id uint64) error { s.notes.add(s.sub, id, true); return nil }
func (s *listeningSink) NotifyAborted(id uint64)        { s.notes.add(s.sub, id, false) }

// TestCheckpointListeners checks that user sources, process functions and
// transactional sinks that implement CheckpointListener are told
// of every checkpoint that completes and every one that is aborted, in
// order, by every subtask; and that the output is still exact.
func TestCheckpointListeners(t *testing.T) {
	dir := t.TempDir()
	inj := &diskFull{from: 1, to: 3, seen: map[string]int{}, failed: map[string]bool{}}
	ck := CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: filepath.Join(dir, "state"), TolerableFailures: 5}
	ck.storeOptions.FS = errorfs.Wrap(vfs.Default, inj)
	const par = 2
	job := NewJob(Config{Parallelism: par, Workers: 2, BatchSize: 20, Checkpoint: ck})
	// NB: 0.6 s of input, as in TestStoreFullDuringCheckpoint: enough for
	// two completed checkpoints besides the two that fail on a busy
	// machine.
	const n = 600_000
	srcNotes, procNotes, sinkNotes := newNotes(), newNotes(), newNotes()
	gen := Generate(func(i uint64) uint64 { return i }, GenOptions{Count: n, Rate: 1_000_000})
	src := Source(job, "src", func() SourceFunc[uint64] { return &listeningSource{SourceFunc: gen(), notes: srcNotes} })
	sums := Process(KeyBy(src, func(v uint64) uint64 { return v % 100 }), "sum",
		func() ProcessFunc[uint64, uint64, string] { return &listeningProcess{notes: procNotes} }, Parallelism(1))
	out := filepath.Join(dir, "out")
	TxnSink(sums, "out", func() TwoPhaseSink[string] {
		return &listeningSink{fileSink: FileSink(out)().(*fileSink[string]), notes: sinkNotes}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var completed, failed []uint64
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			completed = append(completed, c.ID)
		} else if strings.HasPrefix(c.Status, "failed") {
			failed = append(failed, c.ID)
		}
	}
	if len(completed) < 2 || len(failed) != 2 {
		t.Fatalf("%d checkpoints completed, %d failed: want 2 failed and more completed", len(completed), len(failed))
	}
	for _, c := range []struct {
		name  string
		notes *notes
		subs  int
	}{{"source", srcNotes, par}, {"process function", procNotes, 1}, {"sink", sinkNotes, 1}} {
		for sub := range c.subs {
			if got := c.notes.complete[sub]; !slices.Equal(got, completed) {
				t.Errorf("%s subtask %d told of completed checkpoints %v, want %v", c.name, sub, got, completed)
			}
			if got := c.notes.aborted[sub]; !slices.Equal(got, failed) {
				t.Errorf("%s subtask %d told of aborted checkpoints %v, want %v", c.name, sub, got, failed)
			}
		}
	}
	if got := readLines(t, out); len(got) != n {
		t.Fatalf("%d committed lines, want %d", len(got), n)
	}
	t.Logf("%d completed, %d aborted", len(completed), len(failed))
}
