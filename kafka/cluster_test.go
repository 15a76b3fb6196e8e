package kafka

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// restartable is a kfake cluster that persists to a directory, so that it
// can be stopped and started again on the same port with its data.
type restartable struct {
	t       *testing.T
	dir     string
	port    int
	c       *kfake.Cluster
	brokers []string
}

func newRestartable(t *testing.T, partitions int32, topics ...string) *restartable {
	r := &restartable{t: t, dir: t.TempDir()}
	r.start(kfake.SeedTopics(partitions, topics...))
	_, port, err := net.SplitHostPort(r.brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	r.port, _ = strconv.Atoi(port)
	t.Cleanup(func() { r.c.Close() })
	return r
}

func (r *restartable) start(opts ...kfake.Opt) {
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(r.dir), kfake.SyncWrites()}, opts...)
	if r.port != 0 {
		opts = append(opts, kfake.Ports(r.port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.c, r.brokers = c, c.ListenAddrs()
}

// restart stops the cluster and starts it again from its directory.
func (r *restartable) restart() {
	r.c.Close()
	r.start()
}

// TestSinkClusterRestart pre-commits a transaction, restarts the cluster,
// and restores the sink: the transaction survived in the brokers' state
// and is committed; the one left open is aborted.
func TestSinkClusterRestart(t *testing.T) {
	r := newRestartable(t, 2, "out")
	cfg := stringSink(t, r.brokers, "restart")
	a := openSink(t, cfg, 0, 1)
	kept := recs("kept", 20)
	txn := writeTxn(t, a, kept...)
	if err := a.Write("lost"); err != nil {
		t.Fatal(err)
	}
	if err := a.cur.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	crash(a)
	r.restart()
	b := openSink(t, cfg, 0, 1, txn)
	defer b.Close()
	diff(t, readTopic(t, r.brokers, "out", true), kept)
	assertNoOpenTxn(t, b.client, "out")
}

// TestEndToEndClusterRestart restarts the cluster under a running
// end-to-end job: its clients fail or wait, the job restarts from its
// checkpoints as needed, and the committed output is still exactly the
// windows of an uninterrupted run.
func TestEndToEndClusterRestart(t *testing.T) {
	r := newRestartable(t, 4, "in", "out")
	evs := events(4, 1000, 40, time.Millisecond)
	produce(t, r.brokers, "in", evs)
	job := windowJob(windowJobOpts{brokers: r.brokers, stateDir: filepath.Join(t.TempDir(), "state"),
		check: func() { spin(200 * time.Microsecond) }, restarts: 20, logger: testLogger(t)})
	done := runAsync(job)
	waitFor(t, 30*time.Second, "a checkpoint", func() bool { return job.Metrics().CheckpointsCompleted > 0 })
	r.restart()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m := job.Metrics()
	t.Logf("%d restarts, %d checkpoints (%d failed)", m.Restarts, m.CheckpointsCompleted, m.CheckpointsFailed)
	diff(t, readTopic(t, r.brokers, "out", true), windowOracle(evs))
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	assertNoOpenTxn(t, cl, "out")
}
