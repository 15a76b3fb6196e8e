package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/kafka"
)

// The first job of a stream processor, end to end: records from Kafka,
// counted per key, into PostgreSQL, exactly once across failures and
// SIGKILLs. The source's offsets live only in the checkpoints; the sink's
// rows become visible when the checkpoint that covers them completes.

// kafkaChildEnv names, in a child process of TestKafkaToPostgresKilled, its
// state directory; _DB and _BROKERS give the database and the cluster.
const kafkaChildEnv = "RINGFLOW_POSTGRES_KAFKA_CHILD"

const kafkaPartitions = 4

// kafkaCluster starts a one-broker kfake cluster with topic "in" of
// kafkaPartitions partitions holding records 0..n-1 (record i in
// partition i % kafkaPartitions, its value i in decimal), and returns its
// brokers.
func kafkaCluster(t *testing.T, n uint64) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range n {
		rs[i] = &kgo.Record{Topic: "in", Partition: int32(i % kafkaPartitions), Value: strconv.AppendUint(nil, i, 10)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return brokers
}

// kafkaCountJob reads topic "in" of brokers to its end, counts records per
// key (record i has key i % countKeys) and writes each count to table out
// of connString, with checkpoints every few milliseconds in stateDir.
// inject, if not nil, sees every record before the count (and may panic).
func kafkaCountJob(brokers []string, connString, stateDir string, restarts int, inject func(uint64)) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Logger: quiet,
		Checkpoint: ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: stateDir},
		Restart:    ringflow.RestartStrategy{Attempts: restarts}})
	src := ringflow.Source(job, "in", kafka.Source(kafka.SourceConfig[uint64]{
		Brokers: brokers, Topics: []string{"in"}, Bounded: true,
		Decode: func(r *kgo.Record) (uint64, error) { return strconv.ParseUint(string(r.Value), 10, 64) },
	}))
	if inject != nil {
		src = ringflow.Map(src, "inject", func(i uint64) uint64 { inject(i); return i })
	}
	counts := ringflow.Aggregate(ringflow.KeyBy(src, func(i uint64) uint64 { return i % countKeys }), "count", keyCount{})
	ringflow.TxnSink(counts, "out", outSink(connString))
	return job
}

// TestKafkaToPostgres runs the job uninterrupted, and again with failures
// injected at seeded records: both tables hold exactly the counts of every
// record, once, and no prepared transaction is left.
func TestKafkaToPostgres(t *testing.T) {
	const n = 20_000
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	brokers := kafkaCluster(t, n)
	want := keyCounts(n, countKeys)

	plain, plainConn := newDB(t)
	if err := kafkaCountJob(brokers, plain, t.TempDir(), 0, nil).Run(context.Background()); err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	diffRows(t, outRows(t, plainConn), want)

	failAt := []uint64{rng.Uint64N(n), rng.Uint64N(n), rng.Uint64N(n)}
	t.Logf("failures at records %v", failAt)
	var failed atomic.Int64
	inject := func(i uint64) {
		if f := failed.Load(); int(f) < len(failAt) && i == failAt[f] && failed.CompareAndSwap(f, f+1) {
			panic(fmt.Sprintf("injected failure %d at record %d", f+1, i))
		}
	}
	failing, failingConn := newDB(t)
	job := kafkaCountJob(brokers, failing, t.TempDir(), len(failAt), inject)
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("run with failures: %v", err)
	}
	if job.Restarts() == 0 {
		t.Fatal("no failure was injected: the test tested nothing")
	}
	diffRows(t, outRows(t, failingConn), outRows(t, plainConn))
	if gids := prepared(t, failingConn); len(gids) != 0 {
		t.Fatalf("prepared %q left after the job", gids)
	}
}

// kafkaChild runs the job of TestKafkaToPostgresKilled in a child process.
func kafkaChild(dir, connString, brokers string) int {
	job := kafkaCountJob(strings.Split(brokers, ","), connString, filepath.Join(dir, "state"), 0,
		func(uint64) { spinFor(50 * time.Microsecond) }) // NB: about a second of input: killed midway
	// NB: a child that finds the job finished (the previous one ran to
	// the end before its kill) has nothing left to do; it commits what
	// the final checkpoint left prepared.
	if err := job.Run(context.Background()); err != nil && !errors.Is(err, ringflow.ErrFinished) {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// TestKafkaToPostgresKilled runs the job in child processes killed with
// SIGKILL at random moments — mid-transaction, between a PREPARE and its
// COMMIT PREPARED, or after the last checkpoint — each resuming from the
// state directory: the table ends up with exactly the counts of every
// record, once.
func TestKafkaToPostgresKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	const n, kills = 20_000, 4
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	brokers := kafkaCluster(t, n)
	connString, conn := newDB(t)
	dir := t.TempDir()
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), kafkaChildEnv+"="+dir, kafkaChildEnv+"_DB="+connString,
			kafkaChildEnv+"_BROKERS="+strings.Join(brokers, ","))
		cmd.Stderr = os.Stderr
		return cmd
	}
	for i := range kills {
		cmd := child()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		after := time.Duration(100+rng.IntN(400)) * time.Millisecond
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill %d after %v: %v; %d rows committed, %d transactions prepared",
			i+1, after, err, len(outRows(t, conn)), len(prepared(t, conn)))
	}
	if err := child().Run(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	diffRows(t, outRows(t, conn), keyCounts(n, countKeys))
	if gids := prepared(t, conn); len(gids) != 0 {
		t.Fatalf("prepared %q left after the job", gids)
	}
}

// spinFor busies the thread for d (a sleep that short lasts much longer).
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
