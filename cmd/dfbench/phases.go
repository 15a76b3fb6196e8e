package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// phaseEdges are the bounds of the phases, in time since the last
// checkpoint trigger: the barrier, the first copy-on-write burst, the
// write-out, and the quiet rest of an interval.
var phaseEdges = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond}

// phaseRow is one phase of `dfbench phases`: the samples generated that
// long after a trigger, and how many of them took longer than each bound.
type phaseRow struct {
	FromMs  float64   `json:"from_ms"`
	ToMs    float64   `json:"to_ms"` // 0: no upper bound
	Samples int       `json:"samples"`
	Over    []int     `json:"over"`     // per --over bound
	OverPct []float64 `json:"over_pct"` // the same, in percent of Samples
}

func runPhases(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dfbench phases", flag.ContinueOnError)
	samplesPath := fs.String("samples", "", "`file` of latency samples written by dfbench run --samples-out (required)")
	runPath := fs.String("run", "", "`file` holding the same run's dfbench run --json output, for its checkpoints' trigger times")
	every := fs.Duration("every", 0, "without --run, or for a run without checkpoints: cut the samples into phases of this period from the first sample (to compare with a run with checkpoints)")
	overFlag := fs.String("over", "30us,150us", "latency bounds to count samples over, comma-separated")
	asJSON := fs.Bool("json", false, "print a JSON array of phases instead of a table")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		fmt.Fprintf(stderr, "dfbench phases: "+format+"\n", args...)
		return errUsage
	}
	var over []time.Duration
	for _, s := range strings.Split(*overFlag, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return bad("--over %q: want positive durations such as 30us,150us", *overFlag)
		}
		over = append(over, d)
	}
	switch {
	case *samplesPath == "":
		return bad("--samples is required")
	case *every < 0 || *every > 0 && *every < time.Millisecond:
		// NB: the grid has one point per period of the run; a nanosecond
		// period would have billions.
		return bad("--every %v: must be at least 1ms", *every)
	case *runPath == "" && *every == 0:
		return bad("give --run (a run with checkpoints) or --every")
	}
	samples, err := readSamples(*samplesPath)
	if err != nil {
		return err
	}
	if len(samples) == 0 {
		return fmt.Errorf("%s holds no samples", *samplesPath)
	}
	var triggers []int64
	if *runPath != "" {
		if triggers, err = readTriggers(*runPath); err != nil {
			return err
		}
	}
	if len(triggers) == 0 {
		if *every == 0 {
			return fmt.Errorf("%s has no checkpoint in its history: give --every to cut it on a grid", *runPath)
		}
		for t := samples[0].gen; t <= samples[len(samples)-1].gen; t += int64(*every) {
			triggers = append(triggers, t)
		}
	}
	rows := phases(samples, triggers, over)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rows)
	}
	tw := newTable(stdout)
	fmt.Fprint(tw, "since trigger\tsamples\t")
	for _, d := range over {
		fmt.Fprintf(tw, "over %v\t%%\t", d)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		to := "∞"
		if r.ToMs > 0 {
			to = strconv.FormatFloat(r.ToMs, 'f', -1, 64)
		}
		fmt.Fprintf(tw, "%s–%s ms\t%d\t", strconv.FormatFloat(r.FromMs, 'f', -1, 64), to, r.Samples)
		for i := range over {
			fmt.Fprintf(tw, "%d\t%.2f\t", r.Over[i], r.OverPct[i])
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

type latencySample struct{ gen, lat int64 }

// readSamples reads a --samples-out file.
func readSamples(path string) ([]latencySample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() != samplesHeader {
		return nil, fmt.Errorf("%s: first line is not %q: not a `dfbench run --samples-out` file", path, samplesHeader)
	}
	var out []latencySample
	for line := 2; sc.Scan(); line++ {
		gen, lat, ok := strings.Cut(sc.Text(), ",")
		g, err1 := strconv.ParseInt(gen, 10, 64)
		l, err2 := strconv.ParseInt(lat, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: %q is not two integers", path, line, sc.Text())
		}
		out = append(out, latencySample{g, l})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	slices.SortFunc(out, func(a, b latencySample) int { return cmp.Compare(a.gen, b.gen) })
	return out, nil
}

// readTriggers returns the trigger times (Unix ns) in a `dfbench run
// --json` output, in order.
func readTriggers(path string) ([]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var run struct {
		Checkpoints *struct {
			History []struct {
				TriggerUnixUs int64 `json:"trigger_unix_us"`
			} `json:"history"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("%s: not a `dfbench run --json` output: %w", path, err)
	}
	if run.Checkpoints == nil {
		return nil, nil
	}
	var ts []int64
	for _, c := range run.Checkpoints.History {
		ts = append(ts, c.TriggerUnixUs*1e3)
	}
	slices.Sort(ts)
	return ts, nil
}

// phases counts the samples by time since the last trigger before their
// generation; samples generated before the first trigger are left out.
func phases(samples []latencySample, triggers []int64, over []time.Duration) []phaseRow {
	rows := make([]phaseRow, len(phaseEdges))
	for i := range rows {
		rows[i] = phaseRow{FromMs: ms(phaseEdges[i]), Over: make([]int, len(over)), OverPct: make([]float64, len(over))}
		if i+1 < len(phaseEdges) {
			rows[i].ToMs = ms(phaseEdges[i+1])
		}
	}
	for _, s := range samples {
		t, found := slices.BinarySearch(triggers, s.gen)
		if !found {
			t-- // the last trigger before the sample
		}
		if t < 0 {
			continue
		}
		since := time.Duration(s.gen - triggers[t])
		i, found := slices.BinarySearch(phaseEdges, since)
		if !found {
			i--
		}
		r := &rows[i]
		r.Samples++
		for j, d := range over {
			if time.Duration(s.lat) > d {
				r.Over[j]++
			}
		}
	}
	for i := range rows {
		for j := range over {
			if rows[i].Samples > 0 {
				rows[i].OverPct[j] = 100 * float64(rows[i].Over[j]) / float64(rows[i].Samples)
			}
		}
	}
	return rows
}
