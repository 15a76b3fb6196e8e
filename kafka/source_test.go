package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
)

// TestPositionRoundTrip checks the position encoding against its decoding,
// and that damage is an error.
func TestPositionRoundTrip(t *testing.T) {
	ps := []partPos{{"a", 0, 17, noStop}, {"a", 3, 0, 40}, {"topic-b", 1, 1 << 40, 1 << 41}}
	b := encodePosition(ps)
	got, err := decodePosition(b)
	if err != nil || !slices.Equal(got, ps) {
		t.Fatalf("decode(encode(%v)) = %v, %v", ps, got, err)
	}
	if got, err := decodePosition(encodePosition(nil)); err != nil || len(got) != 0 {
		t.Fatalf("a subtask without partitions: %v, %v", got, err)
	}
	for i := range len(b) {
		if _, err := decodePosition(b[:i]); err == nil {
			t.Fatalf("a position cut to %d of %d bytes decodes", i, len(b))
		}
	}
}

// TestRescalePositions checks that a restore at another parallelism gives
// every partition of the old subtasks to exactly one new subtask, with its
// offsets, as a fresh start at that parallelism would assign it.
func TestRescalePositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 1))
	for range 200 {
		var all []partPos
		for topic := range 1 + rng.IntN(3) {
			for p := range 1 + rng.IntN(7) {
				all = append(all, partPos{fmt.Sprintf("t%d", topic), int32(p), rng.Int64N(1000), noStop})
			}
		}
		from, to := 1+rng.IntN(6), 1+rng.IntN(6)
		old := make([][]byte, from)
		for i := range old {
			old[i] = encodePosition(assign(all, i, from))
		}
		var got []partPos
		for i := range to {
			b, err := rescale(i, to, old, nil)
			if err != nil {
				t.Fatal(err)
			}
			mine, err := decodePosition(b)
			if err != nil {
				t.Fatal(err)
			}
			if want := assign(all, i, to); !slices.Equal(mine, want) {
				t.Fatalf("%d → %d subtasks: subtask %d gets %v, want %v", from, to, i, mine, want)
			}
			got = append(got, mine...)
		}
		slices.SortFunc(got, comparePart)
		want := slices.Clone(all)
		slices.SortFunc(want, comparePart)
		if !slices.Equal(got, want) {
			t.Fatalf("%d → %d subtasks: partitions %v, want %v", from, to, got, want)
		}
	}
	if b, err := rescale(0, 2, [][]byte{nil, nil}, nil); b != nil || err != nil {
		t.Fatalf("rescale of subtasks that never opened: %v, %v; want a fresh start", b, err)
	}
	if _, err := rescale(0, 2, [][]byte{encodePosition(nil), nil}, nil); err == nil {
		t.Fatal("rescale with one old position missing: no error")
	}
}

func eventSource(brokers []string, bounded bool) SourceConfig[event] {
	return SourceConfig[event]{Brokers: brokers, Topics: []string{"in"}, Decode: decodeEvent, Bounded: bounded}
}

func eventLines(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.String()
	}
	slices.Sort(out)
	return out
}

// failer panics at the chosen counts of records seen, over all attempts of
// a job: a failure at a random point of the stream.
type failer struct {
	seen atomic.Int64
	at   []int64 // sorted
}

func newFailer(rng *rand.Rand, failures int, records int64) *failer {
	f := &failer{}
	for range failures {
		f.at = append(f.at, 1+rng.Int64N(records))
	}
	slices.Sort(f.at)
	return f
}

func (f *failer) see() {
	if n := f.seen.Add(1); slices.Contains(f.at, n) {
		panic(fmt.Sprintf("injected failure at record %d", n))
	}
}

// spin busies the thread for d, to slow a job down without sleeping.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// TestSourceExactlyOnceAcrossRestarts reads a topic into a transactional
// file sink while failures at random records restart the job from its
// checkpoints: each record is in the output exactly once.
func TestSourceExactlyOnceAcrossRestarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 2))
	c := newCluster(t, 4, []string{"in"})
	brokers := c.ListenAddrs()
	evs := events(4, 1500, 50, time.Millisecond)
	produce(t, brokers, "in", evs)
	fail := newFailer(rng, 3, int64(len(evs)))
	t.Logf("failures at records %v", fail.at)

	dir := t.TempDir()
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t),
		Restart:    ringflow.RestartStrategy{Attempts: len(fail.at) + 1},
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state")}})
	src := ringflow.Source(job, "in", Source(eventSource(brokers, true)))
	lines := ringflow.Map(src, "fmt", func(e event) string {
		fail.see()
		spin(20 * time.Microsecond)
		return e.String()
	})
	ringflow.TxnSink(lines, "out", ringflow.FileSink(filepath.Join(dir, "out")))
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := ringflow.ReadFileSink(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	diff(t, got, eventLines(evs))
	// NB: a failure counted while the job is already failing restarts
	// nothing, so there may be fewer restarts than failures.
	if n := job.Metrics().Restarts; n < 1 || n > len(fail.at) {
		t.Fatalf("%d restarts, want 1 to %d", n, len(fail.at))
	}
}

// TestSourceRescale stops a job reading 4 partitions with 2 subtasks with
// a savepoint, and resumes it with 3: every partition moves to its new
// subtask with its offset, so each record is read exactly once over both
// runs.
func TestSourceRescale(t *testing.T) {
	c := newCluster(t, 4, []string{"in"})
	brokers := c.ListenAddrs()
	evs := events(4, 600, 20, time.Millisecond)
	var first, second []event
	for _, e := range evs {
		if e.Seq < 300 {
			first = append(first, e)
		} else {
			second = append(second, e)
		}
	}
	produce(t, brokers, "in", first)
	dir := t.TempDir()
	build := func(parallelism int, restoreFrom, out string) *ringflow.Job {
		job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: parallelism, RestoreFrom: restoreFrom,
			Logger: testLogger(t),
			Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond,
				StateDir:     filepath.Join(dir, fmt.Sprintf("state-%d", parallelism)),
				SavepointDir: filepath.Join(dir, "savepoints")}})
		src := ringflow.Source(job, "in", Source(eventSource(brokers, false)))
		ringflow.TxnSink(ringflow.Map(src, "fmt", event.String), "out", ringflow.FileSink(filepath.Join(dir, out)))
		return job
	}
	job1 := build(2, "", "out-2")
	done1 := runAsync(job1)
	waitLines(t, filepath.Join(dir, "out-2"), len(first))
	sp, err := job1.StopWithSavepoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done1; err != nil {
		t.Fatal(err)
	}

	produce(t, brokers, "in", second)
	job2 := build(3, sp, "out-3")
	done2 := runAsync(job2)
	waitLines(t, filepath.Join(dir, "out-3"), len(second))
	if err := job2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, out := range []string{"out-2", "out-3"} {
		lines, err := ringflow.ReadFileSink(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, lines...)
	}
	slices.Sort(got)
	diff(t, got, eventLines(evs))
}

func runAsync(job *ringflow.Job) <-chan error {
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	return done
}

// waitLines waits until the file sink in dir has committed n lines.
func waitLines(t *testing.T, dir string, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d lines in %s", n, dir), func() bool {
		lines, err := ringflow.ReadFileSink(dir)
		return err == nil && len(lines) >= n
	})
}

// TestSourceMissingTopic checks that a topic that does not exist fails the
// job at open, naming it.
func TestSourceMissingTopic(t *testing.T) {
	c := newCluster(t, 1, []string{"in"})
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 1, Logger: testLogger(t)})
	cfg := eventSource(c.ListenAddrs(), true)
	cfg.Topics = []string{"nope"}
	ringflow.Sink(ringflow.Source(job, "in", Source(cfg)), "out", func(context.Context, event) error { return nil })
	err := job.Run(context.Background())
	var oe *ringflow.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "in" {
		t.Fatalf("run over a missing topic: %v, want the source's OperatorError", err)
	}
	t.Log(err)
}

// TestSourceWatermark checks the per-partition watermark: the slowest
// partition holds it, one without event time holds it at the start, idle
// and finished partitions are left out, and it never goes back.
func TestSourceWatermark(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &source[event]{cfg: SourceConfig[event]{OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second}}
	s.wm = ringflow.MinWatermark
	a := &partState{partPos: partPos{"in", 0, 0, noStop}, maxTs: ringflow.MinWatermark, lastAt: t0}
	b := &partState{partPos: partPos{"in", 1, 0, noStop}, maxTs: ringflow.MinWatermark, lastAt: t0}
	s.parts = []*partState{a, b}
	check := func(now time.Time, wantWm int64, wantIdle bool) {
		t.Helper()
		if wm, idle := s.Watermark(now); wm != wantWm || idle != wantIdle {
			t.Fatalf("watermark (a %d, b %d): %d idle %v, want %d idle %v", a.maxTs, b.maxTs, wm, idle, wantWm, wantIdle)
		}
	}
	a.maxTs = 1000
	check(t0, ringflow.MinWatermark, false) // b has no event time yet
	b.maxTs = 500
	check(t0, 489, false) // the slower partition, less the bound and 1 ms
	a.lastAt = t0.Add(2 * time.Second)
	check(t0.Add(1500*time.Millisecond), 989, false) // b idle
	check(t0.Add(5*time.Second), 989, true)          // both idle
	b.lastAt, b.maxTs = t0.Add(5*time.Second), 600
	check(t0.Add(5*time.Second), 989, false) // b is back, behind: the watermark stays
	b.stop, b.next = 10, 10
	a.maxTs, a.lastAt = 3000, t0.Add(5*time.Second)
	check(t0.Add(5*time.Second), 2989, false) // b is done
	s.parts = nil
	if _, idle := s.Watermark(t0); !idle {
		t.Fatal("a subtask without partitions is not idle")
	}
}

// TestSourceGroupCommit checks that completed checkpoints' offsets reach
// the consumer group, for monitoring: after a bounded job ends, the group
// holds every partition's end offset.
func TestSourceGroupCommit(t *testing.T) {
	c := newCluster(t, 3, []string{"in"})
	brokers := c.ListenAddrs()
	produce(t, brokers, "in", events(3, 200, 10, time.Millisecond))
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t),
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: t.TempDir()}})
	cfg := eventSource(brokers, true)
	cfg.Group = "watchers"
	ringflow.Sink(ringflow.Source(job, "in", Source(cfg)), "out", func(context.Context, event) error { return nil })
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends := endOffsets(t, cl, "in", true)
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "watchers"
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic = "in"
	for p := range ends {
		gt.Partitions = append(gt.Partitions, p)
	}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for _, rg := range resp.Groups {
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				got[rp.Partition] = rp.Offset
			}
		}
	}
	if !maps.Equal(got, ends) {
		t.Fatalf("group offsets %v, want the end offsets %v", got, ends)
	}
}

// TestSourceTransactionalInput reads, bounded, a topic written in
// transactions, committed and aborted: the source sees the committed
// records only, and stops although the last offsets before its bound are
// transaction markers, which it never hands over.
func TestSourceTransactionalInput(t *testing.T) {
	c := newCluster(t, 2, []string{"out"})
	brokers := c.ListenAddrs()
	w := openSink(t, stringSink(t, brokers, "input"), 0, 1)
	evs := events(2, 30, 5, time.Millisecond)
	var committed []event
	for i := 0; i < len(evs); i += 10 {
		batch := evs[i:min(i+10, len(evs))]
		var lines []string
		for _, e := range batch {
			lines = append(lines, e.String())
		}
		txn := writeTxn(t, w, lines...)
		if i%20 == 10 {
			// Aborted: a restore that never commits it fences it.
			crash(w)
			w = openSink(t, stringSink(t, brokers, "input"), 0, 1)
			continue
		}
		if err := w.Commit(context.Background(), txn); err != nil {
			t.Fatal(err)
		}
		committed = append(committed, batch...)
	}
	w.Close()

	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t)})
	cfg := eventSource(brokers, true)
	cfg.Topics = []string{"out"}
	var got atomicLines
	ringflow.Sink(ringflow.Source(job, "in", Source(cfg)), "collect", func(_ context.Context, e event) error {
		got.add(e.String())
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	diff(t, got.sorted(), eventLines(committed))
}

type atomicLines struct {
	mu    sync.Mutex
	lines []string
}

func (a *atomicLines) add(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, s)
}

func (a *atomicLines) sorted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.lines)
	slices.Sort(out)
	return out
}

// TestSourceLostOffset checks that a position the brokers no longer hold
// (retention deleted its records) fails the source, rather than skipping
// to another offset.
func TestSourceLostOffset(t *testing.T) {
	c := newCluster(t, 1, []string{"in"})
	brokers := c.ListenAddrs()
	produce(t, brokers, "in", events(1, 100, 5, time.Millisecond))
	if err := c.DeleteRecords("in", 0, 50); err != nil {
		t.Fatal(err)
	}
	s := Source(eventSource(brokers, false))().(*source[event])
	if err := s.Open(0, 1, encodePosition([]partPos{{"in", 0, 10, noStop}})); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]event, 16)
	var err error
	waitFor(t, 30*time.Second, "a read error", func() bool {
		var n int
		n, err = s.Read(buf)
		if n > 0 {
			t.Fatalf("read %d records from a deleted offset: %v", n, buf[:n])
		}
		return err != nil
	})
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read at a deleted offset: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

// TestSourceReadAllocs checks that handing fetched records over allocates
// nothing per record (Decode's own allocations aside).
func TestSourceReadAllocs(t *testing.T) {
	s := &source[int64]{cfg: SourceConfig[int64]{Decode: func(r *kgo.Record) (int64, error) { return r.Offset, nil }}}
	p := &partState{partPos: partPos{"in", 0, 0, noStop}, maxTs: ringflow.MinWatermark}
	s.parts, s.batches = []*partState{p}, make(chan fetched, 1)
	records, recs := make([]kgo.Record, 256), make([]*kgo.Record, 256)
	for i := range recs {
		recs[i] = &records[i]
	}
	buf := make([]int64, 64)
	var next int64
	allocs := testing.AllocsPerRun(100, func() {
		for i := range records {
			records[i].Offset = next + int64(i)
		}
		next += int64(len(recs))
		s.batches <- fetched{part: p, recs: recs}
		for {
			n, err := s.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per batch of %d records handed over", allocs, len(recs))
	}
	if p.next != next {
		t.Fatalf("next offset %d after %d records", p.next, next)
	}
}

// TestSourceStartLatest checks that a fresh source with StartLatest reads
// only what is produced after it opens.
func TestSourceStartLatest(t *testing.T) {
	c := newCluster(t, 2, []string{"in"})
	brokers := c.ListenAddrs()
	evs := events(2, 100, 5, time.Millisecond)
	var before, after []event
	for _, e := range evs {
		if e.Seq < 50 {
			before = append(before, e)
		} else {
			after = append(after, e)
		}
	}
	produce(t, brokers, "in", before)
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t)})
	cfg := eventSource(brokers, false)
	cfg.Start = StartLatest
	var got atomicLines
	opened := make(chan struct{}, 2)
	ringflow.Sink(ringflow.Source(job, "in", func() ringflow.SourceFunc[event] {
		return &openSignal[event]{SourceFunc: Source(cfg)(), opened: opened}
	}), "collect", func(_ context.Context, e event) error {
		got.add(e.String())
		return nil
	})
	done := runAsync(job)
	<-opened
	<-opened
	produce(t, brokers, "in", after)
	waitFor(t, 30*time.Second, "the records produced after the open", func() bool { return len(got.sorted()) >= len(after) })
	if err := job.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	diff(t, got.sorted(), eventLines(after))
}

// openSignal is a source that says when it has opened.
type openSignal[T any] struct {
	ringflow.SourceFunc[T]
	opened chan<- struct{}
}

func (s *openSignal[T]) Open(subtask, parallelism int, pos []byte) error {
	err := s.SourceFunc.Open(subtask, parallelism, pos)
	s.opened <- struct{}{}
	return err
}

// TestSourceBoundAcrossGap checks that a bounded source hands over no
// record at or past its bound when a gap in the offsets (compaction,
// aborted records) skips the offset just before it.
func TestSourceBoundAcrossGap(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := &source[int64]{cl: cl, cfg: SourceConfig[int64]{Bounded: true,
		Decode: func(r *kgo.Record) (int64, error) { return r.Offset, nil }}}
	p := &partState{partPos: partPos{"in", 0, 3, 10}, maxTs: ringflow.MinWatermark}
	s.parts, s.batches = []*partState{p}, make(chan fetched, 1)
	s.batches <- fetched{part: p, recs: []*kgo.Record{{Offset: 3}, {Offset: 7}, {Offset: 12}, {Offset: 13}}}
	buf := make([]int64, 8)
	n, err := s.Read(buf)
	if err != nil || !slices.Equal(buf[:n], []int64{3, 7}) {
		t.Fatalf("read %v, %v; want offsets 3 and 7", buf[:n], err)
	}
	if !p.done() || p.next != 10 {
		t.Fatalf("partition at %d of bound %d, done %v; want done at the bound", p.next, p.stop, p.done())
	}
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read past the bound: %d, %v; want io.EOF", n, err)
	}
}
