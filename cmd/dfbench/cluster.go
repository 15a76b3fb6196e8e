package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark/queries"
	"github.com/ringflow/ringflow/bench/pipelines"
	"github.com/ringflow/ringflow/kafka"
)

// dfbench cluster runs a job as a distributed job (ringflow.Cluster): it
// starts a kfake cluster on the loopback address and --processes child
// processes of dfbench, each one process of the job, and reads topic
// "out" as a read_committed consumer.
//
// The job is keyed-count by default: the parent produces --records
// records into topic "in", each stamped with the time it was sent, and
// reports each process's throughput and the end-to-end latency, send to
// committed output, which includes a checkpoint interval or two per hop
// (records become visible when the checkpoint covering them completes).
//
// With --query and a Nexmark query it runs that query on --events events
// to the end of its input instead, and checks that its committed output
// is the output of the same query run in one process (cluster_nexmark.go).

type clusterFlags struct {
	query                              string // keyedCount or a Nexmark query
	processes, parallelism, partitions int
	records, keys                      int
	events                             uint64
	rate                               int
	interval, timeout                  time.Duration
	json                               bool
	child                              string
}

// keyedCount is --query's default: the job is keyed-count from topic "in".
const keyedCount = "keyed-count"

// clusterChildSpec is what a child runs; the parent passes it as JSON.
type clusterChildSpec struct {
	Brokers                 []string
	Process, Processes      int
	Parallelism, Partitions int
	Interval                time.Duration
	StateDir                string
	// Query is a Nexmark query, run on Events events generated at the
	// event-time rate EventRate; empty for keyed-count.
	Query     string `json:",omitempty"`
	Events    uint64 `json:",omitempty"`
	EventRate int    `json:",omitempty"`
}

// countRec is keyed-count's record: its key, the key's count so far and
// when the parent sent the record (Unix ns).
type countRec struct {
	Key, Count uint64
	SentNs     int64
}

// clusterReport is a child's line on stdout: its counts so far.
type clusterReport struct {
	Process     int
	Counted     int64 // records the keyed count took in
	Checkpoints int
	ElapsedNs   int64 // since the job started
	// A Nexmark query's counts: the events the process's source subtasks
	// generated, the rows its sink pre-committed, the records its windows
	// and joins dropped as late, its failed checkpoints and restarts.
	Events, Rows, LateDropped   int64 `json:",omitempty"`
	CheckpointsFailed, Restarts int   `json:",omitempty"`
}

func runCluster(args []string, stdout, stderr io.Writer) error {
	var f clusterFlags
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.query, "query", keyedCount, "job to run: "+keyedCount+", or a Nexmark query ("+
		strings.Join(queries.Names, "|")+") run to the end of --events events and checked against one process")
	fs.IntVar(&f.processes, "processes", 3, "processes that run the job")
	fs.IntVar(&f.parallelism, "parallelism", 1, "subtasks per operator in each process")
	fs.IntVar(&f.partitions, "partitions", 12, "partitions of the input, output and repartition topics")
	fs.IntVar(&f.records, "records", 200_000, "keyed-count: records to send")
	fs.IntVar(&f.keys, "keys", 10_000, "keyed-count: distinct keys")
	fs.Uint64Var(&f.events, "events", 1_000_000, "Nexmark query: events to generate (persons, auctions and bids), all processes together")
	fs.IntVar(&f.rate, "rate", 0, "keyed-count: records/s to send (0: as fast as the brokers take them); "+
		"Nexmark query: the generator's event-time rate, events per second, as dfbench nexmark's --rate "+
		"(0: 100,000, so that the default --events span 10 s of event time, as dfbench nexmark's defaults do)")
	fs.DurationVar(&f.interval, "checkpoint-interval", 100*time.Millisecond, "checkpoint interval of each process")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up when the output is not complete after this long")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
	fs.StringVar(&f.child, "child", "", "run one process of the job with this spec (internal)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if f.child != "" {
		return runClusterChild(f.child, os.Stdin, stdout)
	}
	if f.query != keyedCount {
		return runClusterQuery(f, fs, stdout, stderr)
	}
	if set := setFlags(fs, "events"); set != "" {
		fmt.Fprintf(stderr, "dfbench cluster: %s is for a Nexmark --query, not %s\n", set, keyedCount)
		return errUsage
	}
	if f.processes < 1 || f.partitions < f.processes || f.records < 1 || f.keys < 1 {
		fmt.Fprintln(stderr, "dfbench cluster: want --processes >= 1, --partitions >= --processes, --records and --keys >= 1")
		return errUsage
	}
	return clusterParent(f, stdout, stderr)
}

// clusterJob builds one process's job: keyed-count from "in" to "out",
// or the Nexmark query s.Query to "out" (then with its Output).
func clusterJob(s clusterChildSpec, logger *slog.Logger) (*ringflow.Job, *queries.Output, error) {
	id := "dfbench"
	if s.Query != "" {
		id += "-" + s.Query
	}
	job := ringflow.NewJob(ringflow.Config{Parallelism: s.Parallelism, NoPin: true, RaiseGOMAXPROCS: true,
		Logger: logger, Checkpoint: ringflow.CheckpointConfig{Interval: s.Interval, StateDir: s.StateDir},
		Cluster: &ringflow.Cluster{JobID: id, Process: s.Process, Processes: s.Processes, Partitions: s.Partitions,
			Exchange: kafka.Exchange(kafka.ExchangeConfig{Brokers: s.Brokers, Logger: logger})}})
	if s.Query != "" {
		out, err := clusterQueryJob(job, s, logger)
		return job, out, err
	}
	in := ringflow.Source(job, "in", kafka.Source(kafka.SourceConfig[countRec]{
		Brokers: s.Brokers, Topics: []string{"in"}, Logger: logger,
		Decode: func(r *kgo.Record) (countRec, error) {
			if len(r.Value) != 16 {
				return countRec{}, fmt.Errorf("record of %d bytes, want 16", len(r.Value))
			}
			return countRec{Key: binary.LittleEndian.Uint64(r.Value), Count: 1,
				SentNs: int64(binary.LittleEndian.Uint64(r.Value[8:]))}, nil
		},
	}))
	counts := ringflow.Reduce(ringflow.KeyBy(in, func(r countRec) uint64 { return r.Key }), "count",
		func(acc, r countRec) countRec { r.Count = acc.Count + 1; return r })
	ringflow.TxnSink(counts, "out", kafka.Sink(kafka.SinkConfig[countRec]{
		Brokers: s.Brokers, Topic: "out", Logger: logger,
		TransactionalIDPrefix: fmt.Sprintf("dfbench-%d-out", s.Process),
		Encode: func(r countRec) (*kgo.Record, error) {
			v := binary.LittleEndian.AppendUint64(nil, r.Key)
			v = binary.LittleEndian.AppendUint64(v, r.Count)
			return &kgo.Record{Value: binary.LittleEndian.AppendUint64(v, uint64(r.SentNs))}, nil
		},
	}))
	return job, nil, nil
}

// runClusterChild runs one process until stdin ends (the parent closed it,
// or is gone), reporting its counts on stdout every 200 ms and at the end.
func runClusterChild(spec string, stdin io.Reader, stdout io.Writer) error {
	var s clusterChildSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("--child %q: %w", spec, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	job, out, err := clusterJob(s, logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, stdin)
		cancel()
	}()
	enc, start := json.NewEncoder(stdout), time.Now()
	report := func() error {
		m := job.Metrics()
		r := clusterReport{Process: s.Process, Checkpoints: m.CheckpointsCompleted, ElapsedNs: int64(time.Since(start)),
			CheckpointsFailed: m.CheckpointsFailed, Restarts: m.Restarts}
		for _, st := range m.Subtasks {
			switch {
			case s.Query == "" && st.Operator == "count":
				r.Counted += st.RecordsIn
			case s.Query != "" && st.Operator == queries.SourceName:
				r.Events += st.RecordsOut
			}
			r.LateDropped += st.LateDropped
		}
		if out != nil {
			r.Rows = out.Rows()
		}
		return enc.Encode(r)
	}
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			// NB: keyed-count runs until canceled; a query runs to the
			// end of its input, and canceled it has not.
			if err != nil && (s.Query != "" || !errors.Is(err, context.Canceled)) {
				return err
			}
			return report()
		case <-tick.C:
			if err := report(); err != nil {
				return err
			}
		}
	}
}

// clusterChild is a running child and its latest report.
type clusterChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	last  clusterReport
	done  chan struct{} // closed when its stdout ends
}

// syncWriter serializes writes to w: the children's stderr goes to one
// writer, which need not be safe for concurrent use (a test's buffer).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// startClusterChild starts process spec.Process of the job; its stderr
// goes to stderr, shared with the other children's.
func startClusterChild(spec clusterChildSpec, stderr *syncWriter) (*clusterChild, error) {
	b, _ := json.Marshal(spec)
	cmd, err := soakCommand([]string{"cluster", "--child", string(b)})
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start process %d: %w", spec.Process, err)
	}
	c := &clusterChild{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		dec := json.NewDecoder(bufio.NewReader(out))
		for {
			var r clusterReport
			if dec.Decode(&r) != nil {
				return
			}
			c.mu.Lock()
			c.last = r
			c.mu.Unlock()
		}
	}()
	return c, nil
}

// clusterResult is what dfbench cluster reports.
type clusterResult struct {
	Processes     int                    `json:"processes"`
	Records       int                    `json:"records"`
	Output        int                    `json:"output_records"`
	ElapsedS      float64                `json:"elapsed_s"`
	RecordsPerS   float64                `json:"records_per_s"`
	PerProcess    []clusterProcessResult `json:"per_process"`
	LatencyP50Ms  float64                `json:"latency_p50_ms"`
	LatencyP99Ms  float64                `json:"latency_p99_ms"`
	LatencyMaxMs  float64                `json:"latency_max_ms"`
	CheckpointInt string                 `json:"checkpoint_interval"`
}

type clusterProcessResult struct {
	Process     int     `json:"process"`
	Counted     int64   `json:"counted"`
	RecordsPerS float64 `json:"records_per_s"`
	Checkpoints int     `json:"checkpoints"`
}

func clusterParent(f clusterFlags, stdout, stderr io.Writer) (err error) {
	brokers, dir, done, err := startKfake(f.partitions, "in", "out")
	if err != nil {
		return err
	}
	defer done()
	spec := func(p int) clusterChildSpec {
		return clusterChildSpec{Brokers: brokers, Process: p, Processes: f.processes, Parallelism: f.parallelism,
			Partitions: f.partitions, Interval: f.interval, StateDir: filepath.Join(dir, fmt.Sprint(p))}
	}
	if err := printPlan(stdout, spec(0), f.json); err != nil {
		return err
	}
	children := make([]*clusterChild, 0, f.processes)
	defer func() {
		for _, c := range children {
			c.stdin.Close()
			<-c.done
			if werr := c.cmd.Wait(); werr != nil && err == nil {
				err = fmt.Errorf("process %d: %w", c.last.Process, werr)
			}
		}
	}()
	childErr := &syncWriter{w: stderr}
	for p := range f.processes {
		c, err := startClusterChild(spec(p), childErr)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	start := time.Now()
	hist := &pipelines.Histogram{}
	consumed := make(chan error, 1)
	var output int
	go func() {
		n, err := consumeCluster(ctx, brokers, f.records, hist)
		output = n
		consumed <- err
	}()
	if err := produceCluster(ctx, brokers, f); err != nil {
		return err
	}
	if err := <-consumed; err != nil {
		return fmt.Errorf("read the output: %w (%d of %d records)", err, output, f.records)
	}
	elapsed := time.Since(start)
	for _, c := range children {
		c.stdin.Close()
		<-c.done
	}
	res := clusterResult{Processes: f.processes, Records: f.records, Output: output, ElapsedS: elapsed.Seconds(),
		RecordsPerS: float64(output) / elapsed.Seconds(), CheckpointInt: f.interval.String(),
		LatencyP50Ms: float64(hist.Quantile(0.5)) / 1e6, LatencyP99Ms: float64(hist.Quantile(0.99)) / 1e6,
		LatencyMaxMs: float64(hist.Max()) / 1e6}
	for _, c := range children {
		c.mu.Lock()
		r := c.last
		c.mu.Unlock()
		res.PerProcess = append(res.PerProcess, clusterProcessResult{Process: r.Process, Counted: r.Counted,
			RecordsPerS: float64(r.Counted) / elapsed.Seconds(), Checkpoints: r.Checkpoints})
	}
	return printClusterResult(stdout, res, f.json)
}

func printClusterResult(w io.Writer, r clusterResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "\n%d records through %d processes in %.2fs: %.0f records/s end to end\n",
		r.Output, r.Processes, r.ElapsedS, r.RecordsPerS)
	for _, p := range r.PerProcess {
		fmt.Fprintf(w, "process %d: counted %d records, %.0f records/s, %d checkpoints\n",
			p.Process, p.Counted, p.RecordsPerS, p.Checkpoints)
	}
	fmt.Fprintf(w, "latency, sent to committed output (checkpoint interval %s): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.CheckpointInt, r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs)
	return nil
}

// produceCluster sends the records to "in": record i has key i mod keys,
// in partition key mod partitions, and its send time.
func produceCluster(ctx context.Context, brokers []string, f clusterFlags) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	const batch = 1000
	start := time.Now()
	for sent := 0; sent < f.records; {
		if f.rate > 0 {
			// NB: paced by the batch: the batch goes when it is due.
			if due := start.Add(time.Duration(float64(sent) / float64(f.rate) * float64(time.Second))); time.Until(due) > 0 {
				time.Sleep(time.Until(due))
			}
		}
		n := min(batch, f.records-sent)
		rs := make([]*kgo.Record, n)
		now := time.Now().UnixNano()
		for i := range rs {
			key := uint64((sent + i) % f.keys)
			v := binary.LittleEndian.AppendUint64(make([]byte, 0, 16), key)
			rs[i] = &kgo.Record{Topic: "in", Partition: int32(key % uint64(f.partitions)),
				Value: binary.LittleEndian.AppendUint64(v, uint64(now))}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("send to topic in: %w", err)
		}
		sent += n
	}
	return nil
}

// printPlan prints the plan of the job a child runs, unless the result
// goes out as JSON; it also checks the job can be planned before any child
// starts.
func printPlan(w io.Writer, s clusterChildSpec, asJSON bool) error {
	job, _, err := clusterJob(s, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	plan, err := job.ClusterPlan()
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprint(w, plan)
	}
	return nil
}

// startKfake starts a kfake cluster with the topics, each of partitions
// partitions, and makes a temporary directory; done stops the one and
// removes the other.
func startKfake(partitions int, topics ...string) (brokers []string, dir string, done func(), err error) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		return nil, "", nil, fmt.Errorf("start kfake: %w", err)
	}
	if dir, err = os.MkdirTemp("", "dfbench-kafka-"); err != nil {
		kc.Close()
		return nil, "", nil, err
	}
	return kc.ListenAddrs(), dir, func() { kc.Close(); os.RemoveAll(dir) }, nil
}

// poll fetches once, failing on the context's end or a fetch error.
func poll(ctx context.Context, cl *kgo.Client) (kgo.Fetches, error) {
	fs := cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ferr error
	fs.EachError(func(_ string, _ int32, e error) { ferr = e })
	return fs, ferr
}

// consumeCluster reads "out" as a read_committed consumer until it has
// want records, recording each one's latency from its send time.
func consumeCluster(ctx context.Context, brokers []string, want int, hist *pipelines.Histogram) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	got := 0
	for got < want {
		fs, err := poll(ctx, cl)
		if err != nil {
			return got, err
		}
		now := time.Now().UnixNano()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == 24 {
				hist.Record(now - int64(binary.LittleEndian.Uint64(r.Value[16:])))
				got++
			}
		})
	}
	return got, nil
}
