package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/pipelines"
)

// defaultRunDuration is how long `dfbench run` runs without --records or
// --duration.
const defaultRunDuration = 3 * time.Second

// runFlags are the parsed flags of `dfbench run`.
type runFlags struct {
	cfg        pipelines.Config
	baseline   string
	json       bool
	cpuProfile string
	memProfile string
	http       httpFlags
	mode       string // --mode
	samplesOut string // --samples-out
	// savepointAfter is --savepoint-after; savepointKeep
	// --savepoint-keep-running.
	savepointAfter time.Duration
	savepointKeep  bool
}

func runRun(args []string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cleanup, err := runStateDir(&f.cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	var samples *os.File
	if f.samplesOut != "" {
		// NB: created before the run, so that a path that cannot be
		// written fails at once, not after it.
		if samples, err = os.Create(f.samplesOut); err != nil {
			return fmt.Errorf("--samples-out: %w", err)
		}
		defer samples.Close()
	}
	f.cfg.Progress = progressBar(stderr, f.cfg, "ringflow")
	f.cfg.KeepSamples = samples != nil
	srv, err := f.http.serve()
	if err != nil {
		return err
	}
	defer srv.close()
	f.cfg.OnJob = srv.job
	sp := startSavepoint(ctx, &f.cfg, f.savepointAfter, f.savepointKeep)
	engine, err := runEngineProfiled(ctx, f.cfg, f.cpuProfile, f.memProfile)
	savepoint, spErr := sp.wait()
	if err == nil && spErr != nil {
		return spErr
	}
	if savepoint != "" {
		fmt.Fprintf(stderr, "dfbench: savepoint %s\n", savepoint)
	}
	if errors.Is(err, ringflow.ErrFinished) {
		// NB: a run is rerun until it exits 0 (after a kill, say); one that
		// finished before has committed all its output.
		fmt.Fprintf(stderr, "dfbench: %v: nothing left to do\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	if samples != nil {
		if err := writeSamples(samples, engine.Samples); err != nil {
			return fmt.Errorf("--samples-out: %w", err)
		}
	}
	var base *pipelines.Result
	if f.baseline == "chan" {
		f.cfg.KeepSamples = false
		f.cfg.Progress = progressBar(stderr, f.cfg, "chan")
		b, err := pipelines.RunBaseline(ctx, f.cfg)
		if err != nil {
			return err
		}
		base = &b
	}
	if f.json {
		out := runJSONOf(f.cfg, engine, base)
		out.Savepoint = savepoint
		err = json.NewEncoder(stdout).Encode(out)
	} else {
		err = printRun(stdout, f.cfg, engine, base)
		if err == nil && savepoint != "" {
			_, err = fmt.Fprintf(stdout, "savepoint: %s\n", savepoint)
		}
	}
	if err != nil {
		return err
	}
	// A restored run's output misses what earlier runs committed, a
	// restarted one counts replayed records again, and one stopped with a
	// savepoint ended early: nothing to compare.
	fresh := engine.Restarts == 0 && engine.RestoredFrom == 0 && (f.savepointAfter == 0 || f.savepointKeep)
	if base != nil && fresh && f.cfg.Records > 0 && (base.SinkRecords != engine.SinkRecords || base.Checksum != engine.Checksum) {
		return fmt.Errorf("outputs differ: ringflow %d records, checksum %#x; chan %d records, checksum %#x",
			engine.SinkRecords, engine.Checksum, base.SinkRecords, base.Checksum)
	}
	return nil
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	fs := flag.NewFlagSet("dfbench run", flag.ContinueOnError)
	var f runFlags
	c := &f.cfg
	fs.StringVar(&c.Pipeline, "pipeline", "keyed-count", "pipeline: "+strings.Join(pipelines.Names, ", "))
	fs.Uint64Var(&c.Records, "records", 0, "records the sources produce in all (bounded run)")
	fs.DurationVar(&c.Duration, "duration", 0, fmt.Sprintf("run unbounded sources this long (default %v without --records)", defaultRunDuration))
	fs.IntVar(&c.Parallelism, "parallelism", min(runtime.GOMAXPROCS(0), pipelines.MaxParallelism), "instances of every operator")
	fs.IntVar(&c.Workers, "workers", 0, "ringflow worker threads, and the baseline's GOMAXPROCS (0: all CPUs)")
	fs.DurationVar(&c.Warmup, "warmup", 0, "leave the records generated in the run's first D out of the latency figures")
	fs.BoolVar(&c.NoPin, "no-pin", false, "leave ringflow's worker threads unpinned")
	fs.BoolVar(&c.NoSteal, "no-steal", false, "keep ringflow's tasks on their own worker's thread while it is away from its core")
	fs.DurationVar(&c.Debloat, "debloat", ringflow.DefaultDebloat, "buffer debloating: bound each ring to what its consumer drains in D (0: off; see ringflow.Config.Debloat)")
	fs.BoolVar(&c.HugePages, "huge-pages", false, "back ringflow's large keyed state with transparent huge pages (Linux; faster at millions of keys)")
	fs.DurationVar(&c.StallBound, "stall-bound", 0, stallBoundUsage)
	fs.BoolVar(&c.NoRest, "no-rest", false, "keep every ringflow worker on its own tasks at light load (by default the others rest and worker 0 runs their tasks)")
	fs.Uint64Var(&c.Keys, "keys", pipelines.DefaultKeys, "distinct keys")
	fs.Float64Var(&c.Rate, "rate", 0, "source rate in records per second, in all (0: unpaced)")
	fs.StringVar(&f.baseline, "baseline", "", `also run the pipeline on a baseline: "chan" (goroutines and channels)`)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the ringflow run to this file")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a profile of what the ringflow run allocated to this file")
	f.http.register(fs)
	fs.Uint64Var(&c.HotKeys, "hot-keys", 0, "after the first --keys records, which take every key once, draw keys below this only (0: all keys, uniformly)")
	fs.DurationVar(&c.Checkpoint.Interval, "checkpoint-interval", 0, "ringflow checkpoint interval (0: no checkpoints)")
	fs.BoolVar(&c.Checkpoint.NoRaise, "no-raise", false, "leave each snapshot's synchronous part in the fair scheduling class (by default its thread is raised to SCHED_FIFO for it, where the process may)")
	fs.StringVar(&c.Checkpoint.StateDir, "state-dir", "", "checkpoint store directory; a run on one holding a checkpoint resumes from it (default: a fresh temporary directory, removed at exit)")
	fs.StringVar(&c.SinkDir, "sink-dir", "", "write the output, one line per record, through ringflow's transactional file sink into this directory (needs checkpoints)")
	fs.StringVar(&f.mode, "mode", "exactly-once", "checkpoint mode: exactly-once or at-least-once")
	fs.Uint64Var(&c.FailAfter, "fail-after", 0, "fail an operator once, after this many records, and recover in place (needs checkpoints)")
	fs.DurationVar(&c.CheckpointWindows, "checkpoint-windows", 0, "alternate windows of D with checkpoints paused and on, and report the latency of each kind apart (\"checkpoint_windows\" in --json): checkpoints' cost to latency measured in one run; needs --checkpoint-interval, D at least two intervals")
	fs.Uint64Var(&c.SampleEvery, "sample-every", pipelines.DefaultSampleEvery, "make about one record in N (a power of two) a latency sample: denser samples show the milliseconds after a checkpoint's barrier in more detail, at the cost of two clock reads per sample")
	fs.DurationVar(&f.savepointAfter, "savepoint-after", 0, "stop the run D after it started with a savepoint into --savepoint-dir (as for an upgrade), and print its directory; a later run restores it with --restore-from")
	fs.BoolVar(&f.savepointKeep, "savepoint-keep-running", false, "with --savepoint-after, take the savepoint and go on instead of stopping")
	fs.StringVar(&c.Checkpoint.SavepointDir, "savepoint-dir", "", "directory of --savepoint-after's savepoints, each in a directory of its own")
	fs.StringVar(&c.RestoreFrom, "restore-from", "", "start the run from a savepoint, a directory of savepoints (the newest), or another run's --state-dir (its latest checkpoint), at any --parallelism its sources allow")
	fs.StringVar(&f.samplesOut, "samples-out", "", "write every latency sample of the ringflow run to this file, as CSV lines of generation time (Unix ns) and latency (ns), in generation order: to place slow records against the checkpoints' trigger times in the --json history")
	if err := parseFlags(fs, args, stderr); err != nil {
		return f, err
	}
	bad := func(format string, args ...any) (runFlags, error) {
		fmt.Fprintf(stderr, "dfbench run: "+format+"\n", args...)
		return f, errUsage
	}
	switch {
	case f.baseline != "" && f.baseline != "chan":
		return bad(`--baseline %q: the only baseline is "chan"`, f.baseline)
	case c.Parallelism < 1:
		return bad("--parallelism %d: must be at least 1", c.Parallelism)
	case c.Keys < 1:
		return bad("--keys %d: must be at least 1", c.Keys)
	case c.SampleEvery < 1 || c.SampleEvery&(c.SampleEvery-1) != 0 || c.SampleEvery > pipelines.MaxSampleEvery:
		return bad("--sample-every %d: must be a power of two from 1 to %d", c.SampleEvery, uint64(pipelines.MaxSampleEvery))
	case c.Records == 0 && c.Duration == 0:
		c.Duration = defaultRunDuration
	case c.Duration < 0:
		return bad("--duration %v: must be positive", c.Duration)
	case c.Debloat < 0:
		return bad("--debloat %v: must not be negative (0: off)", c.Debloat)
	}
	if c.Debloat == 0 {
		c.Debloat = -1 // NB: ringflow's off; its 0 is the default
	}
	switch f.mode {
	case "exactly-once":
		c.Checkpoint.Mode = ringflow.ExactlyOnce
	case "at-least-once":
		c.Checkpoint.Mode = ringflow.AtLeastOnce
	default:
		return bad("--mode %q: want exactly-once or at-least-once", f.mode)
	}
	if err := checkCheckpointFlags(c); err != nil {
		return bad("%v", err)
	}
	if err := checkSavepointFlags(c, f.savepointAfter, f.savepointKeep); err != nil {
		return bad("%v", err)
	}
	if c.FailAfter > 0 {
		c.Restart = ringflow.RestartStrategy{Attempts: 1}
	}
	if err := c.Validate(); err != nil {
		return bad("%v", strings.TrimPrefix(err.Error(), pipelines.ErrConfig.Error()+": "))
	}
	return f, nil
}

// checkCheckpointFlags reports checkpoint flags that make no sense
// together, in the flags' words.
func checkCheckpointFlags(c *pipelines.Config) error {
	switch {
	case c.Checkpoint.Interval < 0:
		return fmt.Errorf("--checkpoint-interval %v: must not be negative", c.Checkpoint.Interval)
	case c.Checkpoint.Interval == 0 && c.SinkDir != "":
		return fmt.Errorf("--sink-dir %s: the transactional file sink commits on checkpoints; set --checkpoint-interval", c.SinkDir)
	case c.Checkpoint.Interval == 0 && c.FailAfter > 0:
		return fmt.Errorf("--fail-after %d: recovery needs checkpoints; set --checkpoint-interval", c.FailAfter)
	case c.Checkpoint.Interval == 0 && c.Checkpoint.StateDir != "":
		return fmt.Errorf("--state-dir %s: without --checkpoint-interval there are no checkpoints to keep", c.Checkpoint.StateDir)
	case c.HotKeys > c.Keys:
		return fmt.Errorf("--hot-keys %d: must not exceed --keys %d", c.HotKeys, c.Keys)
	case c.CheckpointWindows < 0:
		return fmt.Errorf("--checkpoint-windows %v: must not be negative", c.CheckpointWindows)
	case c.CheckpointWindows > 0 && c.Checkpoint.Interval == 0:
		return fmt.Errorf("--checkpoint-windows %v: alternates checkpoints on and off; set --checkpoint-interval", c.CheckpointWindows)
	case c.CheckpointWindows > 0 && c.CheckpointWindows < 2*c.Checkpoint.Interval:
		return fmt.Errorf("--checkpoint-windows %v: must be at least two --checkpoint-interval (%v)", c.CheckpointWindows, 2*c.Checkpoint.Interval)
	}
	return nil
}

// runStateDir gives a checkpointed run without --state-dir a fresh
// temporary one; cleanup removes it.
func runStateDir(c *pipelines.Config) (cleanup func(), err error) {
	if c.Checkpoint.Interval == 0 || c.Checkpoint.StateDir != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "dfbench-state-")
	if err != nil {
		return nil, err
	}
	c.Checkpoint.StateDir = dir
	return func() { os.RemoveAll(dir) }, nil
}

// runEngineProfiled runs the ringflow pipeline, under the CPU profiler if
// cpu names a file, and writes the allocations it made to mem if that
// names one.
func runEngineProfiled(ctx context.Context, c pipelines.Config, cpu, mem string) (pipelines.Result, error) {
	if cpu != "" {
		out, err := os.Create(cpu)
		if err != nil {
			return pipelines.Result{}, err
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			out.Close()
			return pipelines.Result{}, fmt.Errorf("cpu profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	res, err := pipelines.Run(ctx, c)
	if mem != "" {
		err = errors.Join(err, writeAllocs(mem))
	}
	return res, err
}

// writeAllocs writes the allocations since the process started to file,
// as a pprof profile (go tool pprof -sample_index=alloc_space).
func writeAllocs(file string) error {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	runtime.GC() // NB: the profile is as of the last collection
	err = pprof.Lookup("allocs").WriteTo(out, 0)
	return errors.Join(err, out.Close())
}

// latencyJSON, baselineJSON and runJSON are the --json output.
type latencyJSON struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

type baselineJSON struct {
	RecordsPerSec float64     `json:"records_per_sec"`
	Latency       latencyJSON `json:"latency_us"`
}

type runJSON struct {
	Pipeline      string        `json:"pipeline"`
	Records       uint64        `json:"records"`
	Seconds       float64       `json:"seconds"`
	CPUSeconds    float64       `json:"cpu_seconds"` // user+system CPU time of the process during the run
	RecordsPerSec float64       `json:"records_per_sec"`
	Latency       latencyJSON   `json:"latency_us"`
	Baseline      *baselineJSON `json:"baseline,omitempty"`
	Checkpoints   *ckSummary    `json:"checkpoints"`                  // null without checkpoints
	Workers       []workerJSON  `json:"workers"`                      // ringflow's worker threads
	Stalls        stallsJSON    `json:"stalls"`                       // ringflow's steps over --stall-bound
	Windows       *windowsJSON  `json:"checkpoint_windows,omitempty"` // with --checkpoint-windows
	Savepoint     string        `json:"savepoint,omitempty"`          // --savepoint-after's directory
}

// stallsJSON sums up the ringflow job's stalls (Job.Stalls): the count by
// cause and the latest ones described (sched.Stall.String), the longest
// first.
type stallsJSON struct {
	ByCause map[string]int64 `json:"by_cause"`
	Latest  []string         `json:"latest"`
}

// stallsShown is how many stalls the output describes.
const stallsShown = 10

func stallsJSONOf(e pipelines.Result) stallsJSON {
	latest := slices.Clone(e.Stalls)
	slices.SortStableFunc(latest, func(a, b ringflow.Stall) int { return cmp.Compare(b.Duration, a.Duration) })
	out := stallsJSON{ByCause: map[string]int64{}, Latest: []string{}}
	maps.Copy(out.ByCause, e.StallCounts)
	for _, s := range latest[:min(len(latest), stallsShown)] {
		out.Latest = append(out.Latest, s.String())
	}
	return out
}

// windowsJSON is the latency of a --checkpoint-windows run by kind of
// window.
type windowsJSON struct {
	WindowS  float64       `json:"window_s"`
	With     windowLatJSON `json:"with_checkpoints_us"`
	Without  windowLatJSON `json:"without_checkpoints_us"`
	P99Ratio float64       `json:"p99_ratio"` // with ÷ without
}

type windowLatJSON struct {
	latencyJSON
	Samples uint64 `json:"samples"`
}

// workerJSON is one ringflow worker's scheduler statistics
// (ringflow.WorkerStats).
type workerJSON struct {
	Parks     int64   `json:"parks"`     // sleeps on its doorbell
	Stolen    int64   `json:"stolen"`    // polls of its tasks by another worker while its thread was away
	Rests     int64   `json:"rests"`     // times it rested while worker 0 ran its tasks
	RestedMs  float64 `json:"rested_ms"` // time it rested in all
	Preempted int64   `json:"preempted"` // times its thread was switched out while it could run
}

func latencyJSONOf(l pipelines.Latency) latencyJSON {
	return latencyJSON{P50: l.P50, P99: l.P99, P999: l.P999}
}

func runJSONOf(c pipelines.Config, e pipelines.Result, base *pipelines.Result) runJSON {
	out := runJSON{Pipeline: e.Pipeline, Records: e.Records, Seconds: e.Seconds, CPUSeconds: e.CPUSeconds,
		RecordsPerSec: e.RecordsPerSec, Latency: latencyJSONOf(e.Latency)}
	if c.Checkpoint.Interval > 0 {
		out.Checkpoints = ckSummaryOf(e)
	}
	out.Workers = []workerJSON{}
	for _, w := range e.Workers {
		out.Workers = append(out.Workers, workerJSON{Parks: w.Parks, Stolen: w.Stolen,
			Rests: w.Rests, RestedMs: float64(w.Rested) / 1e6, Preempted: w.Preempted})
	}
	out.Stalls = stallsJSONOf(e)
	if base != nil {
		out.Baseline = &baselineJSON{RecordsPerSec: base.RecordsPerSec, Latency: latencyJSONOf(base.Latency)}
	}
	if w := e.Windows; w != nil {
		out.Windows = &windowsJSON{WindowS: w.Window.Seconds(),
			With:     windowLatJSON{latencyJSONOf(w.With), w.With.Samples},
			Without:  windowLatJSON{latencyJSONOf(w.Without), w.Without.Samples},
			P99Ratio: w.P99Ratio()}
	}
	return out
}

func printRun(w io.Writer, c pipelines.Config, e pipelines.Result, base *pipelines.Result) error {
	bound := fmt.Sprintf("%d records", c.Records)
	if c.Records == 0 {
		bound = fmt.Sprintf("%v", c.Duration)
	}
	pace := "unpaced"
	if c.Rate > 0 {
		pace = fmt.Sprintf("rate %.0f/s", c.Rate)
	}
	if c.Warmup > 0 {
		pace += fmt.Sprintf(", latency after a %v warm-up", c.Warmup)
	}
	workers := "all CPUs"
	if c.Workers > 0 {
		workers = fmt.Sprint(c.Workers)
	}
	if c.NoPin {
		workers += " (unpinned)"
	}
	if c.NoSteal {
		workers += " (no stealing)"
	}
	if c.NoRest {
		workers += " (no resting)"
	}
	keys := fmt.Sprint(c.Keys, " keys")
	if c.HugePages {
		keys += " (huge pages)"
	}
	if c.Debloat > 0 {
		pace += fmt.Sprintf(", debloat %v", c.Debloat)
	} else {
		pace += ", debloat off"
	}
	fmt.Fprintf(w, "dfbench run: %s, %s, parallelism %d, workers %s, %s, %s\n\n",
		c.Pipeline, bound, c.Parallelism, workers, keys, pace)
	tw := newTable(w)
	fmt.Fprintln(tw, "engine\trecords/s\trecords\tsink records\tseconds\tcpu s\trecords/cpu s\tp50 µs\tp99 µs\tp999 µs\tsamples\t")
	for _, r := range []*pipelines.Result{&e, base} {
		if r == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2fM\t%d\t%d\t%.2f\t%.2f\t%.2fM\t%.1f\t%.1f\t%.1f\t%d\t\n", r.Engine,
			r.RecordsPerSec/1e6, r.Records, r.SinkRecords, r.Seconds, r.CPUSeconds, float64(r.Records)/r.CPUSeconds/1e6,
			r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Samples)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if base != nil {
		fmt.Fprintf(w, "ringflow ÷ chan: %.2f× throughput, %.2f× records per CPU second\n",
			e.RecordsPerSec/base.RecordsPerSec, (float64(e.Records)/e.CPUSeconds)/(float64(base.Records)/base.CPUSeconds))
		if c.Records > 0 {
			same := "identical"
			if base.SinkRecords != e.SinkRecords || base.Checksum != e.Checksum {
				same = "DIFFERENT"
			}
			fmt.Fprintf(w, "outputs: %s (ringflow checksum %#x, chan %#x)\n", same, e.Checksum, base.Checksum)
		}
	}
	printStalls(w, e)
	return printCheckpoints(w, c, e)
}

// stallBoundUsage is the help of run's and soak's --stall-bound.
const stallBoundUsage = "record ringflow steps, and checkpoints' synchronous parts on their own, longer than this as stalls, " +
	"with where their time went (0: 5ms; negative, e.g. -1ns: none)"

// printStalls prints the count of the ringflow job's stalls by cause and
// the longest.
func printStalls(w io.Writer, e pipelines.Result) {
	s := stallsJSONOf(e)
	if len(s.ByCause) == 0 {
		return
	}
	causes := slices.Sorted(maps.Keys(s.ByCause))
	var parts []string
	var n int64
	for _, c := range causes {
		parts = append(parts, fmt.Sprintf("%s %d", c, s.ByCause[c]))
		n += s.ByCause[c]
	}
	fmt.Fprintf(w, "stalls (steps and synchronous parts over the stall bound): %d: %s\n  longest: %s\n", n, strings.Join(parts, ", "), s.Latest[0])
}

// progressBar returns a Progress function drawing a bar labelled with the
// engine on stderr, or nil if stderr is not a terminal.
func progressBar(stderr io.Writer, c pipelines.Config, engine string) func(pipelines.Progress) {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return func(p pipelines.Progress) {
		if p.Done {
			fmt.Fprint(f, "\r\033[K")
			return
		}
		var done float64
		if c.Records > 0 {
			done = float64(p.Produced) / float64(c.Records)
		} else {
			done = p.Elapsed.Seconds() / c.Duration.Seconds()
		}
		done = min(max(done, 0), 1)
		const width = 30
		n := int(done * width)
		fmt.Fprintf(f, "\r\033[K%-8s [%s%s] %3.0f%% %.1fM records", engine, strings.Repeat("#", n),
			strings.Repeat(".", width-n), done*100, float64(p.Produced)/1e6)
	}
}

// ckSummary is the "checkpoints" object of the --json output, summing up
// the ringflow job's completed checkpoints (Job.Checkpoints); failed ones
// are only counted. Sync and alignment are per subtask and checkpoint.
type ckSummary struct {
	Completed    int         `json:"completed"`
	Failed       int         `json:"failed"`
	Aborted      int         `json:"aborted"`       // in flight when an attempt ended
	Restarts     int         `json:"restarts"`      // in-place recoveries after a failure
	RestoredFrom uint64      `json:"restored_from"` // checkpoint the latest start or restart restored; 0: none
	Duration     ckQuantiles `json:"duration_ms"`
	Sync         ckQuantiles `json:"sync_us"`
	SyncCPU      ckQuantiles `json:"sync_cpu_us"` // of each synchronous part, the time its thread ran
	Alignment    ckQuantiles `json:"alignment_ms"`
	BytesWritten uint64      `json:"bytes_written"`
	BytesReused  uint64      `json:"bytes_reused"`
	History      []ckEntry   `json:"history"` // every checkpoint, oldest first
}

// ckQuantiles are nearest-rank quantiles; all 0 without samples.
type ckQuantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// ckEntry is one checkpoint in ckSummary.History. The maxima are over its
// subtasks: the latest first barrier (after the trigger), the longest
// alignment and the longest synchronous part, which together bound how
// long a record behind the barrier waited for it.
type ckEntry struct {
	ID              uint64  `json:"id"`
	Status          string  `json:"status"`
	Final           bool    `json:"final"`
	TriggerUnixUs   int64   `json:"trigger_unix_us"`
	DurationMs      float64 `json:"duration_ms"`
	StartDelayMaxUs float64 `json:"start_delay_max_us"`
	AlignmentMaxUs  float64 `json:"alignment_max_us"`
	SyncMaxUs       float64 `json:"sync_max_us"`
	SyncCPUMaxUs    float64 `json:"sync_cpu_max_us"`
	AsyncMaxUs      float64 `json:"async_max_us"`
	WrittenMs       float64 `json:"written_ms"` // trigger to every part written; the rest is the commit
	BytesWritten    uint64  `json:"bytes_written"`
	BytesReused     uint64  `json:"bytes_reused"`
}

func ckSummaryOf(e pipelines.Result) *ckSummary {
	s := &ckSummary{Restarts: e.Restarts, RestoredFrom: e.RestoredFrom, History: []ckEntry{}}
	var dur, sync, syncCPU, align []float64
	for _, c := range e.Checkpoints {
		entry := ckEntry{ID: c.ID, Status: c.Status, Final: c.Final, TriggerUnixUs: c.Trigger.UnixMicro(), DurationMs: ckMs(c.Duration),
			WrittenMs: ckMs(c.Written), BytesWritten: c.BytesWritten, BytesReused: c.BytesReused}
		for _, st := range c.Subtasks {
			entry.StartDelayMaxUs = max(entry.StartDelayMaxUs, float64(st.StartDelay)/1e3)
			entry.AlignmentMaxUs = max(entry.AlignmentMaxUs, float64(st.Alignment)/1e3)
			entry.SyncMaxUs = max(entry.SyncMaxUs, float64(st.Sync)/1e3)
			entry.SyncCPUMaxUs = max(entry.SyncCPUMaxUs, float64(st.SyncCPU)/1e3)
			entry.AsyncMaxUs = max(entry.AsyncMaxUs, float64(st.Async)/1e3)
		}
		s.History = append(s.History, entry)
		switch {
		case strings.HasPrefix(c.Status, "aborted"):
			s.Aborted++
			continue
		case c.Status != "completed":
			s.Failed++
			continue
		}
		s.Completed++
		s.BytesWritten += c.BytesWritten
		s.BytesReused += c.BytesReused
		dur = append(dur, ckMs(c.Duration))
		for _, st := range c.Subtasks {
			sync = append(sync, float64(st.Sync)/1e3)
			syncCPU = append(syncCPU, float64(st.SyncCPU)/1e3)
			align = append(align, ckMs(st.Alignment))
		}
	}
	s.Duration, s.Sync, s.SyncCPU, s.Alignment = quantilesOf(dur), quantilesOf(sync), quantilesOf(syncCPU), quantilesOf(align)
	return s
}

func ckMs(d time.Duration) float64 { return float64(d) / 1e6 }

// quantilesOf returns the nearest-rank p50, p99 and maximum of xs, which
// it sorts.
func quantilesOf(xs []float64) ckQuantiles {
	if len(xs) == 0 {
		return ckQuantiles{}
	}
	slices.Sort(xs)
	rank := func(q float64) float64 { return xs[max(int(math.Ceil(q*float64(len(xs))))-1, 0)] }
	return ckQuantiles{P50: rank(0.5), P99: rank(0.99), Max: xs[len(xs)-1]}
}

// printCheckpoints prints the table's checkpoint summary.
func printCheckpoints(w io.Writer, c pipelines.Config, e pipelines.Result) error {
	if c.Checkpoint.Interval == 0 {
		_, err := fmt.Fprintln(w, "checkpoints: off")
		return err
	}
	s := ckSummaryOf(e)
	fmt.Fprintf(w, "checkpoints: %s every %v: %d completed, %d failed; %d restarts", c.Checkpoint.Mode,
		c.Checkpoint.Interval, s.Completed, s.Failed, s.Restarts)
	if s.Aborted > 0 {
		fmt.Fprintf(w, ", %d aborted in flight", s.Aborted)
	}
	if s.RestoredFrom != 0 {
		fmt.Fprintf(w, ", restored from checkpoint %d", s.RestoredFrom)
	}
	fmt.Fprintln(w)
	q := func(name string, v ckQuantiles, unit string) {
		fmt.Fprintf(w, "  %-10s p50 %.1f, p99 %.1f, max %.1f %s\n", name, v.P50, v.P99, v.Max, unit)
	}
	q("duration", s.Duration, "ms")
	q("sync", s.Sync, "µs (per subtask)")
	q("  on cpu", s.SyncCPU, "µs (the time the thread ran; the rest it was preempted)")
	q("alignment", s.Alignment, "ms (per subtask)")
	_, err := fmt.Fprintf(w, "  state      %.2f MB written, %.2f MB reused\n", float64(s.BytesWritten)/1e6, float64(s.BytesReused)/1e6)
	if err != nil || e.Windows == nil {
		return err
	}
	win := e.Windows
	_, err = fmt.Fprintf(w, "windows of %v, checkpoints on and paused in turn: p99 %.1f µs with checkpoints (%d samples), %.1f µs without (%d): %.2f×\n",
		win.Window, win.With.P99, win.With.Samples, win.Without.P99, win.Without.Samples, win.P99Ratio())
	return err
}

// samplesHeader is the first line of a --samples-out file.
const samplesHeader = "gen_unix_ns,latency_ns"

// writeSamples writes samples as CSV to w: a header, then one line per
// sample.
func writeSamples(w io.Writer, samples []pipelines.Sample) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, samplesHeader)
	for _, s := range samples {
		fmt.Fprintf(bw, "%d,%d\n", s.GenUnixNano, s.LatencyNanos)
	}
	return bw.Flush()
}
