package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// serviceQueue is the queue of a service that feeds a job through a Push
// source: the records from base on, which it keeps until the job says they
// are durable (OnDurable). Record seq is gen(seq).
type serviceQueue struct {
	mu      sync.Mutex
	base    uint64 // records below it were dropped
	reports []uint64
	run     int // the first report of the running process
	err     error
}

// restart says a new process starts, with a new job and handle.
func (q *serviceQueue) restart() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.run = len(q.reports)
}

func (q *serviceQueue) get(seq uint64) (event, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq < q.base {
		return event{}, fmt.Errorf("the job asks for record %d, which it said was durable (the queue starts at %d)", seq, q.base)
	}
	return pushEvent(seq), nil
}

// dropBefore is the OnDurable callback.
func (q *serviceQueue) dropBefore(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.reports); n > q.run && seq <= q.reports[n-1] || n > 0 && seq < q.reports[n-1] {
		q.err = fmt.Errorf("OnDurable(%d) after OnDurable(%d)", seq, q.reports[n-1])
	}
	q.reports = append(q.reports, seq)
	q.base = max(q.base, seq)
}

func (q *serviceQueue) state() (base uint64, reports int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.base, len(q.reports), q.err
}

const pushKeys = 16

// pushEvent is the record of number seq: per key, sequence numbers 0, 1,
// 2, ... in push order, which the keyed check (seqCheck) verifies.
func pushEvent(seq uint64) event { return event{Key: seq % pushKeys, Seq: seq / pushKeys} }

// produce is the service's producer: it pushes the queue's records from
// where the job stands up to upTo, pushing again from where the job went
// back after every rewind, and then closes the input if close. It returns
// how often the job rewound it.
func produce(ctx context.Context, push *ringflow.Pusher[event], q *serviceQueue, upTo uint64, close bool) (int, error) {
	rewinds := 0
	for {
		seq, err := push.Resume(ctx)
		if err != nil {
			return rewinds, err
		}
		for ; seq < upTo && err == nil; seq++ {
			var rec event
			if rec, err = q.get(seq); err != nil {
				return rewinds, err
			}
			err = push.Push(ctx, rec)
		}
		if err == nil && close {
			err = push.Close(ctx)
		}
		if !errors.Is(err, ringflow.ErrRewound) {
			return rewinds, err
		}
		rewinds++
	}
}

// pushJob is the job of the push tests: a Push source, a map that fails
// when the records it has seen reach failAt, the keyed sequence check, and
// a transactional file sink.
func pushJob(dir string, q *serviceQueue, failAt int64, failures, seen *atomic.Int64) (*ringflow.Job, *ringflow.Pusher[event]) {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 64, Logger: newLogRecorder().logger(),
		Checkpoint: checkpointed(dir, 3*time.Millisecond), Restart: ringflow.RestartStrategy{Attempts: 3}})
	src, push := ringflow.Push(job, "push", ringflow.PushOptions[event]{Buffer: 500, OnDurable: q.dropBefore})
	// NB: one subtask, so that each key's records reach the check in push
	// order.
	failing := ringflow.Map(src, "failing", failAfter(job, []int64{failAt}, failures, seen), ringflow.Parallelism(1))
	checked := ringflow.Process(ringflow.KeyBy(failing, func(e event) uint64 { return e.Key }), "check",
		func() ringflow.ProcessFunc[uint64, event, string] { return &seqCheck{} })
	ringflow.TxnSink(ringflow.Rebalance(checked), "out", ringflow.FileSink(filepath.Join(dir, "out")))
	return job, push
}

// TestPushThroughRestarts is what a service feeding a job does: it pushes
// records from its own queue, drops them when the job says they are
// durable, and pushes again the ones after where the job went back — after
// a task failure, which the job restarts from, and after the process
// stops and a new one resumes on the same state directory. The committed
// output holds every record exactly once, the keyed check sees each key's
// records in order without gap or repeat, and the job never asks for a
// record it said was durable.
func TestPushThroughRestarts(t *testing.T) {
	const n = 100_000
	dir := t.TempDir()
	q := &serviceQueue{}

	// The first process: a task fails a quarter of the way in, and the
	// process stops (its context cancelled) as soon as half the records
	// are durable, while the producer still pushes.
	var failures, seen atomic.Int64
	job, push := pushJob(dir, q, n/4, &failures, &seen)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	produced := make(chan error, 1)
	var rewinds int
	go func() {
		var err error
		rewinds, err = produce(ctx, push, q, n*3/4, false)
		produced <- err
	}()
	// NB: the producer may push all its records before half are durable;
	// it then returns nil, and its result is not waited for again.
	var producerDone bool
	deadline := time.After(time.Minute)
	for push.Durable() < n/2 {
		select {
		case err := <-done:
			t.Fatalf("the first run ended (%v) before half the records were durable", err)
		case err := <-produced:
			if err != nil {
				t.Fatalf("producer: %v", err)
			}
			producerDone, produced = true, nil
		case <-deadline:
			t.Fatalf("durable %d of %d after a minute", push.Durable(), n)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it cancelled", err)
	}
	if !producerDone {
		if err := <-produced; !errors.Is(err, context.Canceled) && !errors.Is(err, ringflow.ErrJobEnded) {
			t.Fatalf("producer of the first run: %v", err)
		}
	}
	if job.Restarts() != 1 || failures.Load() != 1 || rewinds == 0 {
		t.Fatalf("first run: %d restarts, %d failures, %d rewinds; want 1, 1 and some", job.Restarts(), failures.Load(), rewinds)
	}
	stopped := push.Durable()
	if err := push.Push(context.Background(), event{}); !errors.Is(err, ringflow.ErrJobEnded) {
		t.Fatalf("Push after Run returned: %v, want ErrJobEnded", err)
	}

	// The second process resumes where the first left off, fails once
	// more, and pushes the rest.
	failures.Store(0)
	seen.Store(0)
	q.restart()
	job, push = pushJob(dir, q, n/8, &failures, &seen)
	done = make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	rewinds2, err := produce(context.Background(), push, q, n, true)
	if err != nil {
		t.Fatalf("producer of the second run: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("second run: %v", err)
	}
	if job.RestoredFrom() == 0 || job.Restarts() != 1 {
		t.Fatalf("second run: restored from %d, %d restarts; want a restore and 1", job.RestoredFrom(), job.Restarts())
	}

	var want []string
	for i := range uint64(n) {
		e := pushEvent(i)
		want = append(want, fmt.Sprintf("%d:%d", e.Key, e.Seq))
	}
	diffRows(t, readParts(t, filepath.Join(dir, "out")), sortedCopy(want))
	base, reports, qerr := q.state()
	if qerr != nil {
		t.Fatal(qerr)
	}
	if base != n || push.Durable() != n {
		t.Fatalf("durable up to %d (the queue dropped up to %d), want %d", push.Durable(), base, n)
	}
	t.Logf("first run: %d rewinds, stopped at %d durable; second: %d rewinds, restored checkpoint %d; %d OnDurable calls",
		rewinds, stopped, rewinds2, job.RestoredFrom(), reports)
}

// TestPushBackpressure checks that Push blocks while the job cannot take
// more, returns on its context, and goes on when the job does; and that
// Close, without checkpoints, returns once the job has taken every record.
func TestPushBackpressure(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, RingCapacity: 64 << 10})
	src, push := ringflow.Push(job, "push", ringflow.PushOptions[int64]{Buffer: 16})
	release := make(chan struct{})
	var got atomic.Int64
	ringflow.Sink(src, "sink", func(ctx context.Context, v int64) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if got.Add(1) != v+1 {
			return fmt.Errorf("record %d came as number %d", v, got.Load())
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	var pushed int64
	for ; ; pushed++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := push.Push(ctx, pushed)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if pushed > 1<<20 {
			t.Fatal("Push never blocked")
		}
	}
	close(release)
	for i := pushed; i < pushed+1000; i++ {
		if err := push.Push(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := push.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Load() != pushed+1000 {
		t.Fatalf("the sink got %d records, want %d", got.Load(), pushed+1000)
	}
	if err := push.Push(context.Background(), 0); !errors.Is(err, ringflow.ErrPushClosed) &&
		!errors.Is(err, ringflow.ErrJobEnded) {
		t.Fatalf("Push after Close: %v", err)
	}
	t.Logf("Push blocked after %d records", pushed)
}

// TestPushJobFails checks that a producer blocked in Push or Resume learns
// that the job failed, with its error.
func TestPushJobFails(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	src, push := ringflow.Push(job, "push", ringflow.PushOptions[int64]{Buffer: 1})
	boom := errors.New("boom")
	ringflow.Sink(src, "sink", func(context.Context, int64) error { return boom })
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	var err error
	for i := int64(0); err == nil; i++ {
		err = push.Push(context.Background(), i)
	}
	if !errors.Is(err, ringflow.ErrJobEnded) || !errors.Is(err, boom) {
		t.Fatalf("Push: %v, want ErrJobEnded wrapping the sink's error", err)
	}
	if _, err := push.Resume(context.Background()); !errors.Is(err, ringflow.ErrJobEnded) {
		t.Fatalf("Resume: %v, want ErrJobEnded", err)
	}
	if err := <-done; !errors.Is(err, boom) {
		t.Fatalf("Run: %v", err)
	}
}

// TestPushParallelism checks that a Push source refuses more subtasks.
func TestPushParallelism(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 3})
	src, _ := ringflow.Push(job, "push", ringflow.PushOptions[int64]{}, ringflow.Parallelism(2))
	ringflow.Sink(src, "sink", func(context.Context, int64) error { return nil })
	errs := ringflow.ConfigErrors(job.Run(context.Background()))
	if len(errs) != 1 || errs[0].Operator != "push" || errs[0].Field != "Parallelism" {
		t.Fatalf("config errors %v; want one for push's Parallelism", errs)
	}
	g := job.Graph()
	if g.Operators[0].Parallelism != 1 || g.Operators[1].Parallelism != 3 {
		t.Fatalf("graph %+v: want the source with one subtask, the sink with 3", g.Operators)
	}
}
