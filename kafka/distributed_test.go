package kafka

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// The distributed job: events of topic "in", counted and summed per key
// in tumbling event-time windows, then per group of keys (key mod
// distGroups) in windows again, the results written to an output topic
// exactly once. Run as distProcesses processes, its two keyed exchanges
// are repartition topics.

const (
	distProcesses = 3
	distGroups    = 5
	distJobID     = "dist"
	// distChildEnv names, in a child process of TestDistributedKilled,
	// its directory; _BROKERS and _PROCESS give the cluster and its
	// number.
	distChildEnv = "RINGFLOW_KAFKA_DIST_CHILD"
)

type perKey = ringflow.WindowResult[int, [2]int64]

// groupAgg counts a group's per-key windows and adds up their counts and
// sums.
type groupAgg struct{}

func (groupAgg) Create() [3]int64 { return [3]int64{} }
func (groupAgg) Add(a [3]int64, r perKey) [3]int64 {
	return [3]int64{a[0] + 1, a[1] + r.Value[0], a[2] + r.Value[1]}
}
func (groupAgg) Result(a [3]int64) [3]int64   { return a }
func (groupAgg) Merge(a, b [3]int64) [3]int64 { return [3]int64{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }

func groupLine(g int, start, end int64, a [3]int64) string {
	return fmt.Sprintf("group %d [%d,%d) windows %d count %d sum %d", g, start, end, a[0], a[1], a[2])
}

// groupOracle computes the job's output directly from its input.
func groupOracle(evs []event) []string {
	type kw struct {
		key   int
		start int64
	}
	keys := map[kw][2]int64{}
	size := windowSize.Milliseconds()
	for _, e := range evs {
		k := kw{e.Key, e.TsMs - e.TsMs%size}
		keys[k] = windowAgg{}.Add(keys[k], e)
	}
	groups := map[kw][3]int64{}
	for k, a := range keys {
		g := kw{k.key % distGroups, k.start}
		groups[g] = groupAgg{}.Add(groups[g], perKey{Key: k.key, Value: a})
	}
	var out []string
	for g, a := range groups {
		out = append(out, groupLine(g.key, g.start, g.start+size, a))
	}
	slices.Sort(out)
	return out
}

type distJobOpts struct {
	brokers  []string
	stateDir string
	out      string            // the output topic
	cluster  *ringflow.Cluster // nil: one process
	check    func()
	restarts int
	// savepoints is CheckpointConfig.SavepointDir; restoreFrom is
	// Config.RestoreFrom.
	savepoints, restoreFrom string
	// parallelism is Config.Parallelism; 2 if 0.
	parallelism int
	logger      *slog.Logger
	events      *ringflow.EventListener
}

func distJob(o distJobOpts) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, NoPin: true, RaiseGOMAXPROCS: true, Parallelism: cmp.Or(o.parallelism, 2), BatchSize: 32,
		Logger: o.logger, Cluster: o.cluster, Events: o.events, Restart: ringflow.RestartStrategy{Attempts: o.restarts},
		RestoreFrom: o.restoreFrom,
		Checkpoint:  ringflow.CheckpointConfig{Interval: 20 * time.Millisecond, StateDir: o.stateDir, SavepointDir: o.savepoints}})
	src := ringflow.SourceWithOwnEventTime(job, "in", Source(SourceConfig[event]{
		Brokers: o.brokers, Topics: []string{"in"}, Decode: decodeEvent, Bounded: true,
		EventTime: func(e event) int64 { return e.TsMs }, Logger: o.logger,
		// NB: a record written twice is counted twice, not dropped as late
		// behind a watermark that went out after its first copy.
		OutOfOrderness: 300 * time.Millisecond,
	}))
	checked := ringflow.Map(src, "check", func(e event) event { o.check(); return e })
	keys := ringflow.Window(ringflow.KeyBy(checked, func(e event) int { return e.Key }), "window",
		ringflow.TumblingWindows(windowSize), windowAgg{})
	groups := ringflow.Window(ringflow.KeyBy(keys, func(r perKey) int { return r.Key % distGroups }), "groups",
		ringflow.TumblingWindows(windowSize), groupAgg{})
	ringflow.TxnSink(groups, "out", Sink(SinkConfig[ringflow.WindowResult[int, [3]int64]]{
		Brokers: o.brokers, Topic: o.out, Logger: o.logger,
		Encode: func(r ringflow.WindowResult[int, [3]int64]) (*kgo.Record, error) {
			return &kgo.Record{Value: []byte(groupLine(r.Key, r.Start, r.End, r.Value))}, nil
		},
	}))
	return job
}

func distCluster(brokers []string, process int, logger *slog.Logger) *ringflow.Cluster {
	return &ringflow.Cluster{JobID: distJobID, Process: process, Processes: distProcesses, Partitions: 12,
		Exchange: Exchange(ExchangeConfig{Brokers: brokers, Logger: logger})}
}

// distChild runs process p of the distributed job in a child process, on
// the state directory dir/state, its savepoints in dir/savepoints/state;
// of procs processes (distProcesses if 0), rescaled from the savepoints
// rescale if there are any.
func distChild(dir string, brokers []string, p, procs int, state, restoreFrom string, rescale []string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var ready sync.Once
	cluster := distCluster(brokers, p, logger)
	cluster.Processes = cmp.Or(procs, distProcesses)
	cluster.RestoreFrom = rescale
	job := distJob(distJobOpts{brokers: brokers, stateDir: filepath.Join(dir, state), out: "out",
		cluster: cluster, check: func() { spin(500 * time.Microsecond) }, logger: logger,
		restarts: 10, savepoints: filepath.Join(dir, "savepoints", state), restoreFrom: restoreFrom,
		events: &ringflow.EventListener{CheckpointCompleted: func(ringflow.CheckpointStats) {
			ready.Do(func() { fmt.Println("ready") })
		}}})
	// SIGTERM stops the process with a savepoint.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		if _, err := job.StopWithSavepoint(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "process %d: stop with a savepoint: %v\n", p, err)
		}
	}()
	// NB: a process that finds its part finished (it ran to the end
	// before a kill) has nothing left to do.
	if err := job.Run(context.Background()); err != nil && !errors.Is(err, ringflow.ErrFinished) {
		fmt.Fprintf(os.Stderr, "process %d: %v\n", p, err)
		return 1
	}
	return 0
}

// TestDistributedKilled runs the job as distProcesses child processes on
// one kfake cluster, SIGKILLs one of them at seeded random moments and
// starts it again on its state directory, fails two commits of
// repartition transactions, and lets all finish: a read_committed
// consumer of the output finds exactly what the same job run as one
// process wrote.
func TestDistributedKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	n, kills := 2500, 6
	if *stress {
		n, kills = 8000, 20
	}
	runDistributed(t, n, kills)
}

// TestDistributed runs the job as distProcesses child processes, none
// killed: the output is the one process's. It takes about a second, so it
// runs under -short too.
func TestDistributed(t *testing.T) {
	runDistributed(t, 500, 0)
}

// distReference starts a cluster with n events in each of the 4
// partitions of topic "in", runs the job as one process into topic "ref"
// and returns what it wrote, checked against the oracle.
func distReference(t *testing.T, n int) (c *kfake.Cluster, evs []event, want []string) {
	t.Helper()
	c = newCluster(t, 4, []string{"in", "out", "ref"})
	brokers := c.ListenAddrs()
	evs = events(4, n, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	ref := distJob(distJobOpts{brokers: brokers, stateDir: filepath.Join(t.TempDir(), "ref"), out: "ref",
		check: func() {}, logger: testLogger(t)})
	if err := ref.Run(context.Background()); err != nil {
		t.Fatalf("one process: %v", err)
	}
	want = readTopic(t, brokers, "ref", true)
	diff(t, want, groupOracle(evs)) // the one process is right
	return c, evs, want
}

// startEveryDist starts every process of the distributed job; the test's
// end kills those in the returned slice, whichever it then holds.
func startEveryDist(t *testing.T, dir string, brokers []string) []*distProc {
	procs := make([]*distProc, distProcesses)
	for p := range procs {
		procs[p] = startDist(t, dir, brokers, p)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
	})
	return procs
}

func runDistributed(t *testing.T, n, kills int) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 5))
	c, evs, want := distReference(t, n)
	brokers := c.ListenAddrs()

	dir := t.TempDir()
	procs := startEveryDist(t, dir, brokers)
	if kills > 0 {
		// Two commits of repartition transactions fail, from a random
		// moment on: the process fails after its checkpoint completed and
		// before its transactions committed, restores that checkpoint and
		// commits them from their handles.
		failFrom := time.Now().Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		var failed atomic.Int64
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 2,
			When: func(req kmsg.Request) bool {
				r := req.(*kmsg.EndTxnRequest)
				hit := r.Commit && strings.HasPrefix(r.TransactionalID, distJobID+"-") && time.Now().After(failFrom)
				if hit {
					failed.Add(1)
				}
				return hit
			}})
		defer func() {
			h.Remove()
			t.Logf("%d commits of repartition transactions failed", failed.Load())
		}()
	}
	running := 0
	for i := range kills {
		// NB: each kill comes at a random moment after the process's
		// first checkpoint: mid-transaction, between a checkpoint and
		// its commits, or after the process finished.
		p := rng.IntN(distProcesses)
		select {
		case <-procs[p].ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("process %d took no checkpoint in 30 s", p)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		err, was := procs[p].kill(), "running"
		if procs[p].exitedBefore {
			was = "finished"
		} else {
			running++
		}
		t.Logf("kill %d: process %d (%s): %v", i+1, p, was, err)
		procs[p] = startDist(t, dir, brokers, p)
	}
	if kills > 0 && running == 0 {
		t.Fatal("every kill came after its process had finished: the test tested nothing")
	}
	waitDist(t, procs)
	// Each repartition topic holds, committed, each record once: every
	// event, then every key's windows.
	for topic, want := range map[string]int{"dist-rp0-check-window": len(evs), "dist-rp1-window-groups": len(windowOracle(evs))} {
		data := 0
		for _, v := range readTopic(t, brokers, topic, true) {
			if v[0] == 'd' {
				data++
			}
		}
		if data != want {
			t.Errorf("topic %s holds %d committed records, want %d", topic, data, want)
		}
	}
	diff(t, readTopic(t, brokers, "out", true), want)
}

// waitDist waits for every process to end, each with exit status 0.
func waitDist(t *testing.T, procs []*distProc) {
	t.Helper()
	deadline := time.After(time.Minute)
	for p, proc := range procs {
		select {
		case err := <-proc.exited:
			proc.exited <- err
			if err != nil {
				t.Fatalf("process %d: %v", p, err)
			}
		case <-deadline:
			t.Fatalf("process %d still runs after a minute", p)
		}
	}
}

// TestDistributedStopAndRestore stops each process with a savepoint
// (SIGTERM) at a seeded random moment, one after the other while the
// others run, then starts every process again from its savepoint on a
// new state directory: the output is the one process's.
func TestDistributedStopAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for a few seconds")
	}
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 6))
	c, _, want := distReference(t, 2500)
	brokers := c.ListenAddrs()
	dir := t.TempDir()
	procs := startEveryDist(t, dir, brokers)
	for _, proc := range procs {
		<-proc.ready
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		proc.cmd.Process.Signal(syscall.SIGTERM)
	}
	waitDist(t, procs)
	saved := 0
	for p := range procs {
		// NB: a process that ran to its end before its SIGTERM took no
		// savepoint; it resumes its finished state directory instead.
		state, from := "restored"+fmt.Sprint(p), filepath.Join(dir, "savepoints", fmt.Sprint(p))
		if entries, _ := os.ReadDir(from); len(entries) == 0 {
			t.Logf("process %d finished before its stop", p)
			state, from = fmt.Sprint(p), ""
		} else {
			saved++
		}
		procs[p] = startDistIn(t, dir, brokers, p, state, from)
	}
	if saved == 0 {
		t.Fatal("every process finished before its stop: the test tested nothing")
	}
	t.Logf("%d processes restored from their savepoints", saved)
	waitDist(t, procs)
	diff(t, readTopic(t, brokers, "out", true), want)
}

type distProc struct {
	cmd          *exec.Cmd
	ready        chan struct{}
	exited       chan error
	exitedBefore bool
}

func startDist(t *testing.T, dir string, brokers []string, p int) *distProc {
	return startDistIn(t, dir, brokers, p, fmt.Sprint(p), "")
}

// startDistIn starts process p on the state directory dir/state, from
// the savepoint restoreFrom if it is not "".
func startDistIn(t *testing.T, dir string, brokers []string, p int, state, restoreFrom string) *distProc {
	return startDistRescaled(t, dir, brokers, p, 0, state, restoreFrom, nil)
}

// startDistRescaled starts process p of procs (distProcesses if 0) on the
// state directory dir/state, from the savepoint restoreFrom if it is not
// "", or rescaled from the savepoints rescale.
func startDistRescaled(t *testing.T, dir string, brokers []string, p, procs int, state, restoreFrom string, rescale []string) *distProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), distChildEnv+"="+dir, distChildEnv+"_BROKERS="+strings.Join(brokers, ","),
		distChildEnv+"_PROCESS="+strconv.Itoa(p), distChildEnv+"_STATE="+state, distChildEnv+"_RESTORE="+restoreFrom,
		distChildEnv+"_PROCS="+strconv.Itoa(procs), distChildEnv+"_RESCALE="+strings.Join(rescale, string(filepath.ListSeparator)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &distProc{cmd: cmd, exited: make(chan error, 1), ready: make(chan struct{})}
	go func() {
		// NB: ready closes at the child's first checkpoint, or as it
		// ends without one (it found its part finished).
		defer close(d.ready)
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "ready" {
		}
	}()
	go func() {
		<-d.ready
		d.exited <- cmd.Wait()
	}()
	return d
}

// kill SIGKILLs the process unless it exited, and returns how it ended.
func (d *distProc) kill() error {
	select {
	case err := <-d.exited:
		d.exited <- err
		d.exitedBefore = true
		return err
	default:
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	err := <-d.exited
	d.exited <- err
	return err
}

func distChildMain() (int, bool) {
	dir := os.Getenv(distChildEnv)
	if dir == "" {
		return 0, false
	}
	p, err := strconv.Atoi(os.Getenv(distChildEnv + "_PROCESS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1, true
	}
	procs, _ := strconv.Atoi(os.Getenv(distChildEnv + "_PROCS"))
	var rescale []string
	if l := os.Getenv(distChildEnv + "_RESCALE"); l != "" {
		rescale = filepath.SplitList(l)
	}
	return distChild(dir, strings.Split(os.Getenv(distChildEnv+"_BROKERS"), ","), p, procs,
		os.Getenv(distChildEnv+"_STATE"), os.Getenv(distChildEnv+"_RESTORE"), rescale), true
}

// TestDistributedInProcess runs a job without event time as three
// processes' jobs in this process, a bounded input counted per key by a
// running Reduce: every key's counts 1..n come out once, and every job
// ends (the end of input crosses the repartition topic without
// watermarks).
func TestDistributedInProcess(t *testing.T) {
	c := newCluster(t, 4, []string{"in", "counts"})
	brokers := c.ListenAddrs()
	evs := events(4, 300, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	dir := t.TempDir()
	errs := make(chan error, distProcesses)
	// NB: the jobs share this process's Ps: the warning that their workers
	// leave none spare is expected.
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	jobs := make([]*ringflow.Job, distProcesses)
	for p := range distProcesses {
		job := ringflow.NewJob(ringflow.Config{Workers: 1, NoPin: true, Parallelism: 2, Logger: logger,
			Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(dir, fmt.Sprint(p))},
			Cluster: &ringflow.Cluster{JobID: "inproc", Process: p, Processes: distProcesses, Partitions: 6,
				Exchange: Exchange(ExchangeConfig{Brokers: brokers, Logger: logger})}})
		src := ringflow.Source(job, "in", Source(SourceConfig[event]{Brokers: brokers, Topics: []string{"in"},
			Decode: decodeEvent, Bounded: true, Logger: logger}))
		counts := ringflow.Reduce(ringflow.KeyBy(ringflow.Map(src, "one", func(e event) [2]int { return [2]int{e.Key, 1} }),
			func(r [2]int) int { return r[0] }), "count", func(acc, r [2]int) [2]int { return [2]int{r[0], acc[1] + r[1]} })
		ringflow.TxnSink(counts, "out", Sink(SinkConfig[[2]int]{Brokers: brokers, Topic: "counts", Logger: logger,
			TransactionalIDPrefix: fmt.Sprintf("inproc-%d-out", p),
			Encode: func(r [2]int) (*kgo.Record, error) {
				return &kgo.Record{Value: fmt.Appendf(nil, "%d:%d", r[0], r[1])}, nil
			},
		}))
		jobs[p] = job
		// NB: Graph races Run to cut the graph, which happens once.
		go job.Graph()
		go func() { errs <- job.Run(context.Background()) }()
	}
	for range distProcesses {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("a process still runs after a minute")
		}
	}
	n := map[int]int{}
	for _, e := range evs {
		n[e.Key]++
	}
	var want []string
	for k, c := range n {
		for i := 1; i <= c; i++ {
			want = append(want, fmt.Sprintf("%d:%d", k, i))
		}
	}
	slices.Sort(want)
	diff(t, readTopic(t, brokers, "counts", true), want)
	// Each process's key groups are shared out among its own subtasks.
	for p, job := range jobs {
		for _, s := range job.Metrics().Subtasks {
			if s.Operator == "count" && s.RecordsIn == 0 {
				t.Errorf("process %d: subtask %d of count got no records", p, s.Subtask)
			}
		}
	}
}

// TestDistributedIdleProducers runs an unbounded event-time job as three
// processes' jobs in this process, over 4 input partitions shared by 6
// source subtasks: the 2 that own none are idle, and their idleness
// crosses the repartition topic, so windows fire while the job runs
// rather than never.
func TestDistributedIdleProducers(t *testing.T) {
	c := newCluster(t, 4, []string{"in", "wins"})
	brokers := c.ListenAddrs()
	evs := events(4, 300, 40, time.Millisecond)
	produce(t, brokers, "in", evs)
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, distProcesses)
	for p := range distProcesses {
		job := ringflow.NewJob(ringflow.Config{Workers: 1, NoPin: true, Parallelism: 2, Logger: logger,
			Checkpoint: ringflow.CheckpointConfig{Interval: 10 * time.Millisecond, StateDir: filepath.Join(dir, fmt.Sprint(p))},
			Cluster: &ringflow.Cluster{JobID: "idle", Process: p, Processes: distProcesses, Partitions: 6,
				Exchange: Exchange(ExchangeConfig{Brokers: brokers, Logger: logger})}})
		src := ringflow.SourceWithOwnEventTime(job, "in", Source(SourceConfig[event]{Brokers: brokers,
			Topics: []string{"in"}, Decode: decodeEvent, Logger: logger, EventTime: func(e event) int64 { return e.TsMs }}))
		sums := ringflow.Window(ringflow.KeyBy(src, func(e event) int { return e.Key }), "window",
			ringflow.TumblingWindows(windowSize), windowAgg{})
		ringflow.TxnSink(sums, "out", Sink(SinkConfig[ringflow.WindowResult[int, [2]int64]]{
			Brokers: brokers, Topic: "wins", Logger: logger, TransactionalIDPrefix: fmt.Sprintf("idle-%d-out", p),
			Encode: func(r ringflow.WindowResult[int, [2]int64]) (*kgo.Record, error) {
				return &kgo.Record{Value: []byte(windowLine(r.Key, r.Start, r.End, r.Value))}, nil
			},
		}))
		go func() { errs <- job.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range distProcesses {
			<-errs
		}
	}()
	// The input's watermark ends just before its last window's end: every
	// window but the last fires.
	last := evs[len(evs)-1].TsMs
	last -= last % windowSize.Milliseconds()
	var want []string
	for _, w := range windowOracle(evs) {
		if !strings.Contains(w, fmt.Sprintf("[%d,", last)) {
			want = append(want, w)
		}
	}
	var got []string
	waitFor(t, 30*time.Second, "every window but the last committed", func() bool {
		got = readTopic(t, brokers, "wins", true)
		return len(got) >= len(want)
	})
	diff(t, got, want)
}
