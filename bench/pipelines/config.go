package pipelines

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ringflow/ringflow"
)

// Names lists the pipelines, in the order the package doc describes them.
var Names = []string{"passthrough", "map-filter", "keyed-count", "window", "join"}

// MaxParallelism is the number of key groups of the ringflow jobs, and so
// the largest parallelism a pipeline may have.
const MaxParallelism = 128

// Config describes one run of one pipeline.
type Config struct {
	// Pipeline is one of Names.
	Pipeline string
	// Records bounds the run: the sources produce this many records in all
	// (split between the join's two sources). Exactly one of Records and
	// Duration is set.
	Records uint64
	// Duration makes the sources unbounded and cancels the run after it.
	Duration time.Duration
	// Parallelism is the number of instances of every operator; default 1.
	Parallelism int
	// Workers is ringflow's number of worker threads, and the baseline's
	// GOMAXPROCS while it runs; 0: the CPUs this process may use.
	Workers int
	// NoPin leaves ringflow's worker threads unpinned (ringflow.Config.NoPin).
	NoPin bool
	// NoSteal keeps ringflow's tasks on their own workers' threads
	// (ringflow.Config.NoSteal).
	NoSteal bool
	// NoRest keeps every ringflow worker on its own tasks whatever the
	// load (ringflow.Config.NoRest).
	NoRest bool
	// StallBound is ringflow.Config.StallBound: steps longer than it are
	// recorded as stalls (Result.Stalls).
	StallBound time.Duration
	// Debloat is ringflow.Config.Debloat: the target time of buffer
	// debloating (0: ringflow's default; negative: off).
	Debloat time.Duration
	// HugePages backs ringflow's large keyed state with transparent huge
	// pages (ringflow.Config.HugePages).
	HugePages bool
	// Keys is the number of distinct keys; default 100000.
	Keys uint64
	// Rate paces the sources to this many records per second in all; 0:
	// as fast as the pipeline takes them.
	Rate float64
	// Warmup excludes from the latency figures the records generated in
	// the run's first Warmup (throughput still counts them).
	Warmup time.Duration
	// EventStride is the number of records per millisecond of event time
	// (window and join); 0: the default the package doc gives.
	EventStride uint64
	// HotKeys, if not 0, limits which keys change: the sources' first Keys
	// records (sequence numbers 0..Keys-1) take every key once, in order,
	// and every later record a key below HotKeys. A keyed pipeline's state
	// then holds every key, while only HotKeys of them change after the
	// first Keys records (see the package doc).
	HotKeys uint64
	// Progress, if set, is called about every ProgressInterval from another
	// goroutine, and once more, with Done set, when the run ends.
	Progress func(Progress)
	// KeepSamples keeps every latency sample in Result.Samples, to see
	// when the slow ones were generated (against the checkpoints'
	// trigger times, say).
	KeepSamples bool
	// SampleEvery makes about one record in SampleEvery, a power of two, a
	// latency sample; 0: DefaultSampleEvery. Denser samples show the
	// milliseconds after a checkpoint's barrier in more detail, at the cost
	// of a clock read per sample at the source and at the sink.
	SampleEvery uint64
	// CheckpointWindows, if positive, runs ringflow in alternating windows
	// of this length, the first with its checkpoints paused
	// (Job.PauseCheckpoints), the next with them on, and so on, and
	// Result.Windows gives the latency of the samples generated in each
	// kind apart: what checkpoints cost the records, measured in one run,
	// under the same noise from the machine. The first Checkpoint.Interval
	// of each window counts in neither kind (a checkpoint triggered at the
	// end of a window may still be committing). Needs checkpoints and a
	// window of at least two intervals; the baseline ignores it.
	CheckpointWindows time.Duration

	// The rest applies to ringflow only; the baseline ignores it.

	// Checkpoint configures ringflow's checkpoints; they are on when
	// Checkpoint.Interval is positive, and then need a StateDir. A run on
	// a StateDir holding a complete checkpoint resumes from it.
	Checkpoint ringflow.CheckpointConfig
	// Restart is what the job does when a task fails (FailAfter).
	Restart ringflow.RestartStrategy
	// RestoreFrom starts the job from a savepoint, a directory of
	// savepoints or another run's state directory
	// (ringflow.Config.RestoreFrom).
	RestoreFrom string
	// SinkDir, if set, sends the output through ringflow's transactional
	// file sink into this directory, one text line per output record
	// (see the package doc for the lines); it needs checkpoints.
	SinkDir string
	// FailAfter, if not 0, makes an operator behind the (left) source fail
	// once per Run, at the first record after FailAfter it sees; it needs
	// checkpoints and Restart.Attempts of at least 1 to recover.
	FailAfter uint64
	// OnJob, if set, is called with the ringflow job once it is built,
	// before it runs (to serve its metrics, say).
	OnJob func(*ringflow.Job)
	// Control, if set, lets another goroutine fail the running job and
	// end its sources (see Control); with Records = UntilStopped the run
	// ends when it says so.
	Control *Control
	// LiveLatency, if set, also receives every latency sample as the sink
	// records it, for another goroutine to Drain while the run goes on
	// (the latency of each second of a long run, say).
	LiveLatency *LiveHistogram
}

// Progress says how far a run has come.
type Progress struct {
	Produced uint64        // records the sources produced so far
	Elapsed  time.Duration // since the run started
	Done     bool          // the run has ended; no call follows
}

// ProgressInterval is how often Config.Progress is called.
const ProgressInterval = 100 * time.Millisecond

// DefaultKeys is the number of keys when Config.Keys is 0.
const DefaultKeys = 100_000

// DefaultSampleEvery is Config.SampleEvery when it is 0, and
// MaxSampleEvery the largest value it may take.
const (
	DefaultSampleEvery = 1024
	MaxSampleEvery     = 1 << 30
)

// ErrConfig is wrapped by every error about a bad Config.
var ErrConfig = errors.New("bad pipeline config")

func (c Config) withDefaults() Config {
	if c.Parallelism == 0 {
		c.Parallelism = 1
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.EventStride == 0 {
		perWindow := uint64(10) // expected records of a key per window and source
		if c.Pipeline == "join" {
			perWindow = 1
		}
		c.EventStride = max(1, (perWindow*c.Keys+windowSizeMs-1)/windowSizeMs)
	}
	return c
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	known := false
	for _, n := range Names {
		known = known || n == c.Pipeline
	}
	switch {
	case !known:
		return bad("unknown pipeline %q: want one of %s", c.Pipeline, strings.Join(Names, ", "))
	case (c.Records == 0) == (c.Duration <= 0):
		return bad("records %d and duration %v: set exactly one of them", c.Records, c.Duration)
	case c.Parallelism < 0 || c.Parallelism > MaxParallelism:
		return bad("parallelism %d: must be in [1, %d]", c.Parallelism, MaxParallelism)
	case c.Warmup < 0 || (c.Duration > 0 && c.Warmup >= c.Duration):
		return bad("warmup %v: must be at least 0 and shorter than the duration %v", c.Warmup, c.Duration)
	case c.Workers < 0:
		return bad("workers %d: must be at least 1 (or 0 for all CPUs)", c.Workers)
	case c.Rate < 0 || c.Rate != c.Rate:
		return bad("rate %v: must be a non-negative number of records per second", c.Rate)
	case c.Pipeline == "join" && c.Records == 1:
		return bad("records 1: the join needs at least 2, one per source")
	case c.HotKeys > c.Keys:
		return bad("hot keys %d: must not exceed the %d keys", c.HotKeys, c.Keys)
	case c.SampleEvery&(c.SampleEvery-1) != 0 || c.SampleEvery > MaxSampleEvery:
		return bad("sample every %d: must be a power of two up to %d (or 0 for %d)", c.SampleEvery, uint64(MaxSampleEvery), DefaultSampleEvery)
	case c.Checkpoint.Interval < 0:
		return bad("checkpoint interval %v: must not be negative", c.Checkpoint.Interval)
	case c.SinkDir != "" && c.Checkpoint.Interval == 0:
		return bad("sink directory %q: the transactional file sink commits only on checkpoints; set a checkpoint interval", c.SinkDir)
	case c.FailAfter > 0 && c.Checkpoint.Interval == 0:
		return bad("fail after %d records: recovery needs checkpoints; set a checkpoint interval", c.FailAfter)
	case c.CheckpointWindows < 0:
		return bad("checkpoint windows %v: must not be negative", c.CheckpointWindows)
	case c.CheckpointWindows > 0 && c.Checkpoint.Interval == 0:
		return bad("checkpoint windows %v: alternate checkpoints on and off; set a checkpoint interval", c.CheckpointWindows)
	case c.CheckpointWindows > 0 && c.CheckpointWindows < 2*c.Checkpoint.Interval:
		return bad("checkpoint windows %v: must be at least two checkpoint intervals (%v)", c.CheckpointWindows, 2*c.Checkpoint.Interval)
	case c.FailAfter > 0 && c.Restart.Attempts < 1:
		return bad("fail after %d records: needs at least 1 restart attempt", c.FailAfter)
	}
	return nil
}

// Result is the outcome of one run.
type Result struct {
	Engine        string  `json:"engine"`          // "ringflow" or "chan"
	Pipeline      string  `json:"pipeline"`        // the pipeline run
	Records       uint64  `json:"records"`         // records the sources produced
	SinkRecords   uint64  `json:"sink_records"`    // records the sink received
	Checksum      uint64  `json:"checksum"`        // sum of the sink records' digests
	Seconds       float64 `json:"seconds"`         // wall time of the run
	CPUSeconds    float64 `json:"cpu_seconds"`     // user+system CPU time of the process during the run
	RecordsPerSec float64 `json:"records_per_sec"` // Records / Seconds
	Latency       Latency `json:"latency_us"`      // sampled source-to-sink latency

	// Checkpoints are ringflow's checkpoint statistics (Job.Checkpoints),
	// oldest first; empty without checkpoints and for the baseline.
	Checkpoints []ringflow.CheckpointStats `json:"-"`
	// Restarts is how often the ringflow job restored after a failure.
	Restarts int `json:"restarts"`
	// RestoredFrom is the checkpoint the ringflow job's latest start or
	// restart restored, 0 if it started afresh.
	RestoredFrom uint64 `json:"restored_from"`
	// Samples are the latency samples in generation order, if
	// Config.KeepSamples was set.
	Samples []Sample `json:"-"`
	// Workers are the ringflow job's per-worker scheduler statistics
	// (Job.WorkerStats); empty for the baseline.
	Workers []ringflow.WorkerStats `json:"-"`
	// Stalls are the ringflow job's latest stalls and StallCounts the
	// count of all by cause (Job.Stalls).
	Stalls      []ringflow.Stall `json:"-"`
	StallCounts map[string]int64 `json:"-"`
	// Windows splits the latency by checkpoint window in a ringflow run
	// with Config.CheckpointWindows; nil otherwise.
	Windows *WindowLatency `json:"checkpoint_windows,omitempty"`
}

// WindowLatency is the sampled latency of a run with
// Config.CheckpointWindows, in the windows with checkpoints and in those
// without.
type WindowLatency struct {
	Start   time.Time     `json:"-"` // when the first window (paused) began
	Window  time.Duration `json:"-"`
	With    Latency       `json:"with_checkpoints_us"`
	Without Latency       `json:"without_checkpoints_us"`
}

// P99Ratio is the p99 with checkpoints over the p99 without (0 when either
// kind of window has no sample).
func (w *WindowLatency) P99Ratio() float64 {
	if w.With.Samples == 0 || w.Without.Samples == 0 || w.Without.P99 == 0 {
		return 0
	}
	return w.With.P99 / w.Without.P99
}

// Sample is one sampled record: when its source generated it, and how long
// it took to reach the sink.
type Sample struct {
	GenUnixNano  int64
	LatencyNanos int64
}

// Latency summarises sampled latencies, in microseconds.
type Latency struct {
	Samples uint64  `json:"samples"`
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
}

func latencyOf(h *Histogram) Latency {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Latency{Samples: h.Count(), P50: us(h.Quantile(0.5)), P99: us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)), Max: us(h.Max())}
}

// Run runs c's pipeline on ringflow.
func Run(ctx context.Context, c Config) (Result, error) {
	return run(ctx, c, "ringflow", runEngine)
}

// RunBaseline runs c's pipeline on goroutines and channels.
func RunBaseline(ctx context.Context, c Config) (Result, error) {
	if c.Workers > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.Workers))
	}
	return run(ctx, c, "chan", runChan)
}

// runner runs one pipeline to completion on one engine, counting what its
// sources produce into produced and what its sinks receive into sinks.
// It may fill in res's engine-specific fields.
type runner func(ctx context.Context, c Config, produced *counters, sinks *lanes, res *Result) error

func run(ctx context.Context, c Config, engine string, r runner) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	c = c.withDefaults()
	produced := newCounters(2 * c.Parallelism)
	sinks := newLanes(c)
	runCtx := ctx
	if c.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.Duration)
		defer cancel()
	}
	stop := startProgress(c.Progress, produced)
	sinks.startSampling(c.Warmup, c.KeepSamples)
	if c.CheckpointWindows > 0 && engine == "ringflow" {
		sinks.startWindows(c.CheckpointWindows, c.Checkpoint.Interval)
	}
	cpu0 := cpuTime()
	start := time.Now()
	var res Result
	err := r(runCtx, c, produced, sinks, &res)
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	stop()
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if err != nil && !(c.Duration > 0 && errors.Is(err, context.DeadlineExceeded)) {
		return Result{}, fmt.Errorf("%s %s: %w", engine, c.Pipeline, err)
	}
	res.Engine, res.Pipeline, res.Records = engine, c.Pipeline, produced.sum()
	res.Seconds, res.CPUSeconds = elapsed.Seconds(), cpu.Seconds()
	var hist Histogram
	res.SinkRecords, res.Checksum = sinks.total(&hist)
	res.Latency = latencyOf(&hist)
	if sinks.windows.length > 0 {
		var with, without Histogram
		sinks.totalWindows(&with, &without)
		res.Windows = &WindowLatency{Start: time.Unix(0, sinks.windows.start), Window: c.CheckpointWindows,
			With: latencyOf(&with), Without: latencyOf(&without)}
	}
	if c.KeepSamples {
		res.Samples = sinks.kept()
	}
	res.RecordsPerSec = float64(res.Records) / res.Seconds
	return res, nil
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startProgress calls report every ProgressInterval until the returned
// function is called, which reports once more.
func startProgress(report func(Progress), produced *counters) (stop func()) {
	if report == nil {
		return func() {}
	}
	start := time.Now()
	now := func(done bool) Progress {
		return Progress{Produced: produced.sum(), Elapsed: time.Since(start), Done: done}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report(now(false))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		report(now(true))
	}
}
