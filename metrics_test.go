package ringflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ringflow/ringflow"
)

// operatorMetrics returns the named operator's counters summed over its
// subtasks, failing t if the job has no such operator.
func operatorMetrics(t *testing.T, job *ringflow.Job, name string) ringflow.SubtaskMetrics {
	t.Helper()
	m, ok := job.Metrics().Operator(name)
	if !ok {
		t.Fatalf("no metrics for operator %q", name)
	}
	return m
}

// TestMetricsCountRecords: every operator subtask, sources and chained
// operators included, counts the records it received and emitted, and
// the counts add up to what the bounded job produced; the Prometheus
// collector exposes the same counts.
func TestMetricsCountRecords(t *testing.T) {
	const n = 100_000
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(t.TempDir(), "state")}})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: n}))
	doubled := ringflow.Map(src, "double", func(v uint64) uint64 { return 2 * v })
	kept := ringflow.Filter(doubled, "quarter", func(v uint64) bool { return v%8 == 0 })
	counts := ringflow.MapWithState(ringflow.KeyBy(kept, func(v uint64) uint64 { return v % 100 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(context.Context, int64) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op      string
		in, out int64
	}{
		{"gen", n, n}, {"double", n, n}, {"quarter", n, n / 4}, {"count", n / 4, n / 4}, {"sink", n / 4, 0},
	} {
		m := operatorMetrics(t, job, c.op)
		if m.RecordsIn != c.in || m.RecordsOut != c.out {
			t.Errorf("%s: %d records in, %d out; want %d and %d", c.op, m.RecordsIn, m.RecordsOut, c.in, c.out)
		}
	}
	m := job.Metrics()
	if len(m.Channels) != 0 {
		t.Errorf("%d channels after the job ended, want none: its rings are gone", len(m.Channels))
	}
	if len(m.Subtasks) != 10 || m.CheckpointsCompleted == 0 {
		t.Errorf("%d subtasks, %d checkpoints completed; want 10 (5 operators x 2) and some", len(m.Subtasks), m.CheckpointsCompleted)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ringflow.NewCollector(job))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				if l.GetName() == "operator" || l.GetName() == "result" {
					key += "/" + l.GetValue()
				}
			}
			got[key] += s.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"ringflow_records_in_total/gen": n, "ringflow_records_out_total/quarter": n / 4,
		"ringflow_records_in_total/sink": n / 4, "ringflow_restarts_total": 0,
		"ringflow_checkpoints_total/completed": float64(m.CheckpointsCompleted),
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	// Every completed checkpoint is in the duration histogram, and each of
	// its subtasks in the others.
	hist := map[string]uint64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if h := s.GetHistogram(); h != nil {
				hist[f.GetName()] = h.GetSampleCount()
			}
		}
	}
	subtasks := 0
	for _, c := range job.Checkpoints() {
		if c.Status == "completed" {
			subtasks += len(c.Subtasks)
		}
	}
	for name, want := range map[string]int{"ringflow_checkpoint_duration_seconds": m.CheckpointsCompleted,
		"ringflow_checkpoint_sync_seconds": subtasks, "ringflow_checkpoint_async_seconds": subtasks,
		"ringflow_checkpoint_start_delay_seconds": subtasks, "ringflow_checkpoint_alignment_seconds": subtasks} {
		if hist[name] != uint64(want) {
			t.Errorf("%s counts %d observations, want %d", name, hist[name], want)
		}
	}
	for _, name := range []string{"ringflow_worker_parks_total", "ringflow_worker_preempted_total",
		"ringflow_checkpoint_size_bytes", "ringflow_checkpoint_persisted_inflight_bytes",
		"ringflow_last_checkpoint_completed_timestamp_seconds"} {
		if !slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name }) {
			t.Errorf("no %s", name)
		}
	}
}

// TestMetricsTimeSplit: each subtask's busy, backpressured and idle time
// add up to about the job's wall time, and an edge into a slow operator
// shows as backpressured time upstream and busy time downstream.
func TestMetricsTimeSplit(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 2})
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: 1 << 40}))
	// NB: slow by far more than the source's cost per record, also under
	// the race detector on a loaded machine, so that the source waits.
	slow := ringflow.Map(ringflow.Rebalance(src), "slow", func(v uint64) uint64 {
		for start := time.Now(); time.Since(start) < 10*time.Microsecond; {
		}
		return v
	})
	ringflow.Sink(slow, "sink", func(context.Context, uint64) error { return nil })
	// NB: every task lives until the job is cancelled: a task's time is
	// accounted from its first step to its last.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	if err := job.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	wall := time.Since(start)
	for _, op := range []string{"gen", "slow", "sink"} {
		m := operatorMetrics(t, job, op)
		total := m.Busy + m.Backpressured + m.Idle
		if total > wall || total < wall*8/10 {
			t.Errorf("%s: busy %v + backpressured %v + idle %v = %v, want about the run's %v",
				op, m.Busy, m.Backpressured, m.Idle, total, wall)
		}
	}
	if m := operatorMetrics(t, job, "gen"); m.Backpressured < (m.Busy+m.Backpressured+m.Idle)/2 {
		t.Errorf("gen feeds a slow operator, yet was backpressured only %v of %v", m.Backpressured, m.Busy+m.Backpressured+m.Idle)
	}
	if m := operatorMetrics(t, job, "slow"); m.Busy < (m.Busy+m.Backpressured+m.Idle)/2 {
		t.Errorf("slow was busy only %v of %v", m.Busy, m.Busy+m.Backpressured+m.Idle)
	}
}

// TestMetricsWatermark: while an event-time job runs, each subtask's
// metrics hold the event time it has reached.
func TestMetricsWatermark(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 1})
	src := ringflow.SourceWithEventTime(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: 50_000}),
		ringflow.WatermarkStrategy[uint64]{Timestamp: func(i uint64) int64 { return base + int64(i) }})
	var seen time.Time
	ringflow.Sink(ringflow.Rebalance(src), "sink", func(_ context.Context, i uint64) error {
		if i == 40_000 {
			m, _ := job.Metrics().Operator("gen")
			seen = m.Watermark
		}
		return nil
	})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if lo, hi := time.UnixMilli(base+30_000), time.UnixMilli(base+50_000); seen.Before(lo) || seen.After(hi) {
		t.Errorf("at record 40,000 the source's watermark was %v, want between %v and %v", seen, lo, hi)
	}
}

// TestStateMappedBytes: keyed state of plain data is counted in
// Metrics.StateMappedBytes while the job runs, and given back when it ends.
func TestStateMappedBytes(t *testing.T) {
	before := ringflow.NewJob(ringflow.Config{}).Metrics().StateMappedBytes
	var during atomic.Int64
	var job *ringflow.Job
	job = ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(t.TempDir(), "state")},
		Events: &ringflow.EventListener{CheckpointCompleted: func(ringflow.CheckpointStats) {
			during.Store(max(during.Load(), job.Metrics().StateMappedBytes))
		}}})
	const n = 400_000
	src := ringflow.Source(job, "gen", ringflow.Generate(func(i uint64) uint64 { return i }, ringflow.GenOptions{Count: n}))
	counts := ringflow.MapWithState(ringflow.KeyBy(src, func(v uint64) uint64 { return v % 100_000 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(_ context.Context, _ int64) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 100,000 keys of 16 bytes: at least 1.6 MB of slots.
	if got := during.Load() - before; got < 1_600_000 {
		t.Errorf("StateMappedBytes grew by %d while 100,000 keys were counted, want at least 1.6 MB", got)
	}
	if after := job.Metrics().StateMappedBytes; after != before {
		t.Errorf("StateMappedBytes %d after the job ended, want %d as before it", after, before)
	}
}
