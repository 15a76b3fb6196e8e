package kafka

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow/internal/testseed"
)

var (
	seeds  = testseed.Flag("seed", "KAFKA_SEED")
	stress = flag.Bool("stress", false, "run the end-to-end and SIGKILL tests with more records, failures and kills")
)

// newCluster starts a one-broker kfake cluster with the given topics of
// partitions each; it closes with the test.
func newCluster(t testing.TB, partitions int32, topics []string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// event is the input of the tests' jobs: a key, a sequence number within
// its partition and an event time.
type event struct {
	Key  int
	Seq  int
	Part int32
	TsMs int64
}

func (e event) String() string { return fmt.Sprintf("%d/%d/%d/%d", e.Key, e.Part, e.Seq, e.TsMs) }

func parseEvent(s string) (event, error) {
	var e event
	_, err := fmt.Sscanf(s, "%d/%d/%d/%d", &e.Key, &e.Part, &e.Seq, &e.TsMs)
	return e, err
}

func decodeEvent(r *kgo.Record) (event, error) { return parseEvent(string(r.Value)) }

// events makes n events for each of partitions partitions: partition p's
// i-th event has key (i*7+p) % keys and event time base + i*step (in
// order within the partition).
func events(partitions, n, keys int, step time.Duration) []event {
	var out []event
	for p := range partitions {
		for i := range n {
			out = append(out, event{Key: (i*7 + p) % keys, Seq: i, Part: int32(p), TsMs: 1_000_000 + int64(i)*step.Milliseconds()})
		}
	}
	return out
}

// produce writes evs to topic, each to its partition, with its event time
// as the record's timestamp, and waits for the brokers to take them.
func produce(t testing.TB, brokers []string, topic string, evs []event) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		rs[i] = &kgo.Record{Topic: topic, Partition: e.Part, Value: []byte(e.String()), Timestamp: time.UnixMilli(e.TsMs)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// endOffsets returns the end offsets of topic's partitions: the last
// stable offsets with committed, else the high watermarks.
func endOffsets(t testing.TB, cl *kgo.Client, topic string, committed bool) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.Offset
	}
	return out
}

// readTopic returns the values of topic's records up to its end offsets,
// as a read_committed (or read_uncommitted) consumer sees them, sorted.
func readTopic(t testing.TB, brokers []string, topic string, committed bool) []string {
	t.Helper()
	out := readTopicInOrder(t, brokers, topic, committed)
	slices.Sort(out)
	return out
}

// readTopicInOrder is readTopic in the order of each partition's offsets.
func readTopicInOrder(t testing.TB, brokers []string, topic string, committed bool) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	hwm := endOffsets(t, cl, topic, false)
	if !committed {
		cl.Close()
		return values(consume(t, brokers, topic, false, hwm, hwm))
	}
	ends := endOffsets(t, cl, topic, true)
	cl.Close()
	// NB: a read_committed consumer steps over aborted records without
	// returning them, so when a partition's last records before its last
	// stable offset are aborted (their marker follows an open
	// transaction's first record), the last record it returns is short of
	// that offset: the read stops at the last record it can return, found
	// by reading the partition uncommitted, markers past that offset
	// included.
	stops := lastReturned(consume(t, brokers, topic, false, hwm, hwm), ends)
	return values(consume(t, brokers, topic, true, ends, stops))
}

// consume reads topic's records below ends, control records included,
// until every partition has returned its record before stops.
func consume(t testing.TB, brokers []string, topic string, committed bool, ends, stops map[int32]int64) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	parts := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p, stop := range stops {
		if stop > 0 {
			parts[p] = kgo.NewOffset().At(0)
			next[p] = 0
		}
	}
	var out []*kgo.Record
	if len(parts) == 0 {
		return out
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !reached(next, stops) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v (at %v of %v)", topic, err, next, stops)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			out = append(out, r)
		})
	}
	return out
}

// values returns the values of recs that are not control records.
func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// lastReturned returns, for each partition, one past the offset of the
// last record below ends that a read_committed consumer returns: control
// records, and data records that are not transactional or whose
// transaction committed. recs are the partition's records in order, read
// uncommitted past ends, so that a transaction decided before ends whose
// marker lies past them is known.
func lastReturned(recs []*kgo.Record, ends map[int32]int64) map[int32]int64 {
	type txn struct {
		part int32
		pid  int64
	}
	open := map[txn]int64{} // the last offset below ends of each transaction's data
	out := map[int32]int64{}
	for p := range ends {
		out[p] = 0
	}
	returned := func(r *kgo.Record, off int64) {
		if off < ends[r.Partition] {
			out[r.Partition] = max(out[r.Partition], off+1)
		}
	}
	for _, r := range recs {
		k := txn{r.Partition, r.ProducerID}
		switch {
		case r.Attrs.IsControl():
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(r.Key); err == nil && key.Type == kmsg.ControlRecordKeyTypeCommit {
				if last, ok := open[k]; ok {
					returned(r, last)
				}
			}
			delete(open, k)
			returned(r, r.Offset)
		case r.Attrs.IsTransactional():
			if r.Offset < ends[r.Partition] {
				open[k] = r.Offset
			}
		default:
			returned(r, r.Offset)
		}
	}
	return out
}

func reached(next, stops map[int32]int64) bool {
	for p, stop := range stops {
		if next[p] < stop && stop > 0 {
			return false
		}
	}
	return true
}

// diff fails t, showing a few differences, unless got and want (sorted)
// are equal.
func diff(t testing.TB, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	extra, missing := map[string]int{}, map[string]int{}
	for _, s := range got {
		extra[s]++
	}
	for _, s := range want {
		if extra[s] > 0 {
			extra[s]--
		} else {
			missing[s]++
		}
	}
	var ex, mi []string
	for s, n := range extra {
		if n > 0 {
			ex = append(ex, fmt.Sprintf("%s×%d", s, n))
		}
	}
	for s, n := range missing {
		mi = append(mi, fmt.Sprintf("%s×%d", s, n))
	}
	slices.Sort(ex)
	slices.Sort(mi)
	t.Fatalf("got %d records, want %d: %d extra (%s), %d missing (%s)",
		len(got), len(want), len(ex), head(ex), len(mi), head(mi))
}

func head(xs []string) string {
	if len(xs) > 8 {
		return strings.Join(xs[:8], " ") + " ..."
	}
	return strings.Join(xs, " ")
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kfakeFault fails the next request of key with err.
func kfakeFault(key kmsg.Key, err *kerr.Error) kfake.Fault {
	return kfake.Fault{Keys: []kmsg.Key{key}, Err: err}
}

// testLogger logs warnings and errors to t's output, without stacks.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "stack" {
				return slog.Attr{}
			}
			return a
		},
	}))
}
