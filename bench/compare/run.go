package compare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/felixge/fgprof"

	"github.com/ringflow/ringflow"
)

// restoreTimeout bounds the restore run, which should end almost at once.
const restoreTimeout = 2 * time.Minute

// Compare runs cfg.Pipeline once per mode of cfg.Modes, back to back, and
// reports each. With cfg.ProfileDir it also writes the profiles and the
// stall report there.
func Compare(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return Report{}, fmt.Errorf("profile dir: %w", err)
		}
	}
	r := Report{Pipeline: cfg.Pipeline, Rings: ringCount(cfg), RingCapacity: cfg.RingCapacity}
	r.RingBytes = uint64(r.Rings) * uint64(cfg.RingCapacity)
	debloats := []time.Duration{-1} // NB: ringflow's off
	if cfg.Debloat > 0 {
		debloats = append(debloats, cfg.Debloat)
	}
	for _, m := range cfg.Modes {
		for _, d := range debloats {
			res, err := runMode(ctx, cfg, m, d)
			if err != nil {
				return r, fmt.Errorf("mode %s: %w", res.Name(), err)
			}
			switch {
			case m != None:
				r.Modes = append(r.Modes, res)
			case d > 0:
				r.NoCheckpointsDebloat = &res
			default:
				r.NoCheckpoints = &res
			}
		}
	}
	if cfg.ProfileDir != "" {
		if err := writeStallsFile(filepath.Join(cfg.ProfileDir, "stalls.txt"), r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// engineConfig is the ringflow configuration of mode, with state in dir.
func engineConfig(cfg Config, m Mode, debloat time.Duration, dir string) ringflow.Config {
	// NB: RaiseGOMAXPROCS: a worker per CPU and the spare P, the setting
	// docs/perf.md's figures were measured with.
	rc := ringflow.Config{Workers: cfg.Workers, Parallelism: cfg.Parallelism, MaxParallelism: 128, RaiseGOMAXPROCS: true,
		RingCapacity: cfg.RingCapacity, FrameBytes: cfg.FrameBytes, Debloat: debloat}
	if m == None {
		return rc
	}
	rc.Checkpoint = ringflow.CheckpointConfig{Interval: cfg.Interval, StateDir: dir,
		// A failed checkpoint is a measurement, not a reason to stop.
		TolerableFailures: 1 << 20}
	switch m {
	case Unaligned:
		rc.Checkpoint.Unaligned = true
	case Timeout:
		rc.Checkpoint.AlignmentTimeout = cfg.AlignmentTimeout
	}
	return rc
}

// runMode runs the pipeline in mode m for cfg.Duration, then (with
// checkpoints) restores it from the state it left.
func runMode(ctx context.Context, cfg Config, m Mode, debloat time.Duration) (res ModeResult, err error) {
	res.Mode, res.Debloat = m, debloat
	key := res.fileKey()
	dir, err := os.MkdirTemp(cfg.TempDir, "ringflow-compare-"+key+"-")
	if err != nil {
		return res, fmt.Errorf("state dir: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove state dir: %w", rerr)
		}
	}()
	rc := engineConfig(cfg, m, debloat, dir)
	out := &sink{slow: cfg.SlowSink}
	job := buildJob(cfg, rc, false, out)
	stopProfile, err := startProfile(cfg.ProfileDir, key)
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	start := time.Now()
	err = job.Run(runCtx)
	elapsed := time.Since(start)
	cancel()
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return res, fmt.Errorf("run: %w", err)
	}
	res = summarize(m, job.Checkpoints(), out.records.Load(), elapsed)
	res.Debloat = debloat
	res.Checkpoints = job.Checkpoints()
	if res.Slowest, err = slowestView(job, res.Checkpoints); err != nil {
		return res, err
	}
	if cfg.ProfileDir != "" {
		fr, err := TopFrames(profilePath(cfg.ProfileDir, key), topFrames)
		if err != nil {
			return res, fmt.Errorf("profile: %w", err)
		}
		res.Profile = &fr
	}
	if m != None {
		if err := restore(ctx, cfg, rc, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// restore runs the pipeline again on the state the mode's run left, with
// sources that each produce one record past their restored position and
// end, and times it.
func restore(ctx context.Context, cfg Config, rc ringflow.Config, res *ModeResult) error {
	out := &sink{slow: cfg.SlowSink}
	job := buildJob(cfg, rc, true, out)
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	start := time.Now()
	if err := job.Run(ctx); err != nil {
		return fmt.Errorf("restore run: %w", err)
	}
	res.RestoreRunMs = ms(time.Since(start))
	res.RestoredFrom = job.RestoredFrom()
	if first := out.first.Load(); first != 0 {
		res.RestoreMs = ms(time.Unix(0, first).Sub(start))
	}
	return nil
}

// fileKey names the run in file names: its mode, "-debloat" after it
// with debloating.
func (m ModeResult) fileKey() string {
	if m.Debloat > 0 {
		return string(m.Mode) + "-debloat"
	}
	return string(m.Mode)
}

// startProfile starts an fgprof profile into dir/<key>.fgprof.pprof, if
// dir is set; the returned function stops it.
func startProfile(dir string, key string) (func() error, error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(profilePath(dir, key))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	stop := fgprof.Start(f, fgprof.FormatPprof)
	return func() error {
		err := stopFgprof(stop)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("profile %s: %w", f.Name(), err)
		}
		return nil
	}, nil
}

// topFrames is how many of a profile's frames a mode's result lists.
const topFrames = 12

func profilePath(dir, key string) string { return filepath.Join(dir, key+".fgprof.pprof") }

// stopFgprof stops an fgprof profile and writes it out. fgprof divides
// by its achieved sampling rate rounded to whole hertz, and panics when
// that rounds to zero — fewer than one sample per two seconds, which a
// starved or stalled process can come to; that is an error here.
func stopFgprof(stop func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fgprof could not write the profile (too few samples for its run time?): %v", r)
		}
	}()
	return stop()
}

func writeStallsFile(path string, r Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("stall report: %w", err)
	}
	werr := WriteStalls(f, r)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("stall report %s: %w", path, werr)
	}
	return nil
}
