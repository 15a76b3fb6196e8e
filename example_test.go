package ringflow_test

import (
	"context"
	"fmt"
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
	ringflow.Sink(counts, "collect", func(w wordCount) error {
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
	ringflow.Sink(sums, "collect", func(r ringflow.WindowResult[int64, int64]) error {
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
	ringflow.Sink(counts, "collect", func(s string) error { out = append(out, s); return nil })
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
	ringflow.SinkBatches(ringflow.Rebalance(nums), "sum", func(subtask int) func([]int64) error {
		sum := &sums[subtask]
		return func(batch []int64) error {
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
