package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
)

// The end-to-end job: events from the partitions of topic "in", counted
// and summed per key in tumbling event-time windows of windowSize, the
// results written to topic "out" by the exactly-once sink.

const windowSize = 100 * time.Millisecond

// windowAgg counts a window's events and sums their sequence numbers.
type windowAgg struct{}

func (windowAgg) Create() [2]int64                 { return [2]int64{} }
func (windowAgg) Add(a [2]int64, e event) [2]int64 { return [2]int64{a[0] + 1, a[1] + int64(e.Seq)} }
func (windowAgg) Result(a [2]int64) [2]int64       { return a }
func (windowAgg) Merge(a, b [2]int64) [2]int64     { return [2]int64{a[0] + b[0], a[1] + b[1]} }
func windowLine(key int, start, end int64, a [2]int64) string {
	return fmt.Sprintf("key %d [%d,%d) count %d sum %d", key, start, end, a[0], a[1])
}

// windowOracle computes the job's output directly from its input.
func windowOracle(evs []event) []string {
	type kw struct {
		key   int
		start int64
	}
	acc := map[kw][2]int64{}
	size := windowSize.Milliseconds()
	for _, e := range evs {
		k := kw{e.Key, e.TsMs - e.TsMs%size}
		acc[k] = windowAgg{}.Add(acc[k], e)
	}
	var out []string
	for k, a := range acc {
		out = append(out, windowLine(k.key, k.start, k.start+size, a))
	}
	slices.Sort(out)
	return out
}

type windowJobOpts struct {
	brokers  []string
	stateDir string
	// check runs for every event before the windows: a failure or a
	// delay.
	check    func()
	restarts int
	logger   *slog.Logger
}

func windowJob(o windowJobOpts) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2, Logger: o.logger,
		Restart:    ringflow.RestartStrategy{Attempts: o.restarts},
		Checkpoint: ringflow.CheckpointConfig{Interval: 15 * time.Millisecond, StateDir: o.stateDir}})
	src := ringflow.SourceWithOwnEventTime(job, "in", Source(SourceConfig[event]{
		Brokers: o.brokers, Topics: []string{"in"}, Decode: decodeEvent, Bounded: true,
		EventTime: func(e event) int64 { return e.TsMs }, Logger: o.logger,
	}))
	checked := ringflow.Map(src, "check", func(e event) event {
		o.check()
		return e
	})
	sums := ringflow.Window(ringflow.KeyBy(checked, func(e event) int { return e.Key }), "window",
		ringflow.TumblingWindows(windowSize), windowAgg{})
	ringflow.TxnSink(sums, "out", Sink(SinkConfig[ringflow.WindowResult[int, [2]int64]]{
		Brokers: o.brokers, Topic: "out", Logger: o.logger,
		Encode: func(r ringflow.WindowResult[int, [2]int64]) (*kgo.Record, error) {
			return &kgo.Record{Value: []byte(windowLine(r.Key, r.Start, r.End, r.Value))}, nil
		},
	}))
	return job
}

// TestEndToEndUninterrupted checks the oracle against the job run
// without failures: the other end-to-end tests compare with the oracle.
func TestEndToEndUninterrupted(t *testing.T) {
	c := newCluster(t, 4, []string{"in", "out"})
	brokers := c.ListenAddrs()
	evs := events(4, 500, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	job := windowJob(windowJobOpts{brokers: brokers, stateDir: filepath.Join(t.TempDir(), "state"),
		check: func() {}, logger: testLogger(t)})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	diff(t, readTopic(t, brokers, "out", true), windowOracle(evs))
}

// TestEndToEndExactlyOnce runs Kafka → key by → event-time window → Kafka
// while failures strike at seeded random points: panics at random events,
// a commit the transaction coordinator fails, a produce and a fetch the
// broker fails, a coordinator still loading.
// The job restarts from its checkpoints each time, and a read_committed
// consumer of the output sees exactly the windows an uninterrupted run
// computes, each once.
func TestEndToEndExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 3))
	n, panics := 1000, 2
	if *stress {
		n, panics = 10_000, 6
	}
	c := newCluster(t, 4, []string{"in", "out"})
	brokers := c.ListenAddrs()
	evs := events(4, n, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	fail := newFailer(rng, panics, int64(len(evs)))
	endTxnAt, produceAt, fetchAt, initAt := 1+rng.IntN(8), 1+rng.IntN(20), 1+rng.IntN(20), 1+rng.IntN(10)
	t.Logf("panics at events %v; EndTxn %d, produce %d to out, fetch %d of in and InitProducerID %d fail",
		fail.at, endTxnAt, produceAt, fetchAt, initAt)
	c.Fault(nthFault(kmsg.EndTxn, "", endTxnAt, kerr.UnknownServerError),
		nthFault(kmsg.Produce, "out", produceAt, kerr.InvalidRecord),
		nthFault(kmsg.Fetch, "in", fetchAt, kerr.UnknownServerError),
		nthFault(kmsg.InitProducerID, "", initAt, kerr.CoordinatorLoadInProgress))

	job := windowJob(windowJobOpts{brokers: brokers, stateDir: filepath.Join(t.TempDir(), "state"),
		check: func() {
			fail.see()
			spin(20 * time.Microsecond)
		},
		restarts: panics + 8, logger: testLogger(t)})
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d restarts, %d checkpoints", job.Metrics().Restarts, job.Metrics().CheckpointsCompleted)
	diff(t, readTopic(t, brokers, "out", true), windowOracle(evs))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	assertNoOpenTxn(t, cl, "out")
}

// nthFault fails the n-th request of key (to topic, if not "") with err.
func nthFault(key kmsg.Key, topic string, n int, err *kerr.Error) kfake.Fault {
	seen := 0
	return kfake.Fault{Keys: []kmsg.Key{key}, Topic: topic, Err: err, Count: 1,
		When: func(kmsg.Request) bool {
			seen++
			return seen == n
		}}
}

// The SIGKILL test runs the end-to-end job in a child process: the test
// binary again, which TestMain turns into the job when killChildEnv names
// its directory. The kfake cluster lives in the parent.
const killChildEnv = "RINGFLOW_KAFKA_KILL_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir, strings.Split(os.Getenv(killChildEnv+"_BROKERS"), ",")))
	}
	if code, ok := distChildMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func killChild(dir string, brokers []string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	job := windowJob(windowJobOpts{brokers: brokers, stateDir: filepath.Join(dir, "state"),
		check: func() { spin(100 * time.Microsecond) }, logger: logger})
	// NB: a child that finds the job finished (the previous child ran to
	// the end before its kill) has nothing left to do.
	if err := job.Run(context.Background()); err != nil && !errors.Is(err, ringflow.ErrFinished) {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// TestKillAndResume kills the job's process with SIGKILL at random
// moments once it has written some output — mid-transaction, or between a
// pre-commit and its commit — and resumes it from its state directory
// each time, then lets it finish: the committed output holds exactly the
// windows of an uninterrupted run.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 4))
	n, kills := 1500, 4
	if *stress {
		n, kills = 6000, 10
	}
	c := newCluster(t, 4, []string{"in", "out"})
	brokers := c.ListenAddrs()
	evs := events(4, n, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	dir := t.TempDir()
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killChildEnv+"_BROKERS="+strings.Join(brokers, ","))
		cmd.Stderr = os.Stderr
		return cmd
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// written counts the offsets of the output, committed or not: it
	// grows as a child produces.
	written := func() int64 {
		var n int64
		for _, end := range endOffsets(t, cl, "out", false) {
			n += end
		}
		return n
	}
	for i := range kills {
		cmd := child()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Kill once the child has produced a random number of records
		// more: mid-transaction, or between a pre-commit and its commit.
		target := written() + 1 + rng.Int64N(150)
		deadline := time.Now().Add(30 * time.Second)
		for written() < target && time.Now().Before(deadline) && len(exited) == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := <-exited
		// NB: the last stable offset stops at a transaction the child left
		// open, so this reads what was committed before it.
		t.Logf("kill %d at %d offsets written (target %d): %v; %d windows committed", i+1, written(), target, err,
			len(readTopic(t, brokers, "out", true)))
		if err == nil {
			t.Logf("the child finished before the kill")
		}
	}
	if err := child().Run(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	diff(t, readTopic(t, brokers, "out", true), windowOracle(evs))
	assertNoOpenTxn(t, cl, "out")
}

// TestFinalCommitOnRerun fails every commit once the job has seen all its
// input, so that the run fails at (or just before) its final checkpoint's
// commits; a second run on the state directory commits what the
// checkpoint left pre-committed (or finishes the job), and the committed
// output is exactly the oracle's.
func TestFinalCommitOnRerun(t *testing.T) {
	c := newCluster(t, 4, []string{"in", "out"})
	brokers := c.ListenAddrs()
	evs := events(4, 300, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	var seen atomic.Int64
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: -1,
		When: func(kmsg.Request) bool { return seen.Load() >= int64(len(evs)) }})
	state := filepath.Join(t.TempDir(), "state")
	job := windowJob(windowJobOpts{brokers: brokers, stateDir: state, check: func() { seen.Add(1) }, logger: testLogger(t)})
	err := job.Run(context.Background())
	t.Logf("first run: %v (%d checkpoints)", err, job.Metrics().CheckpointsCompleted)
	if err == nil {
		t.Fatal("the first run committed although every commit after its input failed")
	}
	h.Remove()
	job = windowJob(windowJobOpts{brokers: brokers, stateDir: state, check: func() {}, logger: testLogger(t)})
	if err := job.Run(context.Background()); err != nil && !errors.Is(err, ringflow.ErrFinished) {
		t.Fatal(err)
	} else {
		t.Logf("second run: %v", err)
	}
	diff(t, readTopic(t, brokers, "out", true), windowOracle(evs))
}
