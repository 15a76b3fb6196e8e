package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ringflow/ringflow/bench/pipelines"
	"github.com/ringflow/ringflow/bench/soak"
)

// The soak's judgements, with their reasons.
const (
	// soakDrainTimeout is how long the parent waits, after it closed the
	// child's stdin, for the job to end its sources, take its final
	// checkpoint and exit: far more than a checkpoint takes, so that only
	// a job that does not finish runs into it.
	soakDrainTimeout = 2 * time.Minute
	// soakMinFreeBytes is the free space, on the state or the sink dir's
	// filesystem, under which the soak ends early: a full disk fails
	// checkpoints, which is not what a soak measures.
	soakMinFreeBytes = 1 << 30
	// soakMinSinkKeep is the fewest part files per subtask --sink-keep may
	// keep: a restore commits again the part files of the checkpoint it
	// restores, which are among each subtask's newest 3 (the checkpoints
	// retained by default), and the sink numbers its next part file after
	// its newest; one more for the checkpoint being committed.
	soakMinSinkKeep = 4
	// soakProgressEvery is how often the soak writes a line of progress on
	// stderr.
	soakProgressEvery = time.Minute
)

// soakFlags are the parsed flags of `dfbench soak`.
type soakFlags struct {
	job       soakJob
	duration  time.Duration
	warmup    time.Duration
	failEvery time.Duration
	killEvery time.Duration
	csv       string
	json      bool
	plot      string        // --plot: draw the samples to this .svg or .png file
	replot    string        // --replot: draw --plot from this CSV instead of soaking
	plotBound time.Duration // --plot-duration-bound
	verify    bool
	sinkKeep  int
	bounds    soak.Bounds
	child     string // --child: run the job with this spec, as the child
}

// soakJob is what a child runs; the parent passes it as JSON (--child).
type soakJob struct {
	Pipeline           string        `json:"pipeline"`
	Keys               uint64        `json:"keys"`
	Rate               float64       `json:"rate"`
	Parallelism        int           `json:"parallelism"`
	Workers            int           `json:"workers"`
	CheckpointInterval time.Duration `json:"checkpoint_interval"`
	StateDir           string        `json:"state_dir"`
	SinkDir            string        `json:"sink_dir"`
	SampleEvery        uint64        `json:"sample_every"`
	Interval           time.Duration `json:"interval"` // between reports
	// StallBound is ringflow.Config.StallBound.
	StallBound time.Duration `json:"stall_bound,omitempty"`
}

// config is the pipeline the job runs: until its Control stops it, with
// a restart for every failure (the parent tells injected failures from
// others by counting them).
func (j soakJob) config() pipelines.Config {
	c := pipelines.Config{Pipeline: j.Pipeline, Records: pipelines.UntilStopped, Keys: j.Keys, Rate: j.Rate,
		Parallelism: j.Parallelism, Workers: j.Workers, SampleEvery: j.SampleEvery, SinkDir: j.SinkDir,
		StallBound: j.StallBound}
	c.Checkpoint.Interval, c.Checkpoint.StateDir = j.CheckpointInterval, j.StateDir
	c.Restart.Attempts = 1 << 30
	return c
}

func runSoak(args []string, stdout, stderr io.Writer) error {
	f, err := parseSoakFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.child != "" {
		return runSoakChild(f.child, os.Stdin, stdout)
	}
	if f.replot != "" {
		return replot(f)
	}
	cleanup, err := soakDirs(&f.job)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := &soaker{f: f, stderr: stderr}
	if f.csv != "" {
		out, err := os.Create(f.csv)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		defer out.Close()
		if s.csv, err = soak.NewCSV(out); err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	if f.plot != "" {
		// NB: a plot that cannot be written is found now, not after the soak.
		if err := os.WriteFile(f.plot, nil, 0o644); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if f.verify {
		if s.output, err = pipelines.NewKeyedCountOutput(f.job.config()); err != nil {
			return err
		}
	}
	runErr := s.run(ctx)
	if s.child != nil {
		s.count(s.child)
	}
	var check *soakCheck
	if f.verify && s.end != nil {
		check = s.verify()
	}
	summary := soak.Summarize(s.samples, s.checkpoints, f.warmup)
	summary.Stalls = soak.SummarizeStalls(s.stalls)
	// NB: the last child's counts after its last sample, while it drained,
	// count too.
	summary.Restarts, summary.Failures, summary.Kills = s.restarts, s.failures, s.kills
	violations := summary.Violations(f.bounds)
	if f.json {
		err = json.NewEncoder(stdout).Encode(soakJSONOf(f, s, summary, check, violations))
	} else {
		err = printSoak(stdout, f, s, summary, check)
	}
	if f.plot != "" {
		err = errors.Join(err, writePlot(f.plot, s.samples, "dfbench soak: "+soakTitle(f), plotOptions(f)))
	}
	if check != nil && check.err != nil {
		runErr = errors.Join(runErr, check.err)
	}
	if len(violations) > 0 {
		runErr = errors.Join(runErr, fmt.Errorf("bounds broken: %s", strings.Join(violations, "; ")))
	}
	return errors.Join(runErr, err)
}

func parseSoakFlags(args []string, stderr io.Writer) (soakFlags, error) {
	fs := flag.NewFlagSet("dfbench soak", flag.ContinueOnError)
	var f soakFlags
	j := &f.job
	fs.StringVar(&j.Pipeline, "pipeline", "keyed-count", "pipeline: "+strings.Join(pipelines.Names, ", ")+" (only keyed-count's output is checked)")
	fs.Uint64Var(&j.Keys, "keys", pipelines.DefaultKeys, "distinct keys")
	fs.Float64Var(&j.Rate, "rate", 0, "source rate in records per second, in all (0: unpaced)")
	fs.IntVar(&j.Parallelism, "parallelism", min(runtime.GOMAXPROCS(0), pipelines.MaxParallelism), "instances of every operator")
	fs.IntVar(&j.Workers, "workers", 0, "ringflow worker threads (0: all CPUs)")
	fs.DurationVar(&j.CheckpointInterval, "checkpoint-interval", time.Second, "checkpoint interval")
	fs.StringVar(&j.StateDir, "state-dir", "", "checkpoint store directory, empty or new (default: a temporary one, removed at exit)")
	fs.StringVar(&j.SinkDir, "sink-dir", "", "the transactional file sink's directory, empty or new (default: a temporary one, removed at exit)")
	fs.Uint64Var(&j.SampleEvery, "sample-every", pipelines.DefaultSampleEvery, "make about one record in N (a power of two) a latency sample")
	fs.DurationVar(&j.Interval, "interval", time.Second, "take a sample every D")
	fs.DurationVar(&j.StallBound, "stall-bound", 0, stallBoundUsage)
	fs.DurationVar(&f.duration, "duration", time.Minute, "run this long, then end the sources and let the job commit all its output")
	fs.DurationVar(&f.warmup, "warmup", 0, "leave the first D out of the trends and measure RSS growth against it "+
		"(default: 2m or a fifth of --duration, or with --replot of the CSV's samples, whichever is shorter)")
	fs.DurationVar(&f.failEvery, "fail-every", 0, "fail a task every D; the job restores its latest checkpoint in place (0: never)")
	fs.DurationVar(&f.killEvery, "kill-every", 0, "SIGKILL the job's process every D and start it again on its state dir, from its latest checkpoint (0: never)")
	fs.StringVar(&f.csv, "csv", "", "write the samples to this file as CSV (columns: go doc ./bench/soak)")
	fs.BoolVar(&f.json, "json", false, "print the summary as one JSON object")
	fs.StringVar(&f.plot, "plot", "", "at the end, draw the samples to this file: RSS, Go heap live and state mapped outside the heap in MB, the latest checkpoint's duration in ms, "+
		"a line at each kill, and the marks of --warmup, --max-rss-growth and --plot-duration-bound; "+
		"FILE.svg, or FILE.png converted from the SVG by rsvg-convert, which must be on PATH")
	fs.StringVar(&f.replot, "replot", "", "run nothing: draw --plot from this --csv file of an earlier soak (with --warmup, --max-rss-growth and --plot-duration-bound for the marks)")
	fs.DurationVar(&f.plotBound, "plot-duration-bound", 0, "with --plot, a dashed line at this checkpoint duration (0: none)")
	fs.BoolVar(&f.verify, "verify", true, "at the end, check that the sink dir holds each key's counts 1..n exactly once, n its generated records (keyed-count only)")
	fs.IntVar(&f.sinkKeep, "sink-keep", 0, fmt.Sprintf("check committed output as it appears and delete all but each sink subtask's newest N part files: bounded disk for long runs (0: keep all, check at the end; else at least %d)", soakMinSinkKeep))
	fs.Float64Var(&f.bounds.MaxRSSGrowthPct, "max-rss-growth", -1, "fail if the largest RSS after the warm-up exceeds the largest during it by more than P percent (negative: no bound)")
	fs.IntVar(&f.bounds.MaxFailedCheckpoints, "max-failed-checkpoints", -1, "fail if more than N checkpoints fail (negative: no bound)")
	fs.StringVar(&f.child, "child", "", "internal: run the job this JSON describes and report on stdout, as the child of a soak")
	if err := parseFlags(fs, args, stderr); err != nil {
		return f, err
	}
	if f.child != "" {
		return f, nil
	}
	if f.warmup == 0 && f.replot == "" {
		f.warmup = defaultWarmup(f.duration)
	}
	err := checkPlotFlags(&f)
	if err == nil && f.replot == "" {
		err = checkSoakFlags(&f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dfbench soak: %v\n", err)
		return f, errUsage
	}
	return f, nil
}

// defaultWarmup is the warm-up of a soak that lasts d, without --warmup.
func defaultWarmup(d time.Duration) time.Duration { return min(2*time.Minute, d/5) }

// checkSoakFlags reports flags that make no sense, in the flags' words.
func checkSoakFlags(f *soakFlags) error {
	j := &f.job
	switch {
	case f.duration <= 0:
		return fmt.Errorf("--duration %v: must be positive", f.duration)
	case f.warmup < 0 || f.warmup >= f.duration:
		return fmt.Errorf("--warmup %v: must be at least 0 and shorter than --duration %v", f.warmup, f.duration)
	case j.CheckpointInterval <= 0:
		return fmt.Errorf("--checkpoint-interval %v: a soak checkpoints; must be positive", j.CheckpointInterval)
	case j.Interval <= 0:
		return fmt.Errorf("--interval %v: must be positive", j.Interval)
	case f.failEvery < 0 || f.killEvery < 0:
		return fmt.Errorf("--fail-every %v, --kill-every %v: must not be negative", f.failEvery, f.killEvery)
	case f.verify && j.Pipeline != "keyed-count":
		return fmt.Errorf("--verify: only keyed-count's output can be checked; with --pipeline %s, set --verify=false", j.Pipeline)
	case f.sinkKeep != 0 && (f.sinkKeep < soakMinSinkKeep || !f.verify):
		return fmt.Errorf("--sink-keep %d: must be at least %d, with --verify", f.sinkKeep, soakMinSinkKeep)
	case j.Parallelism < 1 || j.Keys < 1:
		return fmt.Errorf("--parallelism %d, --keys %d: must be at least 1", j.Parallelism, j.Keys)
	case j.SampleEvery < 1 || j.SampleEvery&(j.SampleEvery-1) != 0 || j.SampleEvery > pipelines.MaxSampleEvery:
		return fmt.Errorf("--sample-every %d: must be a power of two from 1 to %d", j.SampleEvery, uint64(pipelines.MaxSampleEvery))
	}
	for _, d := range []struct{ flag, dir string }{{"--state-dir", j.StateDir}, {"--sink-dir", j.SinkDir}} {
		if entries, err := os.ReadDir(d.dir); d.dir != "" && len(entries) > 0 {
			return fmt.Errorf("%s %s: not empty; a soak starts afresh, and checks output against what it generated", d.flag, d.dir)
		} else if d.dir != "" && err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", d.flag, err)
		}
	}
	return j.config().Validate()
}

// soakDirs makes a temporary state or sink dir for the soak that was not
// given one; cleanup removes what it made.
func soakDirs(j *soakJob) (cleanup func(), err error) {
	var made []string
	cleanup = func() {
		for _, d := range made {
			os.RemoveAll(d)
		}
	}
	for _, d := range []*string{&j.StateDir, &j.SinkDir} {
		if *d != "" {
			continue
		}
		if *d, err = os.MkdirTemp("", "dfbench-soak-"); err != nil {
			cleanup()
			return nil, err
		}
		made = append(made, *d)
	}
	return cleanup, nil
}

// soakCommand returns the command that runs dfbench with args: the child
// of a soak. Tests make it run their own binary.
var soakCommand = func(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

// soaker is the parent of a soak: it runs children one after another on
// the same dirs, tells them when to fail, kills them, and records what
// they report (see the package doc of bench/soak).
type soaker struct {
	f      soakFlags
	stderr io.Writer
	csv    *soak.CSV
	start  time.Time
	child  *soakChild // the running child
	// Totals of the children that ended: their restarts and failures.
	restarts, failures int
	children, kills    int
	samples            []soak.Sample
	checkpoints        []soak.Checkpoint
	stalls             []soak.Stall
	completed, failed  int
	last               soak.Checkpoint // the latest completed checkpoint
	end                *soak.End
	endedEarly         string // why the soak ends before --duration, if it does
	output             *pipelines.KeyedCountOutput
	folded             map[string]bool // part files read into output and still on disk
	progressAt         time.Duration
}

// soakChild is one child process.
type soakChild struct {
	n       int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	reports chan soak.Report // closed when its stdout ends
	readErr error            // why reading its stdout ended, if not at its end; set before reports closes
	last    soak.Report
	counted bool // its restarts and failures are in the soaker's
}

// run runs the soak until --duration, an interrupt or a reason to end
// early, and then lets the job finish.
func (s *soaker) run(ctx context.Context) error {
	s.start = time.Now()
	s.progressAt = soakProgressEvery
	if err := s.startChild(); err != nil {
		return err
	}
	end := time.NewTimer(s.f.duration)
	defer end.Stop()
	fail, stopFail := every(s.f.failEvery)
	defer stopFail()
	kill, stopKill := every(s.f.killEvery)
	defer stopKill()
	folding := s.startFolding()
	defer folding.end()
	for s.endedEarly == "" {
		select {
		case <-folding.failed:
			s.child.cmd.Process.Kill()
			return folding.end()
		case rep, ok := <-s.child.reports:
			if !ok {
				return s.child.exited("before the end")
			}
			if err := s.record(rep); err != nil {
				s.child.cmd.Process.Kill()
				return err
			}
		case <-fail:
			// NB: a child being killed or just started may miss it; only
			// failures the child injected count.
			io.WriteString(s.child.stdin, "fail\n")
		case <-kill:
			if err := s.kill(); err != nil {
				return err
			}
			if err := s.startChild(); err != nil {
				return err
			}
		case <-end.C:
			return errors.Join(folding.end(), s.finish())
		case <-ctx.Done():
			s.endedEarly = "interrupted"
		}
	}
	return errors.Join(folding.end(), s.finish(), fmt.Errorf("ended early, after %v: %s", time.Since(s.start).Round(time.Second), s.endedEarly))
}

// folding reads committed output into the check as it appears, beside
// the loop that samples and injects failures: a slow read must delay
// neither.
type folding struct {
	stop   chan struct{}
	failed chan struct{} // closed when a fold failed
	done   chan struct{}
	err    error
}

// foldPolls is how many times a checkpoint interval (at most once a
// millisecond) the fold looks for newly committed part files, so that it
// reads each soon after the commit that made it, before the next
// checkpoint starts. A read at the sampling clock's ticks, which drift
// against the checkpoints', lands for minutes at a time on the next
// checkpoint's write-out, and at millions of lines a second it takes
// most of a core while it lasts: at half load that set the checkpoints'
// p99 (see docs/perf.md, "Long runs").
const foldPolls = 20

// startFolding starts folding with --sink-keep, foldPolls times a
// checkpoint interval; without it, the output is read at the end and a
// folding that never fails is returned.
func (s *soaker) startFolding() *folding {
	f := &folding{stop: make(chan struct{}), failed: make(chan struct{}), done: make(chan struct{})}
	if s.f.sinkKeep == 0 || s.output == nil {
		close(f.done)
		return f
	}
	go func() {
		defer close(f.done)
		t := time.NewTicker(max(s.f.job.CheckpointInterval/foldPolls, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				if f.err = s.fold(false); f.err != nil {
					close(f.failed)
					return
				}
			}
		}
	}()
	return f
}

// end stops the folding, waits for it, and returns the error of the fold
// that failed, if one did. It may be called more than once.
func (f *folding) end() error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	return f.err
}

// every returns a channel that ticks every d, or nil if d is 0.
func every(d time.Duration) (<-chan time.Time, func()) {
	if d == 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (s *soaker) startChild() error {
	spec, err := json.Marshal(s.f.job)
	if err != nil {
		return err
	}
	cmd, err := soakCommand([]string{"soak", "--child", string(spec)})
	if err != nil {
		return err
	}
	cmd.Stderr = s.stderr
	// NB: in a process group of its own, the child does not get the
	// terminal's interrupt: the parent ends it with the job's output
	// committed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	s.children++
	c := &soakChild{n: s.children, cmd: cmd, stdin: stdin, reports: make(chan soak.Report, 16)}
	go c.read(stdout)
	s.child = c
	return nil
}

// read decodes the child's reports until its stdout ends.
func (c *soakChild) read(stdout io.Reader) {
	defer close(c.reports)
	dec := json.NewDecoder(stdout)
	for {
		var rep soak.Report
		if err := dec.Decode(&rep); err != nil {
			if !errors.Is(err, io.EOF) {
				c.readErr = fmt.Errorf("child %d's report: %w", c.n, err)
			}
			return
		}
		c.reports <- rep
	}
}

// exited waits for a child whose reports ended (when) and says why.
func (c *soakChild) exited(when string) error {
	err := c.cmd.Wait()
	if c.readErr != nil || err != nil {
		return errors.Join(c.readErr, fmt.Errorf("child %d exited %s: %v (its stderr is above)", c.n, when, err))
	}
	return fmt.Errorf("child %d exited %s without a word", c.n, when)
}

// kill kills the running child, records the reports it wrote before, and
// adds its counts to the totals.
func (s *soaker) kill() error {
	c := s.child
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill child %d: %w", c.n, err)
	}
	// NB: the reports it wrote before it died take no sample: its memory
	// is gone.
	for rep := range c.reports {
		s.recordCheckpoints(rep)
	}
	if err := c.cmd.Wait(); err == nil {
		return fmt.Errorf("child %d exited 0 before its kill, with its job unfinished", c.n)
	}
	s.kills++
	s.count(c)
	return nil
}

// finish closes the child's stdin, which ends its sources, and waits for
// its last report and its exit.
func (s *soaker) finish() error {
	c := s.child
	c.stdin.Close()
	timeout := time.NewTimer(soakDrainTimeout)
	defer timeout.Stop()
	for {
		select {
		case rep, ok := <-c.reports:
			if !ok {
				if err := c.cmd.Wait(); err != nil || c.readErr != nil || s.end == nil {
					return c.exited("at the end")
				}
				return nil
			}
			s.recordCheckpoints(rep)
		case <-timeout.C:
			// NB: SIGQUIT makes a Go program write every goroutine's
			// stack on stderr, where it tells why the job did not finish.
			c.cmd.Process.Signal(syscall.SIGQUIT)
			for range c.reports {
			}
			c.cmd.Wait()
			return fmt.Errorf("child %d did not finish its job within %v of the end (its goroutines are above)", c.n, soakDrainTimeout)
		}
	}
}

// record adds a child's report: its checkpoints and a sample.
func (s *soaker) record(rep soak.Report) error {
	c := s.child
	at := time.Since(s.start)
	s.recordCheckpoints(rep)
	if rep.Restarts > rep.Failures {
		s.endedEarly = fmt.Sprintf("child %d's job restarted %d times for %d injected failures: a task failed on its own (its stderr is above)",
			c.n, rep.Restarts, rep.Failures)
	}
	rss, err := soak.ReadRSS(c.cmd.Process.Pid)
	if err != nil {
		return nil // NB: the child died after it wrote the report; it has no memory left to measure
	}
	sample, err := s.sample(rep, at, rss)
	if err != nil {
		return err
	}
	s.samples = append(s.samples, sample)
	if s.csv != nil {
		if err := s.csv.Write(&sample); err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	s.progress(&sample)
	return s.checkFree()
}

// recordCheckpoints adds a child's report without a sample: its
// checkpoints, its counts, and the End of its job. The reports after the
// end of the soak, while the job drains, take no sample: the soak's final
// values are those of the job at work.
func (s *soaker) recordCheckpoints(rep soak.Report) {
	c := s.child
	at := time.Since(s.start)
	for _, ck := range rep.Checkpoints {
		ck.Child, ck.At = c.n, at
		s.checkpoints = append(s.checkpoints, ck)
		switch {
		case ck.Completed():
			s.completed++
			s.last = ck
		case ck.Failed():
			s.failed++
		}
	}
	for _, st := range rep.Stalls {
		st.Child, st.At = c.n, at
		s.stalls = append(s.stalls, st)
	}
	c.last = rep
	if rep.End != nil {
		s.end = rep.End
	}
}

// count adds a child's restarts and failures to the soak's, once, when it
// has ended.
func (s *soaker) count(c *soakChild) {
	if !c.counted {
		s.restarts += c.last.Restarts
		s.failures += c.last.Failures
		c.counted = true
	}
}

func (s *soaker) sample(rep soak.Report, at time.Duration, rss soak.RSS) (soak.Sample, error) {
	state, err := soak.Usage(s.f.job.StateDir)
	if err != nil {
		return soak.Sample{}, fmt.Errorf("state dir: %w", err)
	}
	sink, err := soak.Usage(s.f.job.SinkDir)
	if err != nil {
		return soak.Sample{}, fmt.Errorf("sink dir: %w", err)
	}
	return soak.Sample{At: at, Child: s.child.n, RSS: rss, Runtime: rep.Runtime, State: state, Sink: sink,
		CheckpointsCompleted: s.completed, CheckpointsFailed: s.failed, Last: s.last,
		RecordsPerSec: rep.RecordsPerSec, LatencyP99: rep.LatencyP99, LatencySamples: rep.LatencySamples,
		Restarts: s.restarts + rep.Restarts, Failures: s.failures + rep.Failures, Kills: s.kills}, nil
}

// checkFree ends the soak early when a dir's filesystem is nearly full.
func (s *soaker) checkFree() error {
	for _, dir := range []string{s.f.job.StateDir, s.f.job.SinkDir} {
		free, err := soak.FreeBytes(dir)
		if err != nil {
			return err
		}
		if free < soakMinFreeBytes {
			s.endedEarly = fmt.Sprintf("%.0f MB left on the filesystem of %s", float64(free)/1e6, dir)
		}
	}
	return nil
}

// progress writes a line on stderr every soakProgressEvery.
func (s *soaker) progress(x *soak.Sample) {
	if x.At < s.progressAt {
		return
	}
	s.progressAt += soakProgressEvery
	fmt.Fprintf(s.stderr, "soak %v: child %d, rss %.1f MB, heap live %.1f MB, state %.1f MB in %d files, %d checkpoints (%d failed), %.2fM records/s, %d failures, %d kills\n",
		x.At.Round(time.Second), x.Child, float64(x.RSS.Total)/1e6, float64(x.Runtime.HeapLiveBytes)/1e6,
		float64(x.State.Bytes)/1e6, x.State.Files, x.CheckpointsCompleted, x.CheckpointsFailed, x.RecordsPerSec/1e6,
		x.Failures, x.Kills)
}
