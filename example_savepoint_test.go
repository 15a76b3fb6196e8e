package ringflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ringflow/ringflow"
)

type order struct {
	Customer uint64
	Amount   uint64
}

// Upgrading a job through a savepoint. Version 1 sums each customer's
// orders into a transactional file sink, and keeps each customer's largest
// order; it is stopped part-way through its input with a savepoint.
// Version 2 no longer keeps the largest order (its state is dropped, as
// AllowNonRestoredState allows), counts orders instead (new state, which
// starts empty), and is started from the savepoint, at another
// parallelism: the totals in the sink come out as if the job had never
// stopped.
func Example_savepointUpgrade() {
	dir, err := os.MkdirTemp("", "ringflow-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "out")
	build := func(version int, restoreFrom string) *ringflow.Job {
		job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: version,
			Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond,
				StateDir:     filepath.Join(dir, fmt.Sprintf("state-v%d", version)),
				SavepointDir: filepath.Join(dir, "savepoints")},
			RestoreFrom: restoreFrom, AllowNonRestoredState: version == 2})
		rate := 1000.0 // version 1 is slow enough to stop part-way
		if version == 2 {
			rate = 0
		}
		orders := ringflow.Source(job, "orders", ringflow.Generate(func(seq uint64) order {
			return order{Customer: seq % 3, Amount: seq%7 + 1}
		}, ringflow.GenOptions{Count: 1000, Rate: rate}), ringflow.Parallelism(1))
		byCustomer := ringflow.KeyBy(orders, func(o order) uint64 { return o.Customer })
		totals := ringflow.Reduce(byCustomer, "total", func(acc, o order) order {
			acc.Amount += o.Amount
			return acc
		})
		lines := ringflow.Map(totals, "format", func(o order) string { return fmt.Sprintf("%d %d", o.Customer, o.Amount) })
		ringflow.TxnSink(lines, "out", ringflow.FileSink(out))
		if version == 1 {
			largest := ringflow.Reduce(byCustomer, "largest", func(acc, o order) order {
				if o.Amount > acc.Amount {
					return o
				}
				return acc
			})
			ringflow.Sink(largest, "largest-sink", func(_ context.Context, _ order) error { return nil })
		} else {
			counts := ringflow.MapWithState(byCustomer, "count", func(n *int, o order) int { *n++; return *n })
			ringflow.Sink(counts, "count-sink", func(_ context.Context, _ int) error { return nil })
		}
		return job
	}

	ctx := context.Background()
	v1 := build(1, "")
	done := make(chan error, 1)
	go func() { done <- v1.Run(ctx) }()
	for len(v1.Checkpoints()) == 0 {
		time.Sleep(time.Millisecond)
	}
	savepoint, err := v1.StopWithSavepoint(ctx)
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	v2 := build(2, savepoint)
	if err := v2.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	restore := v2.LastRestore()
	fmt.Println("dropped:", restore.Dropped)
	fmt.Println("added:", restore.Added)
	lines, err := ringflow.ReadFileSink(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	totals := map[uint64]uint64{}
	for _, l := range lines {
		var customer, total uint64
		fmt.Sscan(l, &customer, &total)
		totals[customer] = max(totals[customer], total)
	}
	for c := range uint64(3) {
		fmt.Printf("customer %d: %d\n", c, totals[c])
	}
	// Output:
	// dropped: [operator "largest" state "reduce"]
	// added: [operator "count" state "state"]
	// customer 0: 1337
	// customer 1: 1328
	// customer 2: 1332
}
