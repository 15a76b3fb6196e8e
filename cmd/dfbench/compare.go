package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/ringflow/ringflow/bench/compare"
)

// compareFlags are the parsed flags of `dfbench compare`.
type compareFlags struct {
	cfg    compare.Config
	json   bool
	http   httpFlags
	report string
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	f, err := parseCompareFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv, err := f.http.serve()
	if err != nil {
		return err
	}
	defer srv.close()
	f.cfg.OnJob = srv.job
	if f.report != "" && f.cfg.ProfileDir == "" {
		// The report lists the heaviest frames of each mode's profile.
		dir, err := os.MkdirTemp("", "ringflow-compare-profile-")
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		defer os.RemoveAll(dir)
		f.cfg.ProfileDir = dir
	}
	r, err := compare.Compare(ctx, f.cfg)
	if err != nil {
		return err
	}
	if f.report != "" {
		if err := writeReport(f.report, r, f.cfg); err != nil {
			return err
		}
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(r)
	}
	return compare.WriteTable(stdout, r)
}

// writeReport writes the comparison's HTML report to path.
func writeReport(path string, r compare.Report, cfg compare.Config) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	err = compare.WriteHTML(f, r, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}

func parseCompareFlags(args []string, stderr io.Writer) (compareFlags, error) {
	var f compareFlags
	c := &f.cfg
	fs := flag.NewFlagSet("dfbench compare", flag.ContinueOnError)
	fs.StringVar(&c.Pipeline, "pipeline", "keyed-count", "pipeline: "+strings.Join(compare.Pipelines, ", "))
	fs.Float64Var(&c.Skew, "skew", 0, "fraction of the records that carry one hot key, in [0, 1]")
	fs.DurationVar(&c.SlowSink, "slow-sink", 0, "busy wait of the sink per record (0: none)")
	fs.DurationVar(&c.Interval, "checkpoint-interval", compare.DefaultInterval, "checkpoint interval")
	fs.DurationVar(&c.AlignmentTimeout, "alignment-timeout", compare.DefaultAlignmentTimeout, "alignment timeout of the timeout mode")
	fs.DurationVar(&c.Duration, "duration", compare.DefaultDuration, "run time of each mode")
	fs.StringVar(&c.ProfileDir, "profile", "", "write <mode>.fgprof.pprof (<mode>-debloat.fgprof.pprof with --debloat) per run and stalls.txt into this directory")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&f.report, "report", "", "also write the comparison as one self-contained HTML `FILE`: duration charts, each mode's slowest checkpoint's barrier timeline, its profile's heaviest frames")
	f.http.register(fs)
	modes := fs.String("modes", "aligned,unaligned,timeout,none", "modes to run, in order (none: no checkpoints)")
	fs.IntVar(&c.Parallelism, "parallelism", compare.DefaultParallelism, "instances of every operator")
	fs.IntVar(&c.Workers, "workers", 0, "ringflow worker threads (0: all CPUs)")
	fs.Uint64Var(&c.Keys, "keys", compare.DefaultKeys, "keys besides the hot one")
	fs.IntVar(&c.RingCapacity, "ring-capacity", compare.DefaultRingCapacity, "bytes per ring (a power of two)")
	fs.DurationVar(&c.Debloat, "debloat", 0, "also run each mode with buffer debloating, each ring bounded to what its consumer drains in D (0: without only)")
	fs.IntVar(&c.FrameBytes, "frame-bytes", 0, "target bytes of a data frame (0: the engine's default, 32 KiB)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return f, err
	}
	c.Modes = nil
	for _, m := range strings.Split(*modes, ",") {
		c.Modes = append(c.Modes, compare.Mode(strings.TrimSpace(m)))
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "dfbench compare: %v\n", err)
		return f, errUsage
	}
	return f, nil
}
