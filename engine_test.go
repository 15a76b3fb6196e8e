package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("seed", "")

// event is the record most tests use: a plain struct, so it crosses rings
// by raw copy.
type event struct {
	Seq   uint64
	Key   uint64
	Value int64
	TS    int64 // event time, ms
}

// makeEvents returns n events over keys keys with timestamps that advance
// about 1 ms per event and jitter by up to jitter ms (out of order).
func makeEvents(seed uint64, n, keys int, jitter int64) []event {
	rnd := rand.New(rand.NewPCG(seed, 11))
	evs := make([]event, n)
	for i := range evs {
		ts := int64(i)
		if jitter > 0 {
			ts += rnd.Int64N(2*jitter+1) - jitter
		}
		evs[i] = event{Seq: uint64(i), Key: rnd.Uint64N(uint64(keys)), Value: rnd.Int64N(1000) - 100, TS: max(ts, 0)}
	}
	return evs
}

// collect is a sink that gathers formatted records, safe for concurrent
// subtasks.
type collect struct {
	mu   sync.Mutex
	rows []string
}

func sinkTo[T any](c *collect, format func(T) string) func(context.Context, T) error {
	return func(_ context.Context, v T) error {
		c.mu.Lock()
		c.rows = append(c.rows, format(v))
		c.mu.Unlock()
		return nil
	}
}

func (c *collect) sorted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.rows)
	sort.Strings(out)
	return out
}

func sortedCopy(rows []string) []string {
	out := slices.Clone(rows)
	sort.Strings(out)
	return out
}

func diffRows(t *testing.T, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	n := 0
	for i := 0; i < max(len(got), len(want)) && n < 10; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("row %d: got %q, want %q", i, g, w)
			n++
		}
	}
	t.Fatalf("%d rows, want %d", len(got), len(want))
}

// shapes are the (parallelism, workers) pairs results must not depend on.
var shapes = []struct{ par, workers int }{{1, 1}, {2, 1}, {2, 2}, {4, 2}}

func forShapes(t *testing.T, f func(t *testing.T, cfg ringflow.Config)) {
	for _, s := range shapes {
		t.Run(fmt.Sprintf("p%d-w%d", s.par, s.workers), func(t *testing.T) {
			f(t, ringflow.Config{Parallelism: s.par, Workers: s.workers, RingCapacity: 64 << 10,
				FrameBytes: 4 << 10, BatchSize: 100})
		})
	}
}

func run(t *testing.T, job *ringflow.Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func eventTime() ringflow.WatermarkStrategy[event] {
	return ringflow.WatermarkStrategy[event]{
		Timestamp:      func(e event) int64 { return e.TS },
		OutOfOrderness: 50 * time.Millisecond,
	}
}

// TestStatelessOperators runs map, filter and flatMap over a rebalance and
// compares with the same functions applied directly.
func TestStatelessOperators(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 20_000, 100, 0)
	double := func(e event) event { e.Value *= 2; return e }
	keep := func(e event) bool { return e.Value%3 != 0 }
	explode := func(e event, out *ringflow.Collector[event]) {
		seq := e.Seq
		for i := range e.Key % 3 {
			e.Seq = seq*10 + i
			out.Emit(e)
		}
	}
	var want []string
	for _, e := range evs {
		e = double(e)
		if !keep(e) {
			continue
		}
		for i := range e.Key % 3 { // what explode emits
			o := e
			o.Seq = e.Seq*10 + i
			want = append(want, fmt.Sprint(o))
		}
	}
	want = sortedCopy(want)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
		s = ringflow.Map(s, "double", double)
		s = ringflow.Rebalance(ringflow.Filter(s, "keep", keep, ringflow.Parallelism(1)))
		s = ringflow.FlatMap(s, "explode", explode)
		var c collect
		ringflow.Sink(s, "sink", sinkTo(&c, func(e event) string { return fmt.Sprint(e) }))
		run(t, job)
		diffRows(t, c.sorted(), want)
	})
}

// TestStatelessPointerAndBatchForms runs MapPtr, MapBatches, FilterPtr and
// FlatMapPtr, with event time stamped by a WatermarkStrategy's
// TimestampPtr, against the by-value forms' results: the same records,
// each with its timestamp (the sink formats both).
func TestStatelessPointerAndBatchForms(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 20_000, 100, 20)
	var want []string
	for _, e := range evs {
		e.Value *= 2
		if e.Value%3 == 0 {
			continue
		}
		for i := range e.Key % 3 {
			o := e
			o.Seq = e.Seq*10 + i
			o.Value++
			want = append(want, fmt.Sprint(o, " at ", e.TS))
		}
	}
	want = sortedCopy(want)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), ringflow.WatermarkStrategy[event]{
			TimestampPtr: func(e *event) int64 { return e.TS }, OutOfOrderness: 50 * time.Millisecond})
		s = ringflow.MapPtr(s, "double", func(e *event) event { o := *e; o.Value *= 2; return o })
		s = ringflow.Rebalance(ringflow.FilterPtr(s, "keep", func(e *event) bool { return e.Value%3 != 0 }))
		s = ringflow.FlatMapPtr(s, "explode", func(e *event, out *ringflow.Collector[event]) {
			for i := range e.Key % 3 {
				o := *e
				o.Seq = e.Seq*10 + i
				out.Emit(o)
			}
		})
		s = ringflow.MapBatches(s, "inc", func(in, out []event) {
			for i := range in {
				out[i] = in[i]
				out[i].Value++
			}
		})
		// The timestamp travels with each record: a process function reads
		// it back.
		stamped := ringflow.Process(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "stamp",
			func() ringflow.ProcessFunc[uint64, event, string] { return stampFunc{} })
		var c collect
		ringflow.Sink(stamped, "sink", sinkTo(&c, func(r string) string { return r }))
		run(t, job)
		diffRows(t, c.sorted(), want)
	})
}

// stampFunc formats each record with its event timestamp.
type stampFunc struct{}

func (stampFunc) Open(*ringflow.KeyedScope[uint64]) error { return nil }
func (stampFunc) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	out.Emit(fmt.Sprint(e, " at ", ctx.Timestamp()))
	return nil
}
func (stampFunc) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[string]) error {
	return nil
}

// TestReduceAndAggregate checks the rolling reduce and aggregate against
// maps computed directly. Updates of one key arrive in an order that
// depends on how the sources interleave, so the reduce is checked by each
// key's final value (the sink keeps the latest per key, which the key's one
// subtask emits last) and the count aggregate by the multiset of its
// updates, which is {1..n} per key in any order; MapWithState's count must
// give the same multiset, and its sum the key's total at its last record.
func TestReduceAndAggregate(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 30_000, 500, 0)
	sums := map[uint64]int64{}
	counts := map[uint64]int64{}
	var wantAgg []string
	for _, e := range evs {
		sums[e.Key] += e.Value
		counts[e.Key]++
		wantAgg = append(wantAgg, fmt.Sprintf("%d:%d", e.Key, counts[e.Key]))
	}
	wantAgg = sortedCopy(wantAgg)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
		k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
		red := ringflow.Reduce(k, "sum", func(a, b event) event { a.Value += b.Value; return a })
		agg := ringflow.Aggregate(k, "count", keyCount{})
		type sumCount struct{ Sum, Count int64 }
		withState := ringflow.MapWithState(k, "state", func(st *sumCount, e event) [2]uint64 {
			st.Sum += e.Value
			st.Count++
			if st.Sum != sums[e.Key] && st.Count == counts[e.Key] {
				panic(fmt.Sprintf("key %d: sum %d after its last record, want %d", e.Key, st.Sum, sums[e.Key]))
			}
			return [2]uint64{e.Key, uint64(st.Count)}
		})
		var mu sync.Mutex
		latest := map[uint64]int64{}
		ringflow.Sink(red, "sums", func(_ context.Context, e event) error {
			mu.Lock()
			latest[e.Key] = e.Value
			mu.Unlock()
			return nil
		})
		var a collect
		ringflow.Sink(agg, "counts", sinkTo(&a, func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) }))
		var ws collect
		ringflow.Sink(withState, "state-counts", sinkTo(&ws, func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) }))
		run(t, job)
		if len(latest) != len(sums) {
			t.Fatalf("%d keys reduced, want %d", len(latest), len(sums))
		}
		for k, v := range sums {
			if latest[k] != v {
				t.Fatalf("key %d: final sum %d, want %d", k, latest[k], v)
			}
		}
		diffRows(t, a.sorted(), wantAgg)
		diffRows(t, ws.sorted(), wantAgg)
	})
}

// keyCount counts records per key and emits (key, count).
type keyCount struct{}

func (keyCount) Create() [2]uint64                    { return [2]uint64{} }
func (keyCount) Add(acc [2]uint64, e event) [2]uint64 { return [2]uint64{e.Key, acc[1] + 1} }
func (keyCount) Result(acc [2]uint64) [2]uint64       { return acc }
func (keyCount) Merge(a, b [2]uint64) [2]uint64       { return [2]uint64{a[0], a[1] + b[1]} }

type valueSum struct{}

func (valueSum) Create() int64                { return 0 }
func (valueSum) Add(acc int64, e event) int64 { return acc + e.Value }
func (valueSum) Result(acc int64) int64       { return acc }
func (valueSum) Merge(a, b int64) int64       { return a + b }

// bruteWindows sums values per key and window the slow way.
func bruteWindows(evs []event, w ringflow.Windows) []string {
	type kw struct {
		key        uint64
		start, end int64
	}
	sums := map[kw]int64{}
	if w.Kind == operator.Session {
		return bruteSessions(evs, w.Gap.Milliseconds())
	}
	size, slide := w.Size.Milliseconds(), w.Slide.Milliseconds()
	if w.Kind == operator.Tumbling {
		slide = size
	}
	for _, e := range evs {
		for start := e.TS - e.TS%slide; start > e.TS-size; start -= slide {
			sums[kw{e.Key, start, start + size}] += e.Value
		}
	}
	var rows []string
	for k, v := range sums {
		rows = append(rows, fmt.Sprintf("%d [%d,%d) %d", k.key, k.start, k.end, v))
	}
	return sortedCopy(rows)
}

func bruteSessions(evs []event, gap int64) []string {
	byKey := map[uint64][]event{}
	for _, e := range evs {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	var rows []string
	for k, es := range byKey {
		sort.Slice(es, func(i, j int) bool { return es[i].TS < es[j].TS })
		start, last, sum := es[0].TS, es[0].TS, int64(0)
		for i, e := range es {
			if i > 0 && e.TS-last >= gap {
				rows = append(rows, fmt.Sprintf("%d [%d,%d) %d", k, start, last+gap, sum))
				start, sum = e.TS, 0
			}
			last = e.TS
			sum += e.Value
		}
		rows = append(rows, fmt.Sprintf("%d [%d,%d) %d", k, start, last+gap, sum))
	}
	return sortedCopy(rows)
}

// TestWindows compares tumbling, sliding and session windows over
// out-of-order input with a brute-force computation.
func TestWindows(t *testing.T) {
	seed := seeds.Seed(t)
	for _, w := range []ringflow.Windows{
		ringflow.TumblingWindows(100 * time.Millisecond),
		ringflow.SlidingWindows(300*time.Millisecond, 100*time.Millisecond),
		ringflow.SessionWindows(40 * time.Millisecond),
	} {
		jitter := int64(20) // records are at most 2*jitter < OutOfOrderness apart: none is behind the watermark
		keys := 50
		if w.Kind == operator.Session {
			keys = 400 // sparse keys, so that sessions open and close
		}
		evs := makeEvents(seed, 20_000, keys, jitter)
		want := bruteWindows(evs, w)
		t.Run(fmt.Sprint(w.Kind), func(t *testing.T) {
			forShapes(t, func(t *testing.T, cfg ringflow.Config) {
				job := ringflow.NewJob(cfg)
				s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
				k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
				win := ringflow.Window(k, "win", w, valueSum{})
				var c collect
				ringflow.Sink(win, "sink", sinkTo(&c, func(r ringflow.WindowResult[uint64, int64]) string {
					return fmt.Sprintf("%d [%d,%d) %d", r.Key, r.Start, r.End, r.Value)
				}))
				run(t, job)
				if late := operatorMetrics(t, job, "win").LateDropped; late != 0 {
					t.Fatalf("%d records dropped as late although the jitter is within the bound", late)
				}
				diffRows(t, c.sorted(), want)
			})
		})
	}
}

// TestWindowJoin compares the window join with a brute-force nested loop.
func TestWindowJoin(t *testing.T) {
	seed := seeds.Seed(t)
	left := makeEvents(seed, 5_000, 40, 20)
	right := makeEvents(seed+1, 5_000, 40, 20)
	const size = 200
	var want []string
	for _, l := range left {
		for _, r := range right {
			if l.Key == r.Key && l.TS/size == r.TS/size {
				want = append(want, fmt.Sprintf("%d %d %d", l.Key, l.Seq, r.Seq))
			}
		}
	}
	want = sortedCopy(want)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		ls := ringflow.SourceWithEventTime(job, "left", ringflow.FromSlice(left), eventTime())
		rs := ringflow.SourceWithEventTime(job, "right", ringflow.FromSlice(right), eventTime())
		key := func(e event) uint64 { return e.Key }
		j := ringflow.WindowJoin(ringflow.KeyBy(ls, key), ringflow.KeyBy(rs, key), "join",
			ringflow.TumblingWindows(size*time.Millisecond),
			func(l, r event) [3]uint64 { return [3]uint64{l.Key, l.Seq, r.Seq} })
		var c collect
		ringflow.Sink(j, "sink", sinkTo(&c, func(v [3]uint64) string { return fmt.Sprintf("%d %d %d", v[0], v[1], v[2]) }))
		run(t, job)
		diffRows(t, c.sorted(), want)
	})
}

// lastSeen is a keyed process function: it emits, per record, the number of
// records of the key so far, and at the end of event time one summary per
// key from an event-time timer.
type lastSeen struct {
	count *ringflow.ValueState[uint64, int64]
}

func (p *lastSeen) Open(s *ringflow.KeyedScope[uint64]) error {
	p.count = ringflow.NewValueState[uint64, int64](s, "count")
	return nil
}

func (p *lastSeen) Process(ctx *ringflow.KeyedContext[uint64], e event, out *ringflow.Collector[string]) error {
	n, _ := p.count.Value()
	p.count.Update(n + 1)
	ctx.RegisterEventTimer(1 << 40) // fires once, at the end of event time
	out.Emit(fmt.Sprintf("%d #%d", ctx.Key(), n+1))
	return nil
}

func (p *lastSeen) OnTimer(ctx *ringflow.KeyedContext[uint64], ts int64, _ ringflow.TimeDomain, out *ringflow.Collector[string]) error {
	n, _ := p.count.Value()
	out.Emit(fmt.Sprintf("%d total %d", ctx.Key(), n))
	return nil
}

func TestProcess(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 10_000, 77, 0)
	counts := map[uint64]int{}
	var want []string
	for _, e := range evs {
		counts[e.Key]++
		want = append(want, fmt.Sprintf("%d #%d", e.Key, counts[e.Key]))
	}
	for k, n := range counts {
		want = append(want, fmt.Sprintf("%d total %d", k, n))
	}
	want = sortedCopy(want)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
		k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
		p := ringflow.Process(k, "proc", func() ringflow.ProcessFunc[uint64, event, string] { return &lastSeen{} })
		var c collect
		ringflow.Sink(p, "sink", sinkTo(&c, func(s string) string { return s }))
		run(t, job)
		diffRows(t, c.sorted(), want)
	})
}

// TestLateRecords sends records far behind the watermark: they are counted
// and handed to the late-record function, and the windows they missed are
// not changed.
func TestLateRecords(t *testing.T) {
	var evs []event
	for i := range 1000 {
		evs = append(evs, event{Seq: uint64(i), Key: 1, Value: 1, TS: int64(i * 10)})
		if i%100 == 99 {
			evs = append(evs, event{Seq: uint64(100000 + i), Key: 1, Value: 1000, TS: int64(i*10 - 500)})
		}
	}
	job := ringflow.NewJob(ringflow.Config{Parallelism: 1, Workers: 1, BatchSize: 10})
	s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), eventTime())
	k := ringflow.KeyBy(s, func(e event) uint64 { return e.Key })
	var lateMu sync.Mutex
	var late []uint64
	win := ringflow.Window(k, "win", ringflow.TumblingWindows(100*time.Millisecond), valueSum{},
		ringflow.LateRecords(func(e event) { lateMu.Lock(); late = append(late, e.Seq); lateMu.Unlock() }))
	var c collect
	ringflow.Sink(win, "sink", sinkTo(&c, func(r ringflow.WindowResult[uint64, int64]) string {
		return fmt.Sprintf("[%d,%d) %d", r.Start, r.End, r.Value)
	}))
	run(t, job)
	if n := operatorMetrics(t, job, "win").LateDropped; n != 10 || len(late) != 10 {
		t.Fatalf("late: counted %d, handed over %d, want 10", n, len(late))
	}
	for _, row := range c.sorted() {
		if !strings.HasSuffix(row, " 10") {
			t.Fatalf("window %s: a late record changed it", row)
		}
	}
}

// TestBackpressure runs a fast source into a slow sink and checks, at every
// record the sink sees, that the source is never further ahead than what
// the rings and batches between them can hold.
func TestBackpressure(t *testing.T) {
	const n = 200_000
	var generated atomic.Int64
	cfg := ringflow.Config{Parallelism: 1, Workers: 2, RingCapacity: 16 << 10, FrameBytes: 1 << 10, BatchSize: 64}
	job := ringflow.NewJob(cfg)
	src := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) event {
		generated.Add(1)
		return event{Seq: seq}
	}, ringflow.GenOptions{Count: n}))
	m := ringflow.Map(src, "map", func(e event) event { return e })
	// The sink has its own task (parallelism 2 breaks the chain), so two
	// rings lie between the source and it.
	var consumed, maxAhead atomic.Int64
	ringflow.Sink(ringflow.Rebalance(m), "slow", func(_ context.Context, e event) error {
		c := consumed.Add(1)
		if ahead := generated.Load() - c; ahead > maxAhead.Load() {
			maxAhead.Store(ahead)
		}
		spin(2 * time.Microsecond)
		return nil
	}, ringflow.Parallelism(2))
	run(t, job)
	// Two rings of 16 KiB hold 1024 records of 32 bytes (minus headers),
	// plus one source batch and one staged frame per ring.
	bound := int64(2*(16<<10)/32 + 64 + 2*(1<<10)/32)
	t.Logf("source ran at most %d records ahead of the sink (bound %d)", maxAhead.Load(), bound)
	if maxAhead.Load() > bound || consumed.Load() != n {
		t.Fatalf("source ran %d records ahead of the slow sink (bound %d); sink saw %d of %d",
			maxAhead.Load(), bound, consumed.Load(), n)
	}
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// TestPanicFailsJob checks that a panic in a user function fails Run with
// an error naming the operator and subtask and carrying the stack, and that
// no goroutine is left behind.
func TestPanicFailsJob(t *testing.T) {
	before := runtime.NumGoroutine()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2})
	s := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) event { return event{Seq: seq} }, ringflow.GenOptions{}))
	s = ringflow.Map(ringflow.Rebalance(s), "boom", func(e event) event {
		if e.Seq == 5000 {
			panic("record 5000 is cursed")
		}
		return e
	})
	ringflow.Sink(s, "sink", func(context.Context, event) error { return nil })
	err := job.Run(context.Background())
	var oe *ringflow.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "boom" || !errors.Is(err, ringflow.ErrPanic) ||
		!strings.Contains(err.Error(), "record 5000 is cursed") || !strings.Contains(string(oe.Stack), "engine_test.go") {
		t.Fatalf("Run returned %v; want an OperatorError for boom with the panic and its stack", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") {
		t.Errorf("Error() has %d lines; want one (the stack is in OperatorError.Stack)", strings.Count(msg, "\n")+1)
	}
	t.Logf("error: %.200s", err)
	waitGoroutines(t, before)
}

func TestSinkErrorFailsJob(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	s := ringflow.Source(job, "src", ringflow.FromSlice([]int64{1, 2, 3}))
	ringflow.Sink(s, "picky", func(_ context.Context, v int64) error {
		if v == 2 {
			return errors.New("two is not allowed")
		}
		return nil
	})
	err := job.Run(context.Background())
	var oe *ringflow.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "picky" || !strings.Contains(err.Error(), "two is not allowed") {
		t.Fatalf("Run returned %v", err)
	}
}

// TestSinkBatches checks that every subtask of a batch sink gets its own
// function, opened once with its index, and that together they receive
// every record once, in batches.
func TestSinkBatches(t *testing.T) {
	const n, p = 100_000, 3
	job := ringflow.NewJob(ringflow.Config{Parallelism: p, Workers: 2})
	s := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) event { return event{Seq: seq} },
		ringflow.GenOptions{Count: n}))
	var mu sync.Mutex
	opened := map[int]int{}
	seen := make([][]uint64, p)
	ringflow.SinkBatches(ringflow.Rebalance(s), "sink", func(subtask int) func(context.Context, []event) error {
		mu.Lock()
		opened[subtask]++
		mu.Unlock()
		mine := &seen[subtask] // written by this subtask only
		return func(_ context.Context, es []event) error {
			if len(es) == 0 {
				return errors.New("empty batch")
			}
			for _, e := range es {
				*mine = append(*mine, e.Seq)
			}
			return nil
		}
	})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{0: 1, 1: 1, 2: 1}; !maps.Equal(opened, want) {
		t.Fatalf("open calls per subtask %v, want %v", opened, want)
	}
	var all []uint64
	for i, got := range seen {
		if len(got) == 0 {
			t.Errorf("subtask %d received nothing", i)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != uint64(i) {
			t.Fatalf("sorted sequence numbers: position %d holds %d (%d in all, want %d each once)", i, seq, len(all), n)
		}
	}
	if len(all) != n {
		t.Fatalf("received %d records, want %d", len(all), n)
	}
}

// TestSinkBatchesErrors checks that a nil function from open, a panic in
// open and an error from a batch each fail the job naming the sink.
func TestSinkBatchesErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(int) func(context.Context, []int64) error
		want string
	}{
		{"nil", func(int) func(context.Context, []int64) error { return nil }, "nil function for subtask 0"},
		{"open panics", func(int) func(context.Context, []int64) error { panic("no disk") }, "no disk"},
		{"write fails", func(int) func(context.Context, []int64) error {
			return func(_ context.Context, vs []int64) error { return fmt.Errorf("batch of %d refused", len(vs)) }
		}, "batch of 3 refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := ringflow.NewJob(ringflow.Config{Workers: 1})
			ringflow.SinkBatches(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1, 2, 3})), "picky", tc.open)
			err := job.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "picky") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run returned %v; want an error naming picky and %q", err, tc.want)
			}
			t.Logf("%.150s", err)
		})
	}
}

func TestCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2})
	var seen atomic.Int64
	s := ringflow.Source(job, "src", ringflow.Generate(func(seq uint64) event { return event{Seq: seq} }, ringflow.GenOptions{}))
	ringflow.Sink(ringflow.Rebalance(s), "sink", func(context.Context, event) error { seen.Add(1); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for seen.Load() < 100_000 {
			runtime.Gosched()
		}
		cancel()
	}()
	if err := job.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	waitGoroutines(t, before)
}

func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > n; i++ {
		if i == 2000 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGraphErrors checks that Run reports bad graphs before starting,
// naming the operator.
func TestGraphErrors(t *testing.T) {
	type ptrRec struct{ P *int }
	cases := []struct {
		name  string
		build func(j *ringflow.Job)
		want  string
		kind  error
	}{
		{"no sink", func(j *ringflow.Job) {
			ringflow.Map(ringflow.Source(j, "src", ringflow.FromSlice([]int64{1})), "m", func(v int64) int64 { return v })
		}, `operator "m": its output goes nowhere`, ringflow.ErrUnusedOutput},
		{"parallelism", func(j *ringflow.Job) {
			s := ringflow.Source(j, "src", ringflow.FromSlice([]int64{1}), ringflow.Parallelism(-2))
			ringflow.Sink(s, "sink", func(context.Context, int64) error { return nil })
		}, `operator "src": parallelism -2`, ringflow.ErrParallelism},
		{"no codec", func(j *ringflow.Job) {
			s := ringflow.Map(ringflow.Source(j, "src", ringflow.FromSlice([]int64{1})), "ptr",
				func(v int64) ptrRec { return ptrRec{} })
			ringflow.Sink(ringflow.Rebalance(s), "sink", func(context.Context, ptrRec) error { return nil }, ringflow.Parallelism(2))
		}, `operator "ptr": its output of type ringflow_test.ptrRec cannot cross to "sink"`, ringflow.ErrNoCodec},
		{"duplicate name", func(j *ringflow.Job) {
			s := ringflow.Source(j, "x", ringflow.FromSlice([]int64{1}))
			ringflow.Sink(s, "x", func(context.Context, int64) error { return nil })
		}, `operator name "x" is used twice`, ringflow.ErrOperatorName},
		{"window without event time", func(j *ringflow.Job) {
			s := ringflow.Source(j, "src", ringflow.FromSlice([]event{{}}))
			w := ringflow.Window(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "w",
				ringflow.TumblingWindows(time.Second), valueSum{})
			ringflow.Sink(w, "sink", func(context.Context, ringflow.WindowResult[uint64, int64]) error { return nil })
		}, `window "w": its input has no event time`, ringflow.ErrEventTime},
		{"keyed parallelism above max", func(j *ringflow.Job) {
			s := ringflow.Source(j, "src", ringflow.FromSlice([]event{{}}))
			r := ringflow.Reduce(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "r",
				func(a, b event) event { return a }, ringflow.Parallelism(200))
			ringflow.Sink(r, "sink", func(context.Context, event) error { return nil })
		}, `operator "r": parallelism 200 exceeds the max parallelism 128`, ringflow.ErrParallelism},
		{"empty", func(j *ringflow.Job) {}, "no operators", ringflow.ErrNoSink},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := ringflow.NewJob(ringflow.Config{Workers: 1})
			c.build(j)
			err := j.Run(context.Background())
			if !errors.Is(err, ringflow.ErrGraph) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run returned %v, want ErrGraph of kind %v mentioning %s", err, c.kind, c.want)
			}
		})
	}
}

// TestStringRecords moves records with strings (the reflection codec)
// through a hash edge.
func TestStringRecords(t *testing.T) {
	type named struct {
		Name string
		N    int64
		Tags []byte
	}
	var in []named
	for i := range 5000 {
		in = append(in, named{Name: strings.Repeat("x", i%37) + fmt.Sprint(i), N: int64(i), Tags: []byte{byte(i)}})
	}
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, FrameBytes: 512})
	s := ringflow.Source(job, "src", ringflow.FromSlice(in))
	k := ringflow.KeyBy(s, func(v named) string { return v.Name })
	r := ringflow.Reduce(k, "id", func(a, b named) named { return b })
	var c collect
	ringflow.Sink(r, "sink", sinkTo(&c, func(v named) string { return fmt.Sprintf("%s %d %v", v.Name, v.N, v.Tags) }))
	run(t, job)
	var want []string
	for _, v := range in {
		want = append(want, fmt.Sprintf("%s %d %v", v.Name, v.N, v.Tags))
	}
	diffRows(t, c.sorted(), sortedCopy(want))
}

// TestGenerateSplits checks that a bounded generator's subtasks together
// produce each sequence number once, also when some subtasks get none.
func TestGenerateSplits(t *testing.T) {
	for _, count := range []int{1, 2, 3, 7} {
		job := ringflow.NewJob(ringflow.Config{Parallelism: 4, Workers: 2})
		s := ringflow.Source(job, "gen", ringflow.Generate(func(seq uint64) int64 { return int64(seq) },
			ringflow.GenOptions{Count: uint64(count)}))
		var c collect
		ringflow.Sink(s, "sink", sinkTo(&c, func(v int64) string { return fmt.Sprintf("%03d", v) }))
		run(t, job)
		var want []string
		for i := range count {
			want = append(want, fmt.Sprintf("%03d", i))
		}
		diffRows(t, c.sorted(), want)
	}
}

// TestWorkerStats: a job reports one scheduler entry per worker; a slowly
// paced source leaves its workers idle for milliseconds, so they sleep on
// their doorbells or, on a machine too loaded for that (the deadline
// passes while they yield), are away and a peer runs their tasks; the load
// fits on one worker, so worker 1 rests unless NoRest says not to; and with
// NoSteal no worker ever runs another's tasks.
func TestWorkerStats(t *testing.T) {
	for _, cfg := range []ringflow.Config{{}, {NoSteal: true}, {NoRest: true}} {
		cfg.Workers, cfg.Parallelism = 2, 2
		job := ringflow.NewJob(cfg)
		// NB: 300ms, longer than the 100ms of light load a worker waits
		// before it rests.
		s := ringflow.Source(job, "gen", ringflow.Generate(func(seq uint64) uint64 { return seq },
			ringflow.GenOptions{Count: 300, Rate: 1000}))
		var c collect
		ringflow.Sink(ringflow.Rebalance(s), "sink", sinkTo(&c, func(v uint64) string { return fmt.Sprint(v) }))
		run(t, job)
		stats := job.WorkerStats()
		if len(stats) != 2 {
			t.Fatalf("%+v: %d worker entries, want 2", cfg, len(stats))
		}
		seen := int64(0)
		for i, w := range stats {
			seen += w.Parks + w.Stolen + w.Rests
			if cfg.NoSteal && w.Stolen != 0 {
				t.Errorf("NoSteal: worker %d's tasks were run by a peer %d times", i, w.Stolen)
			}
			if cfg.NoRest && w.Rests != 0 {
				t.Errorf("NoRest: worker %d rested %d times", i, w.Rests)
			}
		}
		if seen == 0 {
			t.Errorf("%+v: no worker slept, rested or was taken over during a run paced at 1000 records/s: %+v", cfg, stats)
		}
		if !cfg.NoRest && (stats[1].Rests == 0 || stats[1].Rested <= 0) {
			t.Errorf("%+v: worker 1 never rested during 300ms at 1000 records/s: %+v", cfg, stats)
		}
	}
}
