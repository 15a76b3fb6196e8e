package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
	"github.com/ringflow/ringflow/bench/nexmark/queries"
)

// nexmarkOptions are dfbench nexmark's flags.
type nexmarkOptions struct {
	query       string
	events      uint64
	rate        int
	parallelism int
	workers     int
	checkpoint  time.Duration
	debloat     time.Duration
	stateDir    string
	output      string
	dump        string
	baseline    string
	asJSON      bool
	cpuProfile  string
	http        httpFlags
	srv         *statusServer // --http; nil without
}

// nexmarkResult is one query's measurement.
type nexmarkResult struct {
	Query              string           `json:"query"`
	Events             uint64           `json:"events"`
	EventsPerSecond    int              `json:"event_time_rate"`
	Parallelism        int              `json:"parallelism"`
	Workers            int              `json:"workers"`
	Seconds            float64          `json:"seconds"`
	Throughput         float64          `json:"events_per_s"`
	Cores              float64          `json:"cores_used"`
	PerCore            float64          `json:"events_per_s_per_core"`
	Rows               int64            `json:"output_rows"`
	CheckpointInterval string           `json:"checkpoint_interval"` // "0s": checkpoints off
	Debloat            string           `json:"debloat"`             // "off" or the target
	Checkpoints        *checkpointStats `json:"checkpoints"`         // null when off
	Baseline           *baselineResult  `json:"baseline_chan,omitempty"`
}

// checkpointStats sum up a run's checkpoints.
type checkpointStats struct {
	Completed      int     `json:"completed"`
	Failed         int     `json:"failed"`
	Final          bool    `json:"final_completed"` // the one at the end of input
	Unaligned      int     `json:"unaligned_subtasks"`
	DurationMeanMs float64 `json:"duration_mean_ms"`
	DurationMaxMs  float64 `json:"duration_max_ms"`
	AlignmentMaxMs float64 `json:"alignment_max_ms"`
	BytesWritten   uint64  `json:"bytes_written"`
	BytesReused    uint64  `json:"bytes_reused"`
	Restarts       int     `json:"restarts"`
}

// baselineResult is the plain-Go (goroutines and channels) run of a query.
type baselineResult struct {
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"events_per_s"`
	Cores      float64 `json:"cores_used"`
	PerCore    float64 `json:"events_per_s_per_core"`
	Rows       int64   `json:"output_rows"`
	// Ratio is ringflow's events/s ÷ the baseline's; PerCoreRatio the
	// same per core (steadier when other processes share the CPUs).
	Ratio        float64 `json:"ringflow_over_baseline"`
	PerCoreRatio float64 `json:"ringflow_over_baseline_per_core"`
}

func runNexmark(args []string, stdout, stderr io.Writer) error {
	var o nexmarkOptions
	fs := flag.NewFlagSet("dfbench nexmark", flag.ContinueOnError)
	fs.StringVar(&o.query, "query", "all", "query to run: "+strings.Join(queries.Names, "|")+"|all")
	fs.Uint64Var(&o.events, "events", 10_000_000, "events to generate (persons, auctions and bids)")
	fs.IntVar(&o.rate, "rate", 1_000_000, "event-time rate of the generator, events per second (at most 1,000,000); "+
		"it sets how many events a window holds")
	fs.IntVar(&o.parallelism, "parallelism", runtime.GOMAXPROCS(0), "subtasks per operator")
	fs.IntVar(&o.workers, "workers", 0, "worker threads (0: the usable CPUs)")
	fs.DurationVar(&o.checkpoint, "checkpoint-interval", 10*time.Second,
		"exactly-once checkpoint interval (0: no checkpoints); a final checkpoint is taken at the end of input")
	fs.DurationVar(&o.debloat, "debloat", ringflow.DefaultDebloat, "buffer debloating: bound each ring to what its consumer drains in D (0: off; see ringflow.Config.Debloat)")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory for the checkpoint store (default: a fresh temporary directory per query, removed after)")
	fs.StringVar(&o.output, "output", "", "write the result rows as CSV to this file (with --query all: FILE with the query name before its extension); "+
		"with checkpoints, the rows committed by checkpoints, exactly once")
	fs.StringVar(&o.dump, "dump", "", "write the generated events as JSON lines to this file (before the run, untimed)")
	fs.StringVar(&o.baseline, "baseline", "", `"chan": also run q0, q1, q2 and q5 as plain Go (goroutines and channels of batches)`)
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object per query instead of a table")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	o.http.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	srv, err := o.http.serve()
	if err != nil {
		return err
	}
	defer srv.close()
	o.srv = srv
	names, cfg, err := o.validate()
	if err != nil {
		fmt.Fprintf(stderr, "dfbench nexmark: %v\n", err)
		return errUsage
	}
	if o.dump != "" {
		if err := dumpEvents(o.dump, cfg); err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		stop, err := startProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var results []nexmarkResult
	for _, q := range names {
		r, err := o.measure(q, cfg, len(names) > 1)
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		results = append(results, r)
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	return printNexmark(stdout, o, results)
}

// validate checks the flags and returns the queries to run and the
// generator's configuration.
func (o *nexmarkOptions) validate() ([]string, nexmark.Config, error) {
	cfg := nexmark.DefaultConfig()
	names := queries.Names
	if o.query != "all" {
		if !slices.Contains(queries.Names, o.query) {
			return nil, cfg, fmt.Errorf("--query %q: want one of %s or all", o.query, strings.Join(queries.Names, ", "))
		}
		names = []string{o.query}
	}
	if o.events == 0 {
		return nil, cfg, fmt.Errorf("--events 0: want at least 1")
	}
	if o.parallelism < 1 || o.workers < 0 {
		return nil, cfg, fmt.Errorf("--parallelism %d, --workers %d: want parallelism >= 1 and workers >= 0", o.parallelism, o.workers)
	}
	if o.checkpoint < 0 {
		return nil, cfg, fmt.Errorf("--checkpoint-interval %v: must not be negative", o.checkpoint)
	}
	if o.debloat < 0 {
		return nil, cfg, fmt.Errorf("--debloat %v: must not be negative (0: off)", o.debloat)
	}
	if o.debloat == 0 {
		o.debloat = -1 // NB: ringflow's off; its 0 is the default
	}
	if o.baseline != "" && o.baseline != "chan" {
		return nil, cfg, fmt.Errorf(`--baseline %q: the only baseline is "chan"`, o.baseline)
	}
	cfg.NumEvents = o.events
	cfg.EventsPerSecond = o.rate
	if err := cfg.Validate(); err != nil {
		return nil, cfg, fmt.Errorf("--events %d --rate %d: %w", o.events, o.rate, err)
	}
	return names, cfg, nil
}

// measure runs query q on ringflow (and on the baseline if asked and there
// is one), timing it and its process CPU time.
func (o *nexmarkOptions) measure(q string, cfg nexmark.Config, many bool) (nexmarkResult, error) {
	r := nexmarkResult{Query: q, Events: cfg.NumEvents, EventsPerSecond: cfg.EventsPerSecond,
		Parallelism: o.parallelism, Workers: o.workers, CheckpointInterval: o.checkpoint.String(),
		Debloat: "off"}
	if o.debloat > 0 {
		r.Debloat = o.debloat.String()
	}
	if r.Workers == 0 {
		r.Workers = runtime.GOMAXPROCS(0)
	}
	ck, cleanup, err := o.checkpointConfig(q)
	if err != nil {
		return r, err
	}
	defer cleanup()
	out, closeOut, err := o.openOutput(q, many)
	if err != nil {
		return r, err
	}
	// NB: RaiseGOMAXPROCS, as in every dfbench job: a worker per CPU and
	// the spare P, so that figures stay comparable with those measured
	// before the default left GOMAXPROCS alone.
	job := ringflow.NewJob(ringflow.Config{Workers: o.workers, Parallelism: o.parallelism, Debloat: o.debloat, Checkpoint: ck,
		RaiseGOMAXPROCS: true})
	if err := queries.Build(job, q, cfg, out); err != nil {
		closeOut()
		return r, err
	}
	o.srv.job(job) // NB: built: the status pages read its graph
	m, err := timed(func() error { return job.Run(context.Background()) }, cfg.NumEvents)
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	r.Seconds, r.Throughput, r.Cores, r.PerCore, r.Rows = m.seconds, m.throughput, m.cores, m.perCore, out.Rows()
	if ck.Interval > 0 {
		r.Checkpoints = summarize(job)
	}
	if o.baseline == "chan" && queries.HasChanBaseline(q) {
		bout := queries.NewOutput(nil)
		bm, err := timed(func() error { return queries.RunChan(q, cfg, o.parallelism, bout) }, cfg.NumEvents)
		if err != nil {
			return r, fmt.Errorf("baseline: %w", err)
		}
		r.Baseline = &baselineResult{Seconds: bm.seconds, Throughput: bm.throughput, Cores: bm.cores,
			PerCore: bm.perCore, Rows: bout.Rows(), Ratio: m.throughput / bm.throughput,
			PerCoreRatio: m.perCore / bm.perCore}
		if bout.Rows() != r.Rows {
			return r, fmt.Errorf("outputs differ: ringflow %d rows, chan baseline %d rows", r.Rows, bout.Rows())
		}
	}
	return r, nil
}

// measurement is one timed run.
type measurement struct {
	seconds, throughput, cores, perCore float64
}

// timed runs f and measures its wall time and the process's CPU time
// (user + system, from getrusage) meanwhile: cores used is CPU time ÷ wall
// time, as Flink's Nexmark runner measures it.
func timed(f func() error, events uint64) (measurement, error) {
	runtime.GC()
	cpu0 := cpuTime()
	t0 := time.Now()
	err := f()
	wall := time.Since(t0)
	cpu := cpuTime() - cpu0
	m := measurement{seconds: wall.Seconds()}
	m.throughput = float64(events) / wall.Seconds()
	m.cores = cpu.Seconds() / wall.Seconds()
	if m.cores > 0 {
		m.perCore = m.throughput / m.cores
	}
	return m, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkpointConfig returns the checkpoint settings of one query's run,
// and what removes the state directory it made.
func (o *nexmarkOptions) checkpointConfig(q string) (ringflow.CheckpointConfig, func(), error) {
	if o.checkpoint == 0 {
		return ringflow.CheckpointConfig{}, func() {}, nil
	}
	if o.stateDir != "" {
		dir := filepath.Join(o.stateDir, q)
		return ringflow.CheckpointConfig{Interval: o.checkpoint, StateDir: dir}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "dfbench-nexmark-"+q+"-")
	if err != nil {
		return ringflow.CheckpointConfig{}, nil, err
	}
	return ringflow.CheckpointConfig{Interval: o.checkpoint, StateDir: dir}, func() { os.RemoveAll(dir) }, nil
}

// summarize sums up a job's checkpoints.
func summarize(job *ringflow.Job) *checkpointStats {
	s := &checkpointStats{Restarts: job.Restarts()}
	var total time.Duration
	for _, c := range job.Checkpoints() {
		if strings.HasPrefix(c.Status, "aborted") {
			continue // in flight when an attempt ended; counted by Restarts
		}
		if c.Status != "completed" {
			s.Failed++
			continue
		}
		s.Completed++
		s.Final = s.Final || c.Final
		total += c.Duration
		s.DurationMaxMs = max(s.DurationMaxMs, ms(c.Duration))
		s.BytesWritten += c.BytesWritten
		s.BytesReused += c.BytesReused
		for _, st := range c.Subtasks {
			s.AlignmentMaxMs = max(s.AlignmentMaxMs, ms(st.Alignment))
			if st.Unaligned {
				s.Unaligned++
			}
		}
	}
	if s.Completed > 0 {
		s.DurationMeanMs = ms(total) / float64(s.Completed)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// openOutput returns the query's Output: only counted without --output;
// with it, rows go to the file as CSV lines: written directly without
// checkpoints, and with checkpoints through a transactional file sink
// whose committed part files are concatenated into the file at the end.
func (o *nexmarkOptions) openOutput(q string, many bool) (*queries.Output, func() error, error) {
	if o.output == "" {
		return queries.NewOutput(nil), func() error { return nil }, nil
	}
	path := o.output
	if many {
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "." + q + ext
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	closeOut := func(parts string) error {
		err := appendParts(w, parts)
		err = errors.Join(err, w.Flush(), f.Close())
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if o.checkpoint > 0 {
		parts := path + ".parts"
		if err := os.RemoveAll(parts); err != nil {
			f.Close()
			return nil, nil, err
		}
		return queries.NewTxnOutput(ringflow.FileSink(parts)), func() error { return closeOut(parts) }, nil
	}
	out := queries.NewOutput(func(row []byte) error {
		w.Write(row)
		return w.WriteByte('\n')
	})
	return out, func() error { return closeOut("") }, nil
}

// appendParts appends the committed part files of a file sink's directory
// to w, in name order, and removes the directory.
func appendParts(w io.Writer, dir string) error {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries { // ReadDir sorts by name
		if !strings.HasPrefix(e.Name(), "part-") {
			continue
		}
		part, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		_, err = io.Copy(w, part)
		part.Close()
		if err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// dumpEvents writes cfg's events as JSON lines.
func dumpEvents(path string, cfg nexmark.Config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		f.Close()
		return err
	}
	var ev nexmark.Event
	for g.Next(&ev) {
		if err := nexmark.WriteJSON(w, &ev); err != nil {
			f.Close()
			return fmt.Errorf("dump to %s: %w", path, err)
		}
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dump to %s: %w", path, err)
	}
	return nil
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func printNexmark(w io.Writer, o nexmarkOptions, results []nexmarkResult) error {
	r0 := results[0]
	fmt.Fprintf(w, "nexmark: %d events (event-time rate %d/s), parallelism %d, %d workers\n",
		r0.Events, r0.EventsPerSecond, r0.Parallelism, r0.Workers)
	if o.checkpoint == 0 {
		fmt.Fprintf(w, "checkpoints: off\n")
	} else {
		fmt.Fprintf(w, "checkpoints: exactly-once, every %v, and a final one at the end of input\n", o.checkpoint)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	header := "query\tevents/s\tcores\tevents/s/core\trows\tseconds\tcheckpoints\tmean ms\tmax ms\tstate MB\t"
	if o.baseline != "" {
		header += "chan events/s\tchan cores\tchan events/s/core\tringflow ÷ chan\tper core\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%d\t%.2f\t", r.Query, si(r.Throughput), r.Cores, si(r.PerCore), r.Rows, r.Seconds)
		if c := r.Checkpoints; c != nil {
			fmt.Fprintf(tw, "%d (%d failed)\t%.0f\t%.0f\t%.1f\t", c.Completed, c.Failed, c.DurationMeanMs, c.DurationMaxMs,
				float64(c.BytesWritten)/1e6)
		} else {
			fmt.Fprint(tw, "off\t-\t-\t-\t")
		}
		if b := r.Baseline; b != nil {
			fmt.Fprintf(tw, "%s\t%.2f\t%s\t%.2f×\t%.2f×\t", si(b.Throughput), b.Cores, si(b.PerCore), b.Ratio, b.PerCoreRatio)
		} else if o.baseline != "" {
			fmt.Fprint(tw, "-\t-\t-\t-\t-\t")
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// si formats a rate with a K or M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
