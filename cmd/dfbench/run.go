package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

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
}

func runRun(args []string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	f.cfg.Progress = progressBar(stderr, f.cfg, "ringflow")
	engine, err := runEngineProfiled(ctx, f.cfg, f.cpuProfile)
	if err != nil {
		return err
	}
	var base *pipelines.Result
	if f.baseline == "chan" {
		f.cfg.Progress = progressBar(stderr, f.cfg, "chan")
		b, err := pipelines.RunBaseline(ctx, f.cfg)
		if err != nil {
			return err
		}
		base = &b
	}
	if f.json {
		err = json.NewEncoder(stdout).Encode(runJSONOf(engine, base))
	} else {
		err = printRun(stdout, f.cfg, engine, base)
	}
	if err != nil {
		return err
	}
	if base != nil && f.cfg.Records > 0 && (base.SinkRecords != engine.SinkRecords || base.Checksum != engine.Checksum) {
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
	fs.Uint64Var(&c.Keys, "keys", pipelines.DefaultKeys, "distinct keys")
	fs.Float64Var(&c.Rate, "rate", 0, "source rate in records per second, in all (0: unpaced)")
	fs.StringVar(&f.baseline, "baseline", "", `also run the pipeline on a baseline: "chan" (goroutines and channels)`)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the ringflow run to this file")
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
	case c.Records == 0 && c.Duration == 0:
		c.Duration = defaultRunDuration
	case c.Duration < 0:
		return bad("--duration %v: must be positive", c.Duration)
	}
	if err := c.Validate(); err != nil {
		return bad("%v", strings.TrimPrefix(err.Error(), pipelines.ErrConfig.Error()+": "))
	}
	return f, nil
}

// runEngineProfiled runs the ringflow pipeline, under the CPU profiler if
// profile names a file.
func runEngineProfiled(ctx context.Context, c pipelines.Config, profile string) (pipelines.Result, error) {
	if profile == "" {
		return pipelines.Run(ctx, c)
	}
	out, err := os.Create(profile)
	if err != nil {
		return pipelines.Result{}, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return pipelines.Result{}, fmt.Errorf("cpu profile: %w", err)
	}
	res, err := pipelines.Run(ctx, c)
	pprof.StopCPUProfile()
	return res, errors.Join(err, out.Close())
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
	RecordsPerSec float64       `json:"records_per_sec"`
	Latency       latencyJSON   `json:"latency_us"`
	Baseline      *baselineJSON `json:"baseline,omitempty"`
}

func latencyJSONOf(l pipelines.Latency) latencyJSON {
	return latencyJSON{P50: l.P50, P99: l.P99, P999: l.P999}
}

func runJSONOf(e pipelines.Result, base *pipelines.Result) runJSON {
	out := runJSON{Pipeline: e.Pipeline, Records: e.Records, Seconds: e.Seconds,
		RecordsPerSec: e.RecordsPerSec, Latency: latencyJSONOf(e.Latency)}
	if base != nil {
		out.Baseline = &baselineJSON{RecordsPerSec: base.RecordsPerSec, Latency: latencyJSONOf(base.Latency)}
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
	fmt.Fprintf(w, "dfbench run: %s, %s, parallelism %d, workers %s, %d keys, %s\n\n",
		c.Pipeline, bound, c.Parallelism, workers, c.Keys, pace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
	_, err := fmt.Fprintln(w, "checkpoints: none (not implemented in ringflow yet)")
	return err
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
