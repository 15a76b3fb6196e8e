package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/kafka"
	"github.com/ringflow/ringflow/keygroups"
)

// dfbench kafka measures ringflow between Kafka topics in one process:
// it starts a kfake cluster in the process, sends --records records to
// topic "in", then runs keyed-count from "in" (kafka.Source, bounded at
// the topic's end) to "out" (kafka.Sink, a transaction per subtask per
// checkpoint, committed when the checkpoint completes). It reports the
// job's throughput, its checkpoints, and where the process's CPU went
// during the job — the Kafka client, the broker, the connectors, the
// engine, the garbage collector — from a CPU profile; then it reads "out"
// as a read_committed consumer and checks that every record was counted
// exactly once.
//
// The broker runs in the same process, on the same two cores: its share
// is a cost a real deployment moves to other machines, and the client's
// share is what the job itself pays for Kafka.

type kafkaFlags struct {
	records, keys   int
	partitions      int
	parallelism     int
	interval        time.Duration
	noProfile, json bool
	cpuProfile      string
}

func runKafka(args []string, stdout, stderr io.Writer) error {
	var f kafkaFlags
	fs := flag.NewFlagSet("kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.records, "records", 2_000_000, "records to send to topic in and count")
	fs.IntVar(&f.keys, "keys", 100_000, "distinct keys")
	fs.IntVar(&f.partitions, "partitions", 8, "partitions of topics in and out")
	fs.IntVar(&f.parallelism, "parallelism", 2, "subtasks per operator")
	fs.DurationVar(&f.interval, "checkpoint-interval", time.Second, "checkpoint interval; the sink commits a transaction per subtask per checkpoint")
	fs.BoolVar(&f.noProfile, "no-profile", false, "do not profile the job's CPU (no shares are reported)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "also write the job's CPU profile to this file")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "dfbench kafka: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	case f.records < 1:
		fmt.Fprintf(stderr, "dfbench kafka: --records %d: must be at least 1\n", f.records)
		return errUsage
	case f.keys < 1:
		fmt.Fprintf(stderr, "dfbench kafka: --keys %d: must be at least 1\n", f.keys)
		return errUsage
	case f.partitions < 1:
		fmt.Fprintf(stderr, "dfbench kafka: --partitions %d: must be at least 1\n", f.partitions)
		return errUsage
	case f.parallelism < 1 || f.parallelism > keygroups.DefaultMaxParallelism:
		fmt.Fprintf(stderr, "dfbench kafka: --parallelism %d: must be from 1 to %d\n", f.parallelism, keygroups.DefaultMaxParallelism)
		return errUsage
	case f.noProfile && f.cpuProfile != "":
		fmt.Fprintln(stderr, "dfbench kafka: --cpuprofile needs the profile that --no-profile turns off")
		return errUsage
	case f.interval <= 0:
		fmt.Fprintf(stderr, "dfbench kafka: --checkpoint-interval %v: the transactional sink commits on checkpoints; give a positive interval\n", f.interval)
		return errUsage
	}
	res, err := kafkaBench(f)
	if err != nil {
		return err
	}
	return printKafkaResult(stdout, res, f.json)
}

// kafkaResult is what dfbench kafka reports.
type kafkaResult struct {
	Records     int     `json:"records"`
	Keys        int     `json:"keys"`
	Partitions  int     `json:"partitions"`
	Parallelism int     `json:"parallelism"`
	ProduceS    float64 `json:"produce_s"` // sending the input, before the job
	JobS        float64 `json:"job_s"`
	RecordsPerS float64 `json:"records_per_s"`
	Cores       float64 `json:"cores_used"` // the process's CPU time over the job's wall time
	Output      int     `json:"output_records"`
	// ExactlyOnce is true when every key's counts on "out" are 1..n, each
	// once, for the n records of that key sent.
	ExactlyOnce        bool             `json:"exactly_once"`
	CheckpointInterval string           `json:"checkpoint_interval"`
	Checkpoints        *checkpointStats `json:"checkpoints"`
	// CPU is the job's CPU profile by where the time went, as shares
	// summing to 1; null with --no-profile.
	CPU *cpuShares `json:"cpu_shares"`
}

// cpuShares splits a CPU profile's samples by the code they were taken
// in. A sample counts for the first of these its stack reaches, leaf to
// root order not mattering: the broker (kfake), the Kafka client
// (franz-go), ringflow's Kafka connectors (the source's decoding and the
// sink's encoding, the user's code they call included), the garbage
// collector's own workers, and the rest, which is the engine and the job.
type cpuShares struct {
	Broker    float64 `json:"broker_kfake"`
	Client    float64 `json:"client_franz_go"`
	Connector float64 `json:"connector"`
	GC        float64 `json:"gc_workers"`
	Engine    float64 `json:"engine_and_job"`
	Samples   int     `json:"samples"`
}

func kafkaBench(f kafkaFlags) (kafkaResult, error) {
	res := kafkaResult{Records: f.records, Keys: f.keys, Partitions: f.partitions, Parallelism: f.parallelism,
		CheckpointInterval: f.interval.String()}
	brokers, dir, done, err := startKfake(f.partitions, "in", "out")
	if err != nil {
		return res, err
	}
	defer done()
	ctx := context.Background()

	start := time.Now()
	if err := produceCluster(ctx, brokers, clusterFlags{records: f.records, keys: f.keys, partitions: f.partitions}); err != nil {
		return res, err
	}
	res.ProduceS = time.Since(start).Seconds()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	job := kafkaJob(brokers, f.parallelism, f.interval, dir, logger)
	var prof bytes.Buffer
	if !f.noProfile {
		if err := pprof.StartCPUProfile(&prof); err != nil {
			return res, fmt.Errorf("start the CPU profile: %w", err)
		}
	}
	cpu0 := processCPU()
	start = time.Now()
	err = job.Run(ctx)
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if !f.noProfile {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return res, fmt.Errorf("run: %w", err)
	}
	res.JobS = elapsed.Seconds()
	res.RecordsPerS = float64(f.records) / elapsed.Seconds()
	res.Cores = cpu.Seconds() / elapsed.Seconds()
	res.Checkpoints = summarize(job)
	if f.cpuProfile != "" {
		if err := os.WriteFile(f.cpuProfile, prof.Bytes(), 0o644); err != nil {
			return res, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	if !f.noProfile {
		shares, err := cpuSharesOf(&prof)
		if err != nil {
			return res, err
		}
		res.CPU = &shares
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, exact, err := checkKafkaCounts(rctx, brokers, f.records, f.keys)
	res.Output, res.ExactlyOnce = out, exact
	if err != nil {
		return res, fmt.Errorf("read topic out: %w (%d records read)", err, out)
	}
	if !exact {
		return res, fmt.Errorf("topic out: the counts are not exactly once (%d records for %d sent)", out, f.records)
	}
	return res, nil
}

// kafkaJob is keyed-count from topic "in" to topic "out", both exactly
// once.
func kafkaJob(brokers []string, parallelism int, interval time.Duration, stateDir string, logger *slog.Logger) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: parallelism, Logger: logger,
		Checkpoint: ringflow.CheckpointConfig{Interval: interval, StateDir: stateDir}})
	in := ringflow.Source(job, "in", kafka.Source(kafka.SourceConfig[countRec]{
		Brokers: brokers, Topics: []string{"in"}, Bounded: true, Logger: logger, Decode: decodeCountRec}))
	counts := ringflow.Reduce(ringflow.KeyBy(in, func(r countRec) uint64 { return r.Key }), "count",
		func(acc, r countRec) countRec { r.Count = acc.Count + 1; return r })
	ringflow.TxnSink(counts, "out", kafka.Sink(kafka.SinkConfig[countRec]{
		Brokers: brokers, Topic: "out", Logger: logger, TransactionalIDPrefix: "dfbench-kafka-out",
		EncodeTo: encodeCountRecTo}))
	return job
}

// decodeCountRec reads a record sent by produceCluster: its key and send
// time, each 8 bytes little-endian; the count so far is 1.
func decodeCountRec(r *kgo.Record) (countRec, error) {
	if len(r.Value) != 16 {
		return countRec{}, fmt.Errorf("record of %d bytes, want 16", len(r.Value))
	}
	return countRec{Key: binary.LittleEndian.Uint64(r.Value), Count: 1,
		SentNs: int64(binary.LittleEndian.Uint64(r.Value[8:]))}, nil
}

// encodeCountRec writes a count as key, count and send time, each 8 bytes
// little-endian.
func encodeCountRec(r countRec) (*kgo.Record, error) {
	v := make([]byte, 0, 24)
	v = binary.LittleEndian.AppendUint64(v, r.Key)
	v = binary.LittleEndian.AppendUint64(v, r.Count)
	return &kgo.Record{Value: binary.LittleEndian.AppendUint64(v, uint64(r.SentNs))}, nil
}

// encodeCountRecTo is encodeCountRec into a record the sink reuses.
func encodeCountRecTo(c countRec, r *kgo.Record) error {
	r.Value = binary.LittleEndian.AppendUint64(r.Value, c.Key)
	r.Value = binary.LittleEndian.AppendUint64(r.Value, c.Count)
	r.Value = binary.LittleEndian.AppendUint64(r.Value, uint64(c.SentNs))
	return nil
}

// checkKafkaCounts reads "out" as a read_committed consumer until it holds
// as many records as were sent, and checks them: key k, sent n times, must
// have the counts 1..n, each once.
func checkKafkaCounts(ctx context.Context, brokers []string, records, keys int) (int, bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, false, err
	}
	defer cl.Close()
	type seen struct{ n, sum, max uint64 }
	got := make([]seen, keys)
	read, bad := 0, 0
	for read < records {
		fs, err := poll(ctx, cl)
		if err != nil {
			return read, false, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if len(r.Value) != 24 {
				bad++
				return
			}
			k, c := binary.LittleEndian.Uint64(r.Value), binary.LittleEndian.Uint64(r.Value[8:])
			if k >= uint64(keys) {
				bad++
				return
			}
			s := &got[k]
			s.n, s.sum, s.max = s.n+1, s.sum+c, max(s.max, c)
		})
	}
	exact := bad == 0 && read == records
	for k := range got {
		n := uint64(records / keys)
		if k < records%keys {
			n++
		}
		s := got[k]
		exact = exact && s.n == n && s.max == n && s.sum == n*(n+1)/2
	}
	return read, exact, nil
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSharesOf classifies a CPU profile's samples (see cpuShares).
func cpuSharesOf(r io.Reader) (cpuShares, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return cpuShares{}, fmt.Errorf("read the CPU profile: %w", err)
	}
	idx := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if idx < 0 {
		return cpuShares{}, errors.New("the CPU profile has no cpu samples")
	}
	var s cpuShares
	var broker, client, connector, gc, engine, total int64
	for _, smp := range p.Sample {
		v := smp.Value[idx]
		total += v
		s.Samples++
		switch classifyStack(smp.Location) {
		case "broker":
			broker += v
		case "client":
			client += v
		case "connector":
			connector += v
		case "gc":
			gc += v
		default:
			engine += v
		}
	}
	if total == 0 {
		return s, nil
	}
	t := float64(total)
	s.Broker, s.Client, s.Connector = float64(broker)/t, float64(client)/t, float64(connector)/t
	s.GC, s.Engine = float64(gc)/t, float64(engine)/t
	return s, nil
}

// classifyStack names the part of the program a sample's stack was in.
func classifyStack(locs []*profile.Location) string {
	has := func(prefix string) bool {
		for _, l := range locs {
			for _, ln := range l.Line {
				if ln.Function != nil && strings.HasPrefix(ln.Function.Name, prefix) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("github.com/twmb/franz-go/pkg/kfake"):
		return "broker"
	case has("github.com/twmb/franz-go/"):
		return "client"
	case has("github.com/ringflow/ringflow/kafka."):
		return "connector"
	case has("runtime.gcBgMarkWorker"), has("runtime.bgsweep"), has("runtime.bgscavenge"):
		return "gc"
	}
	return "engine"
}

func printKafkaResult(w io.Writer, r kafkaResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "sent %d records (%d keys) to %d partitions of topic in in %.2fs\n", r.Records, r.Keys, r.Partitions, r.ProduceS)
	fmt.Fprintf(w, "keyed-count in -> out at parallelism %d: %.2fs, %.0f records/s, %.2f cores\n",
		r.Parallelism, r.JobS, r.RecordsPerS, r.Cores)
	if c := r.Checkpoints; c != nil {
		fmt.Fprintf(w, "checkpoints every %s: %d completed, %d failed; duration mean %.1f ms, max %.1f ms\n",
			r.CheckpointInterval, c.Completed, c.Failed, c.DurationMeanMs, c.DurationMaxMs)
	}
	if c := r.CPU; c != nil {
		fmt.Fprintf(w, "CPU (%d samples): Kafka client %.1f%%, broker (kfake) %.1f%%, connectors %.1f%%, GC workers %.1f%%, engine and job %.1f%%\n",
			c.Samples, 100*c.Client, 100*c.Broker, 100*c.Connector, 100*c.GC, 100*c.Engine)
	}
	fmt.Fprintf(w, "topic out (read_committed): %d records, exactly once: %v\n", r.Output, r.ExactlyOnce)
	return nil
}
