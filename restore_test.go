package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// The restore tests interrupt a job after some checkpoints, change it,
// and restart it on the same state directory: a change the checkpoint
// cannot serve fails with a *RestoreMismatchError, and then the original
// job still finishes with the exact output; a change it can serve gives
// the exact output itself.

const (
	restoreKeys    = 50
	restoreRecords = 300_000
)

// countSum keeps a count and a sum per key in two value states, declared
// in either order, and emits "key:count:sum" for every record.
type countSum struct {
	sumFirst   bool
	count, sum *ringflow.ValueState[uint64, int64]
}

func (p *countSum) Open(s *ringflow.KeyedScope[uint64]) error {
	if p.sumFirst {
		p.sum = ringflow.NewValueState[uint64, int64](s, "sum")
		p.count = ringflow.NewValueState[uint64, int64](s, "count")
	} else {
		p.count = ringflow.NewValueState[uint64, int64](s, "count")
		p.sum = ringflow.NewValueState[uint64, int64](s, "sum")
	}
	return nil
}

func (p *countSum) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	c, _ := p.count.Value()
	s, _ := p.sum.Value()
	p.count.Update(c + 1)
	p.sum.Update(s + e.Value)
	out.Emit(fmt.Sprintf("%d:%d:%d", ctx.Key(), c+1, s+e.Value))
	return nil
}

func (p *countSum) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[string]) error {
	return nil
}

func restoreEvent(i uint64) event {
	return event{Seq: i, Key: i % restoreKeys, Value: int64(i % 7)}
}

// countSumLines is the output of an uninterrupted run, sorted.
func countSumLines() []string {
	var count, sum [restoreKeys]int64
	lines := make([]string, 0, restoreRecords)
	for i := range uint64(restoreRecords) {
		e := restoreEvent(i)
		count[e.Key]++
		sum[e.Key] += e.Value
		lines = append(lines, fmt.Sprintf("%d:%d:%d", e.Key, count[e.Key], sum[e.Key]))
	}
	return sortedCopy(lines)
}

// countJob is the job the restore tests change: a paced source, the keyed
// countSum (named process), a transactional file sink, and, with withMax,
// a second keyed branch "max" into a plain sink.
type countJob struct {
	process  string
	sumFirst bool
	withMax  bool
	allow    bool
}

func (c countJob) build(dir string) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 64,
		Checkpoint: checkpointed(dir, 5*time.Millisecond), AllowNonRestoredState: c.allow, Logger: newLogRecorder().logger()})
	src := ringflow.Source(job, "src", ringflow.Generate(restoreEvent,
		ringflow.GenOptions{Count: restoreRecords, Rate: 300_000}), ringflow.Parallelism(1))
	key := func(e event) uint64 { return e.Key }
	process := c.process
	if process == "" {
		process = "count"
	}
	lines := ringflow.Process(ringflow.KeyBy(src, key), process, func() ringflow.ProcessFunc[uint64, event, string] {
		return &countSum{sumFirst: c.sumFirst}
	})
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	if c.withMax {
		m := ringflow.Reduce(ringflow.KeyBy(src, key), "max", func(a, b event) event {
			if b.Value > a.Value {
				return b
			}
			return a
		})
		ringflow.Sink(m, "max-sink", func(context.Context, event) error { return nil })
	}
	return job
}

// interrupt runs job until at least two checkpoints completed, then
// cancels it.
func interrupt(t *testing.T, job *ringflow.Job) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	for {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before it could be interrupted after two checkpoints", err)
		case <-time.After(time.Millisecond):
		}
		if completed(job) >= 2 {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted job: %v", err)
			}
			return
		}
	}
}

// mismatch runs job and returns its *RestoreMismatchError, failing the
// test if Run returns anything else.
func mismatch(t *testing.T, job *ringflow.Job) *ringflow.RestoreMismatchError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := job.Run(ctx)
	var m *ringflow.RestoreMismatchError
	if !errors.As(err, &m) || !errors.Is(err, ringflow.ErrCheckpoint) {
		t.Fatalf("Run returned %v; want a *RestoreMismatchError wrapping ErrCheckpoint", err)
	}
	if strings.Contains(err.Error(), "corrupt") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line, never saying corrupt", err)
	}
	t.Logf("%v", err)
	return m
}

func refs(s ...string) []ringflow.StateRef {
	var out []ringflow.StateRef
	for _, r := range s {
		op, state, _ := strings.Cut(r, "/")
		out = append(out, ringflow.StateRef{Operator: op, State: state})
	}
	return out
}

var processStates = []string{"event-timers", "processing-timers", "count", "sum"}

func processRefs(op string) []ringflow.StateRef {
	var s []string
	for _, st := range processStates {
		s = append(s, op+"/"+st)
	}
	r := refs(s...)
	slices.SortFunc(r, func(a, b ringflow.StateRef) int { return strings.Compare(a.State, b.State) })
	return r
}

// finishes runs job to its end and checks the committed output is exactly
// that of an uninterrupted run.
func finishes(t *testing.T, job *ringflow.Job, dir string) {
	t.Helper()
	run(t, job)
	if job.RestoredFrom() == 0 {
		t.Fatalf("the job did not restore a checkpoint")
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), countSumLines())
}

func TestRestoreRenamedOperator(t *testing.T) {
	dir := t.TempDir()
	interrupt(t, countJob{}.build(dir))
	m := mismatch(t, countJob{process: "count2"}.build(dir))
	if !slices.Equal(m.Dropped, processRefs("count")) || !slices.Equal(m.Added, processRefs("count2")) || len(m.Changed) != 0 {
		t.Fatalf("dropped %v, added %v, changed %v; want count's states dropped and count2's added", m.Dropped, m.Added, m.Changed)
	}
	finishes(t, countJob{}.build(dir), dir)
}

func TestRestoreSwappedStates(t *testing.T) {
	dir := t.TempDir()
	interrupt(t, countJob{}.build(dir))
	job := countJob{sumFirst: true}.build(dir)
	finishes(t, job, dir)
	if r := job.LastRestore(); len(r.Added) != 0 || len(r.Dropped) != 0 {
		t.Fatalf("restore report %+v: want nothing added or dropped", r)
	}
}

func TestRestoreRemovedOperator(t *testing.T) {
	dir := t.TempDir()
	interrupt(t, countJob{withMax: true}.build(dir))
	m := mismatch(t, countJob{}.build(dir))
	if want := refs("max/reduce"); !slices.Equal(m.Dropped, want) || len(m.Added) != 0 || len(m.Changed) != 0 {
		t.Fatalf("dropped %v, added %v, changed %v; want %v dropped", m.Dropped, m.Added, m.Changed, want)
	}
	job := countJob{allow: true}.build(dir)
	finishes(t, job, dir)
	if r := job.LastRestore(); !slices.Equal(r.Dropped, refs("max/reduce")) || len(r.Added) != 0 {
		t.Fatalf("restore report %+v: want max/reduce dropped", r)
	}
}

func TestRestoreAddedOperator(t *testing.T) {
	dir := t.TempDir()
	interrupt(t, countJob{}.build(dir))
	job := countJob{withMax: true}.build(dir)
	finishes(t, job, dir)
	if r := job.LastRestore(); !slices.Equal(r.Added, refs("max/reduce")) || len(r.Dropped) != 0 {
		t.Fatalf("restore report %+v: want max/reduce added", r)
	}
}

// The records of the type-change tests: a Reduce keeps the last one per
// key, and V changes type or gains a field W.
type recInt struct {
	Key uint64
	V   int64
}

type recFloat struct {
	Key uint64
	V   float64
}

type recWider struct {
	Key uint64
	V   int64
	W   int64
}

// typedJob counts records per key through a Reduce of R records.
func typedJob[R any](dir string, mk func(i uint64, n int64) R, count func(R) int64, key func(R) uint64) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 64,
		Checkpoint: checkpointed(dir, 5*time.Millisecond), Logger: newLogRecorder().logger()})
	src := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Count: restoreRecords, Rate: 300_000}), ringflow.Parallelism(1))
	recs := ringflow.Map(src, "rec", func(i uint64) R { return mk(i, 1) })
	sums := ringflow.Reduce(ringflow.KeyBy(recs, key), "max", func(a, b R) R { return mk(uint64(key(a)), count(a)+count(b)) })
	lines := ringflow.Map(sums, "fmt", func(r R) string { return fmt.Sprintf("%d:%d", key(r), count(r)) })
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job
}

func intJob(dir string) *ringflow.Job {
	return typedJob(dir, func(i uint64, n int64) recInt { return recInt{i % restoreKeys, n} },
		func(r recInt) int64 { return r.V }, func(r recInt) uint64 { return r.Key })
}

func TestRestoreChangedFieldType(t *testing.T) {
	for _, c := range []struct {
		name string
		job  func(dir string) *ringflow.Job
		now  string
	}{
		{"float field", func(dir string) *ringflow.Job {
			return typedJob(dir, func(i uint64, n int64) recFloat { return recFloat{i % restoreKeys, float64(n)} },
				func(r recFloat) int64 { return int64(r.V) }, func(r recFloat) uint64 { return r.Key })
		}, "key uint64, value struct{Key uint64; V float64}"},
		{"added field", func(dir string) *ringflow.Job {
			return typedJob(dir, func(i uint64, n int64) recWider { return recWider{i % restoreKeys, n, 0} },
				func(r recWider) int64 { return r.V }, func(r recWider) uint64 { return r.Key })
		}, "key uint64, value struct{Key uint64; V int64; W int64}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			interrupt(t, intJob(dir))
			m := mismatch(t, c.job(dir))
			want := []ringflow.StateChange{{StateRef: ringflow.StateRef{Operator: "max", State: "reduce"},
				Old: "key uint64, value struct{Key uint64; V int64}", New: c.now}}
			if !slices.Equal(m.Changed, want) || len(m.Dropped) != 0 {
				t.Fatalf("changed %+v, dropped %v; want %+v", m.Changed, m.Dropped, want)
			}
			job := intJob(dir)
			run(t, job)
			var lines []string
			var count [restoreKeys]int64
			for i := range uint64(restoreRecords) {
				count[i%restoreKeys]++
				lines = append(lines, fmt.Sprintf("%d:%d", i%restoreKeys, count[i%restoreKeys]))
			}
			if job.RestoredFrom() == 0 {
				t.Fatal("the original job did not restore")
			}
			diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(lines))
		})
	}
}
