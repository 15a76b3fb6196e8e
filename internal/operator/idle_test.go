package operator

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/sched"
)

// countingTask opens a source task that emits keys 0..n-1 once into a
// rolling count, and returns it and the count.
func countingTask(t *testing.T, n int, checkpoints bool) (*Task, *MapWithState[uint64, uint64, int64, int64]) {
	t.Helper()
	sink := NewSink(func(context.Context, int64) error { return nil })
	kf := KeyFuncs[uint64, uint64]{Key: func(r uint64) uint64 { return r }, Hash: keygroups.HashUint64}
	count := NewMapWithState(kf, func(s *int64, _ uint64) int64 { *s++; return *s }, sink)
	src := NewSourceRunner[uint64](&burstSource{n: n}, 1024, nil, nil, count)
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128,
		KeyGroups: keygroups.Range{Start: 0, End: 128}, Checkpoints: checkpoints}
	sink.Ctx = ctx
	task := &Task{Name: "count#0", Ctx: ctx, Source: src, Ops: []Operator{count, sink}, Ctxs: []*Context{ctx, ctx},
		Opts: TaskOptions{MaxDelay: time.Hour}}
	if err := task.Open(); err != nil {
		t.Fatal(err)
	}
	return task, count
}

// TestIdleStepsCopyAhead: after a checkpoint's snapshot, a task with no
// records due spends its steps copying the pages of its state that the
// snapshot shares, one a step, reporting Progress while there are any, so
// that the records written after it copy nothing.
func TestIdleStepsCopyAhead(t *testing.T) {
	const keys = 5000
	task, count := countingTask(t, keys, true)
	for range 10 { // the records, then idle steps with nothing to copy
		if _, err := task.Step(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := task.Step(time.Now()); err != nil || st != sched.Idle {
		t.Fatalf("idle step before any snapshot: %v, %v; want Idle", st, err)
	}
	snap, err := count.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	before := count.state.Stats()
	progress := 0
	for {
		st, err := task.Step(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if st != sched.Progress {
			break
		}
		if progress++; progress > 10_000 {
			t.Fatal("idle steps report Progress without end")
		}
	}
	after := count.state.Stats()
	if ahead := after.PagesAhead - before.PagesAhead; progress == 0 || ahead != uint64(progress) {
		t.Fatalf("%d idle steps reported Progress and %d pages were copied ahead; want one page a step, and some", progress, ahead)
	}
	for k := range uint64(keys) {
		p, err := count.state.Upsert(k)
		if err != nil {
			t.Fatal(err)
		}
		*p++
	}
	if got := count.state.Stats().PagesCopied - after.PagesCopied; got != 0 {
		t.Fatalf("writing every key after the idle steps copied %d pages, want 0", got)
	}
}

// TestIdleStepsWithoutCheckpoints: a job without checkpoints takes no
// snapshots, and its idle steps are Idle.
func TestIdleStepsWithoutCheckpoints(t *testing.T) {
	task, _ := countingTask(t, 1000, false)
	for range 3 {
		if _, err := task.Step(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if len(task.idleWork) != 0 {
		t.Fatalf("a job without checkpoints has %d pieces of idle work, want none", len(task.idleWork))
	}
	if st, err := task.Step(time.Now()); err != nil || st != sched.Idle {
		t.Fatalf("idle step: %v, %v; want Idle", st, err)
	}
}

// TestHugePagesReachState: Context.HugePages configures the operators'
// state tables: their slabs are advised for huge pages.
func TestHugePagesReachState(t *testing.T) {
	for _, huge := range []bool{false, true} {
		ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128,
			KeyGroups: keygroups.Range{Start: 0, End: 128}, HugePages: huge}
		tbl := newTable[uint64, int64](ctx, "state", keygroups.HashUint64)
		for k := range uint64(600_000) { // tables of 8,192 slots: 16 MiB
			if err := tbl.m.Put(k, 1); err != nil {
				t.Fatal(err)
			}
		}
		if got := tbl.m.Stats().SlabsAdvised > 0; got != huge {
			if thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); huge && !strings.Contains(string(thp), "[madvise]") && !strings.Contains(string(thp), "[always]") {
				t.Skipf("no transparent huge pages to advise for: %q", thp)
			}
			t.Fatalf("HugePages %v: slabs advised %v (stats %+v)", huge, got, tbl.m.Stats())
		}
	}
}
