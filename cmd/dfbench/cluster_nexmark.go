package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
	"github.com/ringflow/ringflow/bench/nexmark/oracle"
	"github.com/ringflow/ringflow/bench/nexmark/queries"
	"github.com/ringflow/ringflow/kafka"
)

// dfbench cluster --query qN runs a Nexmark query as a distributed job and
// checks that its committed output is, as a multiset of CSV rows, the
// output of the same query run in one process on the same events.
//
// Events are generated inside each process, by the query's own source
// (queries.Source), not produced by the parent into an input topic. The
// source is not a reader of a repartition topic, so in process i its
// subtask s opens as subtask i·parallelism+s of Processes·parallelism and
// generates that part of cfg.Split(Processes·parallelism): the parts
// interleave the event numbers, so the processes together generate the
// whole stream exactly once, each part in event-time order, as the
// subtasks of one process would. The job is then exactly the one dfbench
// nexmark runs (queries.Build), cut at its keyed exchanges; an input
// topic would add a decoding step the single-process run does not have,
// and make the parent's producing part of what is measured.
//
// The query's rows go through the kafka transactional sink to topic
// "out", each record a row with the writing process in a header. The
// children run to the end of their input, which ends the job after its
// final checkpoint, whose transactions are committed when Run returns; the
// parent then reads "out" as a read_committed consumer up to the last
// stable offsets and compares the rows with those of the reference run:
// the query in this process, without Cluster, with parallelism
// Processes·parallelism, so that its source subtasks generate the same
// parts.

// clusterQueryResult is what dfbench cluster reports for a query.
type clusterQueryResult struct {
	Query         string `json:"query"`
	Processes     int    `json:"processes"`
	Parallelism   int    `json:"parallelism"`
	Partitions    int    `json:"partitions"`
	Events        uint64 `json:"events"`
	EventRate     int    `json:"event_time_rate"`
	CheckpointInt string `json:"checkpoint_interval"`
	// Identical says whether the committed output is the reference's;
	// Diff, if not, how they differ (first rows missing and unexpected).
	Identical     bool   `json:"identical"`
	Diff          string `json:"diff,omitempty"`
	Rows          int    `json:"output_rows"`
	ReferenceRows int    `json:"reference_rows"`
	// ElapsedS is the wall time from starting the processes to having
	// read all of the committed output; EventsPerS is Events over it.
	ElapsedS   float64                  `json:"elapsed_s"`
	EventsPerS float64                  `json:"events_per_s"`
	PerProcess []clusterQueryProcess    `json:"per_process"`
	Reference  clusterQueryReferenceRun `json:"reference"`
}

// clusterQueryProcess is one process's part of a query's run.
type clusterQueryProcess struct {
	Process int `json:"process"`
	// Events its source subtasks generated; Seconds its job's run time,
	// from start to the end of its input, its final checkpoint included;
	// EventsPerS the one over the other.
	Events     int64   `json:"events"`
	Seconds    float64 `json:"seconds"`
	EventsPerS float64 `json:"events_per_s"`
	// Rows is the committed rows it wrote, read from "out".
	Rows              int   `json:"output_rows"`
	Checkpoints       int   `json:"checkpoints"`
	CheckpointsFailed int   `json:"checkpoints_failed"`
	Restarts          int   `json:"restarts"`
	LateDropped       int64 `json:"late_dropped"`
}

// clusterQueryReferenceRun is the query's run in one process.
type clusterQueryReferenceRun struct {
	Parallelism int     `json:"parallelism"`
	Seconds     float64 `json:"seconds"`
	EventsPerS  float64 `json:"events_per_s"`
}

// dropClusterRow, if set, drops the output rows for which it says so as
// the parent reads them: a test's way to break the output.
var dropClusterRow func(process int, row string) bool

// setFlags returns the flags of names that the command line set, as
// "--a, --b", or "" if none.
func setFlags(fs *flag.FlagSet, names ...string) string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			set = append(set, "--"+f.Name)
		}
	})
	return strings.Join(set, ", ")
}

// runClusterQuery checks the flags of a query's run and runs it.
func runClusterQuery(f clusterFlags, fs *flag.FlagSet, stdout, stderr io.Writer) error {
	cfg, err := f.queryConfig(fs)
	if err != nil {
		fmt.Fprintf(stderr, "dfbench cluster: %v\n", err)
		return errUsage
	}
	return clusterQueryParent(f, cfg, stdout, stderr)
}

// queryConfig validates the flags of a query's run and returns its
// generator's configuration.
func (f *clusterFlags) queryConfig(fs *flag.FlagSet) (nexmark.Config, error) {
	if !slices.Contains(queries.Names, f.query) {
		return nexmark.Config{}, fmt.Errorf("--query %q: want %s or one of %s", f.query, keyedCount, strings.Join(queries.Names, ", "))
	}
	if set := setFlags(fs, "records", "keys"); set != "" {
		return nexmark.Config{}, fmt.Errorf("%s: only for --query %s; a Nexmark query takes --events", set, keyedCount)
	}
	if f.processes < 1 || f.parallelism < 1 || f.partitions < f.processes {
		return nexmark.Config{}, fmt.Errorf("--processes %d, --parallelism %d, --partitions %d: want processes and parallelism >= 1, partitions >= processes",
			f.processes, f.parallelism, f.partitions)
	}
	if f.events == 0 {
		return nexmark.Config{}, errors.New("--events 0: want at least 1")
	}
	if f.rate < 0 {
		return nexmark.Config{}, fmt.Errorf("--rate %d: must not be negative", f.rate)
	}
	if f.interval <= 0 {
		return nexmark.Config{}, fmt.Errorf("--checkpoint-interval %v: a distributed job needs checkpoints, want > 0", f.interval)
	}
	rate := f.rate
	if rate == 0 {
		rate = defaultClusterEventRate
	}
	cfg := queryEvents(f.events, rate)
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("--events %d --rate %d: %w", f.events, rate, err)
	}
	return cfg, nil
}

// defaultClusterEventRate is the event-time rate of a query's run without
// --rate: the default --events then span 10 s of event time, the span of
// dfbench nexmark's defaults, so that the windowed queries fire windows
// enough to compare.
const defaultClusterEventRate = 100_000

// queryEvents is the generator's configuration of a query's run: the
// default one but for the number of events and the event-time rate.
func queryEvents(events uint64, rate int) nexmark.Config {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents, cfg.EventsPerSecond = events, rate
	return cfg
}

// clusterQueryJob adds the query of s to one process's job: its rows go
// to topic "out" through the transactional kafka sink.
func clusterQueryJob(job *ringflow.Job, s clusterChildSpec, logger *slog.Logger) (*queries.Output, error) {
	process := strconv.AppendInt(nil, int64(s.Process), 10)
	out := queries.NewTxnOutput(kafka.Sink(kafka.SinkConfig[string]{
		Brokers: s.Brokers, Topic: "out", Logger: logger,
		// NB: one prefix per process: the subtasks of every process
		// count from 0, and two writers of an id fence each other.
		TransactionalIDPrefix: fmt.Sprintf("dfbench-%s-%d-out", s.Query, s.Process),
		Encode: func(row string) (*kgo.Record, error) {
			return &kgo.Record{Value: []byte(row), Headers: []kgo.RecordHeader{{Key: "process", Value: process}}}, nil
		},
	}))
	return out, queries.Build(job, s.Query, queryEvents(s.Events, s.EventRate), out)
}

func clusterQueryParent(f clusterFlags, cfg nexmark.Config, stdout, stderr io.Writer) error {
	brokers, dir, done, err := startKfake(f.partitions, "out")
	if err != nil {
		return err
	}
	defer done()
	spec := func(p int) clusterChildSpec {
		return clusterChildSpec{Brokers: brokers, Process: p, Processes: f.processes, Parallelism: f.parallelism,
			Partitions: f.partitions, Interval: f.interval, StateDir: filepath.Join(dir, fmt.Sprint(p)),
			Query: f.query, Events: cfg.NumEvents, EventRate: cfg.EventsPerSecond}
	}
	if err := printPlan(stdout, spec(0), f.json); err != nil {
		return err
	}
	res := clusterQueryResult{Query: f.query, Processes: f.processes, Parallelism: f.parallelism, Partitions: f.partitions,
		Events: cfg.NumEvents, EventRate: cfg.EventsPerSecond, CheckpointInt: f.interval.String()}

	want, ref, err := referenceRun(f.query, cfg, f.processes*f.parallelism)
	if err != nil {
		return fmt.Errorf("%s in one process: %w", f.query, err)
	}
	res.Reference, res.ReferenceRows = ref, len(want)

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	start := time.Now()
	children, err := runQueryChildren(ctx, f.processes, spec, stderr)
	if err != nil {
		return err
	}
	got, from, err := readCommitted(ctx, brokers, "out", f.partitions)
	if err != nil {
		return fmt.Errorf("read the output: %w (%d rows read)", err, len(got))
	}
	elapsed := time.Since(start)
	res.Rows, res.ElapsedS = len(got), elapsed.Seconds()
	res.EventsPerS = float64(cfg.NumEvents) / elapsed.Seconds()
	for _, c := range children {
		c.mu.Lock()
		r := c.last
		c.mu.Unlock()
		p := clusterQueryProcess{Process: r.Process, Events: r.Events, Seconds: time.Duration(r.ElapsedNs).Seconds(),
			Rows: from[r.Process], Checkpoints: r.Checkpoints, CheckpointsFailed: r.CheckpointsFailed,
			Restarts: r.Restarts, LateDropped: r.LateDropped}
		if p.Seconds > 0 {
			p.EventsPerS = float64(p.Events) / p.Seconds
		}
		res.PerProcess = append(res.PerProcess, p)
	}
	res.Diff = oracle.Diff(got, want)
	res.Identical = res.Diff == ""
	if err := printClusterQuery(stdout, res, f.json); err != nil {
		return err
	}
	if !res.Identical {
		return fmt.Errorf("%s: the output of %d processes differs from one process's: %s", f.query, f.processes, res.Diff)
	}
	return nil
}

// referenceRun runs query on cfg's events in this process with the given
// parallelism, no Cluster and no checkpoints, and returns its rows.
func referenceRun(query string, cfg nexmark.Config, parallelism int) ([]string, clusterQueryReferenceRun, error) {
	r := clusterQueryReferenceRun{Parallelism: parallelism}
	var rows []string
	out := queries.NewOutput(func(row []byte) error {
		rows = append(rows, string(row))
		return nil
	})
	job := ringflow.NewJob(ringflow.Config{Parallelism: parallelism, NoPin: true, RaiseGOMAXPROCS: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err := queries.Build(job, query, cfg, out); err != nil {
		return nil, r, err
	}
	start := time.Now()
	if err := job.Run(context.Background()); err != nil {
		return nil, r, err
	}
	r.Seconds = time.Since(start).Seconds()
	r.EventsPerS = float64(cfg.NumEvents) / r.Seconds
	return rows, r, nil
}

// runQueryChildren starts the processes of a query's job and waits for
// all of them to finish their input. If one fails, or ctx ends first, it
// stops the others (closing their stdin cancels their job) and fails.
func runQueryChildren(ctx context.Context, n int, spec func(int) clusterChildSpec, stderr io.Writer) ([]*clusterChild, error) {
	type exit struct {
		process int
		err     error
	}
	exits := make(chan exit, n)
	children := make([]*clusterChild, 0, n)
	running := 0
	childErr := &syncWriter{w: stderr}
	stop := func(err error) error {
		for _, c := range children {
			c.stdin.Close()
		}
		for ; running > 0; running-- {
			<-exits
		}
		return err
	}
	for p := range n {
		c, err := startClusterChild(spec(p), childErr)
		if err != nil {
			return nil, stop(err)
		}
		children = append(children, c)
		running++
		go func() {
			<-c.done
			exits <- exit{p, c.cmd.Wait()}
		}()
	}
	for running > 0 {
		select {
		case e := <-exits:
			running--
			if e.err != nil {
				return nil, stop(fmt.Errorf("process %d: %w", e.process, e.err))
			}
		case <-ctx.Done():
			return nil, stop(fmt.Errorf("the processes did not finish within --timeout: %w", ctx.Err()))
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	return children, nil
}

// readCommitted reads the committed records of topic's partitions up to
// their last stable offsets, which, once every transaction of its writers
// has ended, is all of them. It returns their values and how many records
// each process wrote (by their "process" header).
func readCommitted(ctx context.Context, brokers []string, topic string, partitions int) ([]string, map[int]int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// NB: control records (transaction markers) take offsets: the
		// last one of a partition may be one, and reaching the end means
		// seeing it.
		kgo.KeepControlRecords())
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	stable, err := endOffsets(ctx, cl, topic, partitions, 1)
	if err != nil {
		return nil, nil, err
	}
	high, err := endOffsets(ctx, cl, topic, partitions, 0)
	if err != nil {
		return nil, nil, err
	}
	for p := range stable {
		if stable[p] != high[p] {
			return nil, nil, fmt.Errorf("partition %d of %s: a transaction is still open (last stable offset %d, high watermark %d)",
				p, topic, stable[p], high[p])
		}
	}
	next := make([]int64, partitions)
	reached := func() bool {
		for p := range next {
			if next[p] < stable[p] {
				return false
			}
		}
		return true
	}
	var rows []string
	from := map[int]int{}
	for !reached() {
		fs, err := poll(ctx, cl)
		if err != nil {
			return rows, from, err
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			p := -1
			for _, h := range r.Headers {
				if h.Key != "process" {
					continue
				}
				var perr error
				if p, perr = strconv.Atoi(string(h.Value)); perr != nil && bad == nil {
					bad = fmt.Errorf("record at offset %d of partition %d: process header %q", r.Offset, r.Partition, h.Value)
				}
			}
			if dropClusterRow != nil && dropClusterRow(p, string(r.Value)) {
				return
			}
			rows = append(rows, string(r.Value))
			from[p]++
		})
		if bad != nil {
			return rows, from, bad
		}
	}
	return rows, from, nil
}

// endOffsets lists the end offsets of topic's partitions: the last stable
// ones with isolation 1 (read_committed), the high watermarks with 0.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int, isolation int8) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(p), -1 // -1: the end
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	ends := make([]int64, partitions)
	seen := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets of %s partition %d: %w", topic, p.Partition, err)
			}
			if p.Partition < 0 || int(p.Partition) >= partitions {
				return nil, fmt.Errorf("list offsets of %s: partition %d of %d", topic, p.Partition, partitions)
			}
			ends[p.Partition] = p.Offset
			seen++
		}
	}
	if seen != partitions {
		return nil, fmt.Errorf("list offsets of %s: %d partitions answered, want %d", topic, seen, partitions)
	}
	return ends, nil
}

func printClusterQuery(w io.Writer, r clusterQueryResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	same := "yes"
	if !r.Identical {
		same = "no"
	}
	fmt.Fprintf(w, "\n%s on %d processes × parallelism %d: %d events (event-time rate %d/s), checkpoint interval %s\n",
		r.Query, r.Processes, r.Parallelism, r.Events, r.EventRate, r.CheckpointInt)
	fmt.Fprintf(w, "output identical to one process's: %s (%d rows committed, %d in one process)\n", same, r.Rows, r.ReferenceRows)
	fmt.Fprintf(w, "end to end %.2fs (start of the processes to all output read): %s events/s overall\n",
		r.ElapsedS, si(r.EventsPerS))
	for _, p := range r.PerProcess {
		fmt.Fprintf(w, "process %d: %d events in %.2fs, %s events/s, %d rows, %d checkpoints (%d failed), %d restarts, %d late\n",
			p.Process, p.Events, p.Seconds, si(p.EventsPerS), p.Rows, p.Checkpoints, p.CheckpointsFailed, p.Restarts, p.LateDropped)
	}
	fmt.Fprintf(w, "one process (parallelism %d, no checkpoints): %.2fs, %s events/s\n",
		r.Reference.Parallelism, r.Reference.Seconds, si(r.Reference.EventsPerS))
	return nil
}
