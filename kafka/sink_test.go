package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
)

func stringSink(t testing.TB, brokers []string, prefix string) SinkConfig[string] {
	return SinkConfig[string]{
		Brokers: brokers, Topic: "out", TransactionalIDPrefix: prefix, Delivery: ExactlyOnce,
		Logger: testLogger(t),
		Encode: func(s string) (*kgo.Record, error) { return &kgo.Record{Value: []byte(s)}, nil },
	}
}

// openSink opens subtask of parallelism of a sink and recovers txns.
func openSink(t *testing.T, cfg SinkConfig[string], subtask, parallelism int, txns ...[]byte) *sink[string] {
	t.Helper()
	s := Sink(cfg)().(*sink[string])
	ctx := context.Background()
	if err := s.Open(ctx, subtask, parallelism); err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(ctx, txns); err != nil {
		t.Fatalf("recover: %v", err)
	}
	return s
}

// writeTxn writes the records and pre-commits them; it returns the
// handle once the transaction is durable.
func writeTxn(t *testing.T, s *sink[string], recs ...string) []byte {
	t.Helper()
	for _, r := range recs {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	txn, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if durable != nil {
		if err := durable(context.Background()); err != nil {
			t.Fatalf("durable: %v", err)
		}
	}
	return txn
}

// crash drops the sink's clients as a killed process would: nothing is
// aborted or committed.
func crash(s *sink[string]) {
	for _, sl := range s.slots {
		if sl.cl != nil {
			sl.cl.Close()
		}
	}
	s.client.Close()
}

func recs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func sorted(groups ...[]string) []string {
	out := slices.Concat(groups...)
	slices.Sort(out)
	return out
}

// TestSinkInvisibleUntilCommit checks that a read_committed consumer sees
// a checkpoint's records only once the sink commits them, while the next
// checkpoint's records flow into another transaction.
func TestSinkInvisibleUntilCommit(t *testing.T) {
	c := newCluster(t, 2, []string{"out"})
	brokers := c.ListenAddrs()
	s := openSink(t, stringSink(t, brokers, "invisible"), 0, 1)
	defer s.Close()
	first, second := recs("a", 10), recs("b", 3)
	txn1 := writeTxn(t, s, first...)
	if got := readTopic(t, brokers, "out", true); len(got) != 0 {
		t.Fatalf("read_committed sees %d records before the commit", len(got))
	}
	diff(t, readTopic(t, brokers, "out", false), first)
	for _, r := range second {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(context.Background(), txn1); err != nil {
		t.Fatal(err)
	}
	diff(t, readTopic(t, brokers, "out", true), first)
	txn2, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h1, h2 := mustHandle(t, txn1), mustHandle(t, txn2); h1.id == h2.id {
		t.Fatalf("two transactions open at once on one transactional id %s", h1.id)
	}
	if err := s.Commit(context.Background(), txn2); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), txn2); err != nil {
		t.Fatalf("commit again: %v", err)
	}
	diff(t, readTopic(t, brokers, "out", true), sorted(first, second))
}

func mustHandle(t *testing.T, b []byte) txnHandle {
	t.Helper()
	h, err := decodeHandle(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSinkRecover checks that a restored subtask commits the checkpoint's
// pre-committed transaction and aborts the one its predecessor left open,
// so that read_committed consumers see exactly the checkpoint's records
// and are not held back; and that restoring the same checkpoint again,
// after the ids were used since, leaves the output alone.
func TestSinkRecover(t *testing.T) {
	c := newCluster(t, 2, []string{"out"})
	brokers := c.ListenAddrs()
	cfg := stringSink(t, brokers, "recover")
	a := openSink(t, cfg, 0, 1)
	kept, lost := recs("kept", 10), recs("lost", 5)
	txn := writeTxn(t, a, kept...)
	for _, r := range lost {
		if err := a.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.cur.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	crash(a)

	b := openSink(t, cfg, 0, 1, txn)
	diff(t, readTopic(t, brokers, "out", true), kept)
	assertNoOpenTxn(t, b.client, "out")
	more := recs("more", 3)
	if err := b.Commit(context.Background(), writeTxn(t, b, more...)); err != nil {
		t.Fatal(err)
	}
	b.Close()

	// The same checkpoint again: its transaction was committed, and its
	// id used and fenced since.
	d := openSink(t, cfg, 0, 1, txn)
	defer d.Close()
	diff(t, readTopic(t, brokers, "out", true), sorted(kept, more))
	assertNoOpenTxn(t, d.client, "out")
}

// assertNoOpenTxn fails t if a transaction holds back topic's last stable
// offset.
func assertNoOpenTxn(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	stable, high := endOffsets(t, cl, topic, true), endOffsets(t, cl, topic, false)
	for p := range high {
		if stable[p] != high[p] {
			t.Fatalf("%s/%d: last stable offset %d, high watermark %d: a transaction is still open", topic, p, stable[p], high[p])
		}
	}
}

// TestSinkRecoverRescaled checks a restore at a lower parallelism: subtask
// 0 of 2 takes over old subtasks 0 and 2 of 3, commits both their
// transactions and fences old subtask 2's ids, which nothing else would.
func TestSinkRecoverRescaled(t *testing.T) {
	c := newCluster(t, 2, []string{"out"})
	brokers := c.ListenAddrs()
	cfg := stringSink(t, brokers, "rescale")
	old := make([]*sink[string], 3)
	var txns [][]byte
	var want []string
	for i := range old {
		old[i] = openSink(t, cfg, i, 3)
		rs := recs(fmt.Sprintf("s%d-", i), 4)
		txns = append(txns, writeTxn(t, old[i], rs...))
		want = append(want, rs...)
	}
	if err := old[2].Write("open"); err != nil {
		t.Fatal(err)
	}
	if err := old[2].cur.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range old {
		crash(s)
	}
	// As ringflow's TxnSink deals them: old subtask j to j mod 2.
	b0 := openSink(t, cfg, 0, 2, txns[0], txns[2])
	defer b0.Close()
	b1 := openSink(t, cfg, 1, 2, txns[1])
	defer b1.Close()
	diff(t, readTopic(t, brokers, "out", true), sorted(want))
	assertNoOpenTxn(t, b0.client, "out")
}

// TestSinkRecoverOtherPrefix checks what a process of a distributed job
// rescaled to fewer processes does with the transactions of an old
// process whose transactional ids no new process uses (another prefix):
// it commits the pre-committed one and fences the old subtask's ids,
// aborting the transaction the old process left open after it.
func TestSinkRecoverOtherPrefix(t *testing.T) {
	c := newCluster(t, 2, []string{"out"})
	brokers := c.ListenAddrs()
	old := openSink(t, stringSink(t, brokers, "job-2-out"), 1, 2)
	kept := recs("kept", 4)
	txn := writeTxn(t, old, kept...)
	if h := mustHandle(t, txn); h.prefix != "job-2-out" || h.subtask != 1 {
		t.Fatalf("handle %+v: want prefix job-2-out, subtask 1", h)
	}
	if err := old.Write("open"); err != nil {
		t.Fatal(err)
	}
	if err := old.cur.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	crash(old)
	s := openSink(t, stringSink(t, brokers, "job-0-out"), 0, 2, txn)
	defer s.Close()
	diff(t, readTopic(t, brokers, "out", true), kept)
	assertNoOpenTxn(t, s.client, "out")
}

// TestSinkPoolExhausted checks that a subtask whose every transactional id
// awaits a commit fails its next write, rather than reusing one.
func TestSinkPoolExhausted(t *testing.T) {
	c := newCluster(t, 1, []string{"out"})
	cfg := stringSink(t, c.ListenAddrs(), "pool")
	cfg.PoolSize = 2
	s := openSink(t, cfg, 0, 1)
	defer s.Close()
	writeTxn(t, s, "a")
	writeTxn(t, s, "b")
	if err := s.Write("c"); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("write with every id pending: %v, want ErrPoolExhausted", err)
	}
}

// TestSinkBrokerErrors injects errors into the transaction coordinator's
// and the partition leader's answers: a coordinator that is busy ending a
// transaction is waited for, and a produce the broker refuses fails the
// checkpoint's durable step and the commit, never committing a
// transaction with a record missing.
func TestSinkBrokerErrors(t *testing.T) {
	c := newCluster(t, 1, []string{"out"})
	brokers := c.ListenAddrs()
	cfg := stringSink(t, brokers, "faults")
	s := openSink(t, cfg, 0, 1)
	defer s.Close()

	// EndTxn: CONCURRENT_TRANSACTIONS twice, then the real answer.
	busy := 0
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if busy == 2 {
			return nil, nil, false
		}
		busy++
		c.KeepControl()
		resp := req.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp, nil, true
	})
	first := recs("a", 5)
	if err := s.Commit(context.Background(), writeTxn(t, s, first...)); err != nil {
		t.Fatalf("commit through a busy coordinator: %v", err)
	}
	diff(t, readTopic(t, brokers, "out", true), first)

	// Produce: a non-retriable error for the partition.
	c.Fault(kfakeFault(kmsg.Produce, kerr.InvalidRecord))
	if err := s.Write("bad"); err != nil {
		t.Fatal(err)
	}
	txn, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(context.Background()); err == nil {
		t.Fatal("durable succeeded for a transaction whose record the broker refused")
	}
	if err := s.Commit(context.Background(), txn); err == nil {
		t.Fatal("committed a transaction whose record the broker refused")
	}
	diff(t, readTopic(t, brokers, "out", true), first)
}

// TestSinkDeliveryWithoutTransactions checks the sink's other guarantees
// in jobs: without checkpoints the default is at-least-once (every record
// out once the job ends), and at-least-once with failures restarting the
// job from checkpoints loses no record.
func TestSinkDeliveryWithoutTransactions(t *testing.T) {
	c := newCluster(t, 2, []string{"in", "out", "out-alo"})
	brokers := c.ListenAddrs()
	evs := events(2, 500, 10, time.Millisecond)
	produce(t, brokers, "in", evs)
	want := eventLines(evs)
	sinkCfg := func(topic string, d Delivery) SinkConfig[event] {
		return SinkConfig[event]{Brokers: brokers, Topic: topic, Delivery: d, Logger: testLogger(t),
			Encode: func(e event) (*kgo.Record, error) { return &kgo.Record{Value: []byte(e.String())}, nil }}
	}

	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t)})
	ringflow.TxnSink(ringflow.Source(job, "in", Source(eventSource(brokers, true))), "out", Sink(sinkCfg("out", DeliveryDefault)))
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	diff(t, readTopic(t, brokers, "out", true), want)

	fail := newFailer(rand.New(rand.NewPCG(seeds.Seed(t), 5)), 2, int64(len(evs)))
	job = ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t),
		Restart:    ringflow.RestartStrategy{Attempts: 3},
		Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: t.TempDir()}})
	checked := ringflow.Map(ringflow.Source(job, "in", Source(eventSource(brokers, true))), "check", func(e event) event {
		fail.see()
		return e
	})
	ringflow.TxnSink(checked, "out", Sink(sinkCfg("out-alo", AtLeastOnce)))
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := slices.Compact(readTopic(t, brokers, "out-alo", true))
	diff(t, got, want)
}

// TestSinkCommitsAtCheckpoint runs a job whose periodic checkpoints are an
// hour apart: what the sink wrote stays invisible to read_committed
// consumers until a checkpoint (a savepoint) completes, and then becomes
// visible whole.
func TestSinkCommitsAtCheckpoint(t *testing.T) {
	c := newCluster(t, 2, []string{"in", "out"})
	brokers := c.ListenAddrs()
	evs := events(2, 100, 10, time.Millisecond)
	produce(t, brokers, "in", evs)
	dir := t.TempDir()
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: testLogger(t),
		Checkpoint: ringflow.CheckpointConfig{Interval: time.Hour, StateDir: filepath.Join(dir, "state"),
			SavepointDir: filepath.Join(dir, "savepoints")}})
	ringflow.TxnSink(ringflow.Source(job, "in", Source(eventSource(brokers, false))), "out", Sink(SinkConfig[event]{
		Brokers: brokers, Topic: "out", Logger: testLogger(t),
		Encode: func(e event) (*kgo.Record, error) { return &kgo.Record{Value: []byte(e.String())}, nil },
	}))
	done := runAsync(job)
	waitFor(t, 30*time.Second, "the records written, uncommitted", func() bool {
		return len(readTopic(t, brokers, "out", false)) == len(evs)
	})
	if got := readTopic(t, brokers, "out", true); len(got) != 0 {
		t.Fatalf("read_committed sees %d records before any checkpoint completed", len(got))
	}
	if _, err := job.Savepoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the records committed", func() bool {
		return len(readTopic(t, brokers, "out", true)) == len(evs)
	})
	if err := job.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	diff(t, readTopic(t, brokers, "out", true), eventLines(evs))
}

// TestSinkEncodeToReuses checks a sink with EncodeTo: every record
// arrives as written although the sink reuses records, and a record
// written once the pool is warm allocates nothing in the sink (the
// client's batches aside, a fraction of one per record).
func TestSinkEncodeToReuses(t *testing.T) {
	c := newCluster(t, 1, []string{"out"})
	brokers := c.ListenAddrs()
	cfg := stringSink(t, brokers, "reuse")
	cfg.Encode = nil
	cfg.EncodeTo = func(s string, r *kgo.Record) error {
		if len(r.Value) != 0 || r.Topic != "" || r.Offset != 0 {
			return fmt.Errorf("handed a record not reset: %+v", r)
		}
		r.Value = append(r.Value, s...)
		return nil
	}
	s := openSink(t, cfg, 0, 1)
	defer s.Close()
	var want []string
	for i := range 3 {
		batch := recs(fmt.Sprintf("t%d-", i), 500)
		want = append(want, batch...)
		if err := s.Commit(context.Background(), writeTxn(t, s, batch...)); err != nil {
			t.Fatal(err)
		}
	}
	diff(t, readTopic(t, brokers, "out", true), sorted(want))

	const perRun = 1000
	vals := recs("x", perRun)
	allocs := testing.AllocsPerRun(20, func() {
		for _, v := range vals {
			if err := s.Write(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.cur.cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations per %d records", allocs, perRun)
	if allocs > perRun/10 {
		t.Fatalf("%.0f allocations per %d records written: the sink does not reuse its records", allocs, perRun)
	}
}

// TestSinkConfigErrors checks that Open names what a config lacks.
func TestSinkConfigErrors(t *testing.T) {
	enc := func(string) (*kgo.Record, error) { return nil, nil }
	encTo := func(string, *kgo.Record) error { return nil }
	for _, tc := range []struct {
		cfg  SinkConfig[string]
		want string
	}{
		{SinkConfig[string]{Encode: enc}, "no Brokers"},
		{SinkConfig[string]{Brokers: []string{"localhost:1"}}, "no Encode or EncodeTo function"},
		{SinkConfig[string]{Brokers: []string{"localhost:1"}, Encode: enc, EncodeTo: encTo}, "both Encode and EncodeTo"},
		{SinkConfig[string]{Brokers: []string{"localhost:1"}, Encode: enc, Delivery: 9}, "unknown Delivery 9"},
	} {
		err := Sink(tc.cfg)().Open(context.Background(), 0, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
}

// TestSinkKeepsOrderAcrossTransactions holds back the produce requests of
// a subtask's first transaction at the broker while the subtask writes
// its next one, on another transactional id: the partition must still
// have the first transaction's records before the second's. Without the
// sink's hold, the second producer's records reach the log first (a
// repartition topic's reader would then see a watermark or end marker
// ahead of records written before it).
func TestSinkKeepsOrderAcrossTransactions(t *testing.T) {
	c := newCluster(t, 1, []string{"out"})
	brokers := c.ListenAddrs()
	s := openSink(t, stringSink(t, brokers, "order"), 0, 1)
	defer s.Close()
	first := transactionalID("order", 0, 0)
	secondArrived, held := make(chan struct{}), false
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		id := req.(*kmsg.ProduceRequest).TransactionID
		switch {
		case id == nil:
		case *id == first && !held:
			held = true
			// NB: the wait is bounded so that a sink that holds the
			// second transaction back until this one is in (the
			// behaviour under test) does not wait for ever.
			c.SleepControl(func() {
				select {
				case <-secondArrived:
				case <-time.After(2 * time.Second):
				}
			})
		case *id != first:
			once.Do(func() { close(secondArrived) })
		}
		return nil, nil, false
	})
	for _, r := range []string{"a1", "a2"} {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	txn1, durable1, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write("b1"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := durable1(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn1); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, writeTxn(t, s, "b2")); err != nil {
		t.Fatal(err)
	}
	if got, want := readTopicInOrder(t, brokers, "out", true), []string{"a1", "a2", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("partition holds %v, want %v", got, want)
	}
}
