package ringflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ringflow/ringflow"
)

type wordCount struct {
	Word string
	N    int
}

// A word count: lines are split into words, partitioned by word, and
// counted; the sink keeps each word's latest count.
func Example_wordCount() {
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2})
	lines := ringflow.Source(job, "lines", ringflow.FromSlice([]string{
		"to be or not to be", "that is the question", "to be is to do",
	}))
	words := ringflow.FlatMap(lines, "split", func(line string, out *ringflow.Collector[wordCount]) {
		for _, w := range strings.Fields(line) {
			out.Emit(wordCount{Word: w, N: 1})
		}
	})
	byWord := ringflow.KeyBy(words, func(w wordCount) string { return w.Word })
	counts := ringflow.Reduce(byWord, "count", func(acc, w wordCount) wordCount {
		acc.N += w.N
		return acc
	})
	var mu sync.Mutex
	latest := map[string]int{}
	ringflow.Sink(counts, "collect", func(_ context.Context, w wordCount) error {
		mu.Lock()
		defer mu.Unlock()
		latest[w.Word] = w.N
		return nil
	})
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range slices.Sorted(func(yield func(string) bool) {
		for w := range latest {
			if !yield(w) {
				return
			}
		}
	}) {
		fmt.Println(w, latest[w])
	}
	// Output:
	// be 3
	// do 1
	// is 2
	// not 1
	// or 1
	// question 1
	// that 1
	// the 1
	// to 4
}

type reading struct {
	Sensor int64
	TimeMs int64
	Value  int64
}

// sumAgg sums reading values.
type sumAgg struct{}

func (sumAgg) Create() int64                  { return 0 }
func (sumAgg) Add(acc int64, r reading) int64 { return acc + r.Value }
func (sumAgg) Result(acc int64) int64         { return acc }
func (sumAgg) Merge(a, b int64) int64         { return a + b }

// A windowed aggregation: sensor readings with event timestamps are summed
// per sensor in tumbling one-second windows.
func Example_windowedAggregation() {
	var rs []reading
	for i := int64(0); i < 40; i++ {
		rs = append(rs, reading{Sensor: i % 2, TimeMs: i * 100, Value: i})
	}
	job := ringflow.NewJob(ringflow.Config{Workers: 2})
	src := ringflow.SourceWithEventTime(job, "readings", ringflow.FromSlice(rs),
		ringflow.WatermarkStrategy[reading]{
			Timestamp:      func(r reading) int64 { return r.TimeMs },
			OutOfOrderness: 50 * time.Millisecond,
		})
	bySensor := ringflow.KeyBy(src, func(r reading) int64 { return r.Sensor })
	sums := ringflow.Window(bySensor, "sum", ringflow.TumblingWindows(time.Second), sumAgg{},
		ringflow.Parallelism(2))
	var mu sync.Mutex
	var out []string
	ringflow.Sink(sums, "collect", func(_ context.Context, r ringflow.WindowResult[int64, int64]) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, fmt.Sprintf("sensor %d [%d,%d) sum %d", r.Key, r.Start, r.End, r.Value))
		return nil
	})
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	slices.Sort(out)
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// sensor 0 [0,1000) sum 20
	// sensor 0 [1000,2000) sum 70
	// sensor 0 [2000,3000) sum 120
	// sensor 0 [3000,4000) sum 170
	// sensor 1 [0,1000) sum 25
	// sensor 1 [1000,2000) sum 75
	// sensor 1 [2000,3000) sum 125
	// sensor 1 [3000,4000) sum 175
}

// MapWithState keeps a value per key that the function updates in place:
// here each word's running count, emitted with every occurrence.
func ExampleMapWithState() {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 1})
	words := ringflow.Source(job, "words", ringflow.FromSlice(strings.Fields("a b a c b a")))
	counts := ringflow.MapWithState(ringflow.KeyBy(words, func(w string) string { return w }), "count",
		func(n *int, w string) string {
			*n++
			return fmt.Sprintf("%s:%d", w, *n)
		})
	var out []string
	ringflow.Sink(counts, "collect", func(_ context.Context, s string) error { out = append(out, s); return nil })
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(out, " "))
	// Output: a:1 b:1 a:2 c:1 b:2 a:3
}

// SinkBatches gives each subtask of a sink its own function, which then
// receives that subtask's records a batch at a time: here every subtask
// sums into its own slot, without a lock.
func ExampleSinkBatches() {
	const parallelism = 2
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: parallelism})
	nums := ringflow.Source(job, "nums", ringflow.Generate(func(seq uint64) int64 { return int64(seq) },
		ringflow.GenOptions{Count: 1000}))
	var sums [parallelism]int64
	ringflow.SinkBatches(ringflow.Rebalance(nums), "sum", func(subtask int) func(context.Context, []int64) error {
		sum := &sums[subtask]
		return func(_ context.Context, batch []int64) error {
			for _, n := range batch {
				*sum += n
			}
			return nil
		}
	})
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sums[0] + sums[1])
	// Output: 499500
}

type click struct {
	User   string
	TimeMs int64
	Page   string
}

// adminClicks is the side output of the clicks on admin pages.
var adminClicks = ringflow.NewOutputTag[click]("admin")

// visits is a keyed process function that turns each user's clicks into
// visits: a visit ends when the user has clicked nothing for a second of
// event time, which an event-time timer notices. Its state is named, so
// that a checkpoint keeps it by name.
type visits struct {
	clicks *ringflow.ValueState[string, int]   // clicks of the visit so far
	start  *ringflow.ValueState[string, int64] // when the visit began
	timer  *ringflow.ValueState[string, int64] // when it ends if nothing comes
}

func (v *visits) Open(s *ringflow.KeyedScope[string]) error {
	v.clicks = ringflow.NewValueState[string, int](s, "clicks")
	v.start = ringflow.NewValueState[string, int64](s, "start")
	v.timer = ringflow.NewValueState[string, int64](s, "timer")
	return nil
}

func (v *visits) Process(ctx *ringflow.KeyedContext[string], c click, out *ringflow.Collector[string]) error {
	if strings.HasPrefix(c.Page, "/admin") {
		adminClicks.Emit(ctx, c) // to the side output, besides the visit
	}
	if t, ok := v.timer.Value(); ok {
		// NB: the watermark follows a batch of records, so a click may
		// come before the timer of a visit it is too late for.
		ctx.DeleteEventTimer(t)
		if t < ctx.Timestamp() {
			v.endVisit(ctx, t, out)
		}
	}
	n, _ := v.clicks.Value()
	if n == 0 {
		v.start.Update(ctx.Timestamp())
	}
	v.clicks.Update(n + 1)
	end := ctx.Timestamp() + 1000
	ctx.RegisterEventTimer(end)
	v.timer.Update(end)
	return nil
}

func (v *visits) OnTimer(ctx *ringflow.KeyedContext[string], ts int64, _ ringflow.TimeDomain, out *ringflow.Collector[string]) error {
	v.endVisit(ctx, ts, out)
	return nil
}

// endVisit emits the visit of the current key that ended at ts, and
// forgets it.
func (v *visits) endVisit(ctx *ringflow.KeyedContext[string], ts int64, out *ringflow.Collector[string]) {
	n, _ := v.clicks.Value()
	start, _ := v.start.Value()
	out.Emit(fmt.Sprintf("%s: visit of %d clicks from %dms to %dms", ctx.Key(), n, start, ts-1000))
	v.clicks.Clear()
	v.start.Clear()
	v.timer.Clear()
}

// A keyed process function with named state and event-time timers: clicks
// are grouped per user into visits that end after a second without one,
// and the clicks on admin pages go to a side output as well.
func Example_processFunction() {
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2})
	clicks := ringflow.SourceWithEventTime(job, "clicks", ringflow.FromSlice([]click{
		{"alice", 0, "/"}, {"bob", 200, "/"}, {"alice", 700, "/cart"}, {"alice", 1500, "/pay"},
		{"bob", 1800, "/admin/users"}, {"bob", 2500, "/"}, {"alice", 3000, "/"},
	}), ringflow.WatermarkStrategy[click]{Timestamp: func(c click) int64 { return c.TimeMs }},
		ringflow.Parallelism(1))
	byUser := ringflow.KeyBy(clicks, func(c click) string { return c.User })
	visited := ringflow.Process(byUser, "visits", func() ringflow.ProcessFunc[string, click, string] { return &visits{} })
	admin := ringflow.SideOutput(visited, adminClicks)

	var mu sync.Mutex
	var out []string
	collect := func(_ context.Context, s string) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, s)
		return nil
	}
	ringflow.Sink(visited, "print", collect)
	ringflow.Sink(ringflow.Map(admin, "describe", func(c click) string {
		return fmt.Sprintf("%s opened %s at %dms", c.User, c.Page, c.TimeMs)
	}), "print-admin", collect)
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	slices.Sort(out)
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// alice: visit of 1 clicks from 3000ms to 3000ms
	// alice: visit of 3 clicks from 0ms to 1500ms
	// bob opened /admin/users at 1800ms
	// bob: visit of 1 clicks from 200ms to 200ms
	// bob: visit of 2 clicks from 1800ms to 2500ms
}

// orderQueue is a service's queue of orders: it keeps each order until the
// job says it is durable, and hands the job those it asks for again.
type orderQueue struct {
	mu     sync.Mutex
	first  uint64 // the number of orders[0]
	orders []int64
}

func (q *orderQueue) get(seq uint64) (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq < q.first || seq >= q.first+uint64(len(q.orders)) {
		return 0, false
	}
	return q.orders[seq-q.first], true
}

// dropBefore drops the orders before seq: the job has them for good.
func (q *orderQueue) dropBefore(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq > q.first {
		q.orders = q.orders[min(seq-q.first, uint64(len(q.orders))):]
		q.first = seq
	}
}

// A service feeding a job through a Push source: it keeps every record in
// its own queue until the job says it is durable (OnDurable, as
// checkpoints complete), and when the job goes back — a failure it
// restarts from, or a new process resuming on the same state directory —
// it pushes again from where the job stands (Resume).
func Example_push() {
	stateDir, err := os.MkdirTemp("", "push-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(stateDir)

	queue := &orderQueue{orders: []int64{120, 30, 75, 5, 60, 10}}
	job := ringflow.NewJob(ringflow.Config{Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: stateDir}})
	orders, push := ringflow.Push(job, "orders", ringflow.PushOptions[int64]{OnDurable: queue.dropBefore})
	var total int64
	ringflow.Sink(ringflow.Filter(orders, "large", func(v int64) bool { return v >= 50 }), "total",
		func(_ context.Context, v int64) error { total += v; return nil })

	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	// The producer: from where the job stands, push what the queue holds,
	// then end the input; after a rewind, start again from where it went
	// back to.
	for {
		seq, err := push.Resume(ctx)
		for ; err == nil; seq++ {
			order, ok := queue.get(seq)
			if !ok {
				err = push.Close(ctx) // returns once every order is durable
				break
			}
			err = push.Push(ctx, order)
		}
		if errors.Is(err, ringflow.ErrRewound) {
			continue
		}
		if err != nil {
			fmt.Println(err)
		}
		break
	}
	if err := <-done; err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("total of large orders:", total)
	fmt.Println("durable:", push.Durable(), "still queued:", len(queue.orders))
	// Output:
	// total of large orders: 255
	// durable: 6 still queued: 0
}
