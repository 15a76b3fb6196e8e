//go:build ringflow_exchange_order

package main

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/kafka"
)

// TestExchangeKeepsOrderAcrossTransactions fails while the exchange's sink
// can append a transaction's records to a partition ahead of those of
// the transaction before it: each transaction has a producer of its own
// (a slot of the pool), and PreCommit leaves the flush of its records to
// the durable step, which runs while the next transaction is written.
// A repartition topic needs the order a producer wrote: a reader that
// sees a producer's watermark before records the producer wrote ahead of
// it lets its windows drop them as late. dfbench cluster --processes 3
// --query q11 --events 200000 --rate 2000 --checkpoint-interval 50ms
// shows it: some runs drop records as late, and the output is not one
// process's.
//
// The test holds the first transaction's produce request back for half a
// second, as a slow connection or a retry would, meanwhile writes the
// second transaction, then commits both and reads the partition. (A fix
// that makes the second transaction wait for the first's records passes
// it, as one that keeps the order otherwise does.)
//
// It is behind the build tag ringflow_exchange_order:
//
//	go test -tags ringflow_exchange_order -run TestExchangeKeepsOrder ./cmd/dfbench
func TestExchangeKeepsOrderAcrossTransactions(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "rp"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var held atomic.Bool
	kc.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ProduceRequest)
		if r.TransactionID != nil && strings.HasSuffix(*r.TransactionID, "-0-0") && held.CompareAndSwap(false, true) {
			kc.SleepControl(func() { time.Sleep(500 * time.Millisecond) })
		}
		return nil, nil, false // handled as usual (after the sleep)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := kc.ListenAddrs()
	s := kafka.Exchange(kafka.ExchangeConfig{Brokers: brokers}).Sink("rp", "order")()
	if err := s.Open(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var handles [][]byte
	var durables []func(context.Context) error
	for _, v := range []string{"first", "second"} {
		if err := s.Write(ringflow.ExchangeRecord{Partition: 0, Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
		h, durable, err := s.PreCommit()
		if err != nil {
			t.Fatal(err)
		}
		handles, durables = append(handles, h), append(durables, durable)
	}
	for i, h := range handles {
		if err := durables[i](ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := readCommitted(ctx, brokers, "rp", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"first", "second"}; !slices.Equal(got, want) {
		t.Fatalf("partition 0 holds %q; want %q, the order they were written in", got, want)
	}
}
