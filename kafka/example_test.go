package kafka_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/kafka"
)

type order struct {
	Customer string
	Cents    int64
	TimeMs   int64
}

type sumCents struct{}

func (sumCents) Create() int64                { return 0 }
func (sumCents) Add(acc int64, o order) int64 { return acc + o.Cents }
func (sumCents) Result(acc int64) int64       { return acc }
func (sumCents) Merge(a, b int64) int64       { return a + b }

// Orders in a Kafka topic are summed per customer and minute of event
// time, exactly once, into another topic; a second job reads the totals
// back. The cluster is franz-go's in-process kfake.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "totals"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	if err := produceOrders(brokers); err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "ringflow-kafka-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 50 * time.Millisecond, StateDir: dir}})
	orders := ringflow.SourceWithOwnEventTime(job, "orders", kafka.Source(kafka.SourceConfig[order]{
		Brokers: brokers, Topics: []string{"orders"}, Bounded: true,
		Decode: func(r *kgo.Record) (order, error) {
			cents, err := strconv.ParseInt(string(r.Value), 10, 64)
			return order{Customer: string(r.Key), Cents: cents, TimeMs: r.Timestamp.UnixMilli()}, err
		},
	}))
	byCustomer := ringflow.KeyBy(orders, func(o order) string { return o.Customer })
	totals := ringflow.Window(byCustomer, "totals", ringflow.TumblingWindows(time.Minute), sumCents{})
	ringflow.TxnSink(totals, "out", kafka.Sink(kafka.SinkConfig[ringflow.WindowResult[string, int64]]{
		Brokers: brokers, Topic: "totals",
		Encode: func(w ringflow.WindowResult[string, int64]) (*kgo.Record, error) {
			minute := time.UnixMilli(w.Start).UTC().Format("15:04")
			return &kgo.Record{Key: []byte(w.Key), Value: fmt.Appendf(nil, "%s %s %d", w.Key, minute, w.Value)}, nil
		},
	}))
	if err := job.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	lines, err := readTotals(brokers)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// ada 12:00 1500
	// ada 12:01 700
	// bob 12:00 250
	// bob 12:01 4000
}

func produceOrders(brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for _, o := range []struct {
		customer     string
		cents, atSec int64
	}{{"ada", 1000, 0}, {"bob", 250, 10}, {"ada", 500, 59}, {"ada", 700, 61}, {"bob", 4000, 90}} {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(o.customer),
			Value: []byte(strconv.FormatInt(o.cents, 10)), Timestamp: noon.Add(time.Duration(o.atSec) * time.Second)})
	}
	return cl.ProduceSync(context.Background(), recs...).FirstErr()
}

// readTotals reads the totals topic to its end with a bounded source.
func readTotals(brokers []string) ([]string, error) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 1})
	totals := ringflow.Source(job, "totals", kafka.Source(kafka.SourceConfig[string]{
		Brokers: brokers, Topics: []string{"totals"}, Bounded: true,
		Decode: func(r *kgo.Record) (string, error) { return string(r.Value), nil },
	}))
	var mu sync.Mutex
	var lines []string
	ringflow.Sink(totals, "collect", func(_ context.Context, line string) error {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line)
		return nil
	})
	err := job.Run(context.Background())
	slices.Sort(lines)
	return lines, err
}
