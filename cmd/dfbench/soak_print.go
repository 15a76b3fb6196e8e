package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/pipelines"
	"github.com/ringflow/ringflow/bench/soak"
)

// soakCheck is the outcome of the exactly-once check of a soak's output.
type soakCheck struct {
	pipelines.KeyedCountCheck
	err error
}

// verify checks the sink dir's committed output against the records the
// sources generated until the job finished.
func (s *soaker) verify() *soakCheck {
	if s.end == nil {
		return &soakCheck{err: errors.New("exactly once: the job did not finish, so no output is complete")}
	}
	if err := s.fold(true); err != nil {
		return &soakCheck{err: fmt.Errorf("exactly once: %w", err)}
	}
	res, err := s.output.Check(s.f.job.config(), s.end.SourceEnds)
	return &soakCheck{res, err}
}

// sinkPart is one committed part file of the sink dir.
type sinkPart struct {
	path string
	seq  uint64
}

// fold reads committed part files into the check. With --sink-keep, it
// reads them as they appear and deletes all but each subtask's newest
// --sink-keep; final reads every one not read yet, and deletes none.
func (s *soaker) fold(final bool) error {
	if s.output == nil || (s.f.sinkKeep == 0 && !final) {
		return nil
	}
	files, err := pipelines.PartFiles(s.f.job.SinkDir)
	if err != nil {
		return err
	}
	bySubtask := map[int][]sinkPart{}
	for _, path := range files {
		sub, seq, ok := ringflow.FileSinkPart(filepath.Base(path))
		if !ok {
			return fmt.Errorf("sink dir: %s is not a part file", path)
		}
		bySubtask[sub] = append(bySubtask[sub], sinkPart{path, seq})
	}
	if s.folded == nil {
		s.folded = map[string]bool{}
	}
	for _, parts := range bySubtask {
		slices.SortFunc(parts, func(a, b sinkPart) int { return cmp.Compare(a.seq, b.seq) })
		for i, p := range parts {
			if !s.folded[p.path] {
				if err := s.output.AddFile(p.path); err != nil {
					return err
				}
				s.folded[p.path] = true
			}
			if !final && i < len(parts)-s.f.sinkKeep {
				if err := os.Remove(p.path); err != nil {
					return fmt.Errorf("--sink-keep: %w", err)
				}
				delete(s.folded, p.path)
			}
		}
	}
	return nil
}

// soakTitle says what the soak ran.
func soakTitle(f soakFlags) string {
	j := f.job
	pace := "unpaced"
	if j.Rate > 0 {
		pace = fmt.Sprintf("rate %.0f/s", j.Rate)
	}
	t := fmt.Sprintf("%s, %d keys, %s, parallelism %d, %v with a warm-up of %v, checkpoints every %v",
		j.Pipeline, j.Keys, pace, j.Parallelism, f.duration, f.warmup, j.CheckpointInterval)
	if f.failEvery > 0 {
		t += fmt.Sprintf(", a failure every %v", f.failEvery)
	}
	if f.killEvery > 0 {
		t += fmt.Sprintf(", a kill every %v", f.killEvery)
	}
	return t
}

// printSoak prints the summary as tables and sentences.
func printSoak(w io.Writer, f soakFlags, s *soaker, sum soak.Summary, check *soakCheck) error {
	fmt.Fprintf(w, "dfbench soak: %s\n\n", soakTitle(f))
	tw := newTable(w)
	fmt.Fprintln(tw, "series\twarm-up end\tfinal\tmax\ttrend/min\t")
	for _, x := range sum.Series {
		name, scale := x.Name, 1.0
		if n, ok := strings.CutSuffix(name, "_bytes"); ok {
			name, scale = n+"_MB", 1e-6
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, soakNum(x.WarmupEnd*scale), soakNum(x.Final*scale),
			soakNum(x.Max*scale), soakSigned(x.TrendPerMin*scale))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ck := sum.Checkpoints
	fmt.Fprintf(w, "\n%d samples in %.0f s; checkpoints: %d completed, %d failed, %d aborted\n",
		sum.Samples, sum.Seconds, ck.Completed, ck.Failed, ck.Aborted)
	if ck.Completed > 0 {
		fmt.Fprintf(w, "  duration   p50 %.1f, p99 %.1f, max %.1f ms (checkpoint %d, child %d, at %v)\n",
			ms(ck.Duration.P50), ms(ck.Duration.P99), ms(ck.Duration.Max), ck.Longest.ID, ck.Longest.Child, ck.Longest.At.Round(time.Second))
		cause := ""
		if ck.Stalled.SyncCause != "" {
			cause = ", " + ck.Stalled.SyncCause
		}
		fmt.Fprintf(w, "  sync max   p50 %.1f, p99 %.1f, max %.1f µs: each checkpoint's longest synchronous part (checkpoint %d, child %d, at %v%s)\n",
			us(ck.SyncMax.P50), us(ck.SyncMax.P99), us(ck.SyncMax.Max), ck.Stalled.ID, ck.Stalled.Child, ck.Stalled.At.Round(time.Second), cause)
		fmt.Fprintf(w, "    on cpu   p50 %.1f, p99 %.1f, max %.1f µs: of those parts, the time their threads ran (the rest they were preempted)\n",
			us(ck.SyncCPUMax.P50), us(ck.SyncCPUMax.P99), us(ck.SyncCPUMax.Max))
		fmt.Fprintf(w, "  barriers   p50 %.1f, p99 %.1f, max %.1f ms: trigger to the last subtask's synchronous part\n",
			ms(ck.Barriers.P50), ms(ck.Barriers.P99), ms(ck.Barriers.Max))
		fmt.Fprintf(w, "  written    p50 %.1f, p99 %.1f, max %.1f ms: trigger to every part written\n",
			ms(ck.Written.P50), ms(ck.Written.P99), ms(ck.Written.Max))
		fmt.Fprintf(w, "  commit     p50 %.1f, p99 %.1f, max %.1f ms: written to durable\n",
			ms(ck.Commit.P50), ms(ck.Commit.P99), ms(ck.Commit.Max))
		fmt.Fprintf(w, "  bytes      at most %.2f MB by one checkpoint\n", float64(ck.BytesMax)/1e6)
		if len(ck.Tail) > 0 {
			fmt.Fprintf(w, "  at or over p99 (ms: duration = barriers + writing + commit):\n")
			for _, c := range ck.Tail {
				fmt.Fprintf(w, "    checkpoint %d (child %d, at %v): %.1f = %.1f + %.1f + %.1f; written last: %s\n", c.ID, c.Child,
					c.At.Round(time.Second), ms(c.Duration), ms(c.Barriers), ms(c.Written-c.Barriers), ms(c.Commit()), c.WrittenLast)
			}
		}
	}
	printSoakStalls(w, "stalls (steps over the stall bound)", sum.Stalls.ByCause, sum.Stalls.Longest)
	printSoakStalls(w, "synchronous parts over the stall bound", sum.Stalls.PartsByCause, sum.Stalls.LongestParts)
	fmt.Fprintf(w, "failures: %d injected, %d restarts; %d kills, %d children\n", sum.Failures, sum.Restarts, sum.Kills, s.children)
	fmt.Fprintf(w, "RSS growth after the warm-up: %.1f%% (largest after it against largest during it)\n", sum.RSSGrowth*100)
	switch {
	case check == nil:
		fmt.Fprintln(w, "exactly once: not checked")
	case check.err != nil:
		fmt.Fprintf(w, "exactly once: FAILED: %v\n", check.err)
	default:
		fmt.Fprintf(w, "exactly once: %d lines in %d part files for %d records of %d keys: each key's counts 1..n once\n",
			check.Lines, check.Files, check.Records, check.Keys)
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// soakNum formats a value of the summary with digits that matter.
func soakNum(v float64) string {
	switch a := max(v, -v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case a >= 100 || a == 0:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func soakSigned(v float64) string {
	if v >= 0 {
		return "+" + soakNum(v)
	}
	return soakNum(v)
}

// soakJSON is the --json summary.
type soakJSON struct {
	Pipeline     string                    `json:"pipeline"`
	Keys         uint64                    `json:"keys"`
	Rate         float64                   `json:"rate"` // 0: unpaced
	Parallelism  int                       `json:"parallelism"`
	Seconds      float64                   `json:"seconds"`
	WarmupS      float64                   `json:"warmup_s"`
	Samples      int                       `json:"samples"`
	Series       map[string]soakSeriesJSON `json:"series"` // by CSV column
	Checkpoints  soakCkJSON                `json:"checkpoints"`
	Stalls       soakStallsJSON            `json:"stalls"`
	RSSGrowthPct float64                   `json:"rss_growth_pct"`
	Failures     int                       `json:"failures"` // injected
	Restarts     int                       `json:"restarts"`
	Kills        int                       `json:"kills"`
	Children     int                       `json:"children"`
	Verify       *soakVerifyJSON           `json:"verify"` // null when not checked
	Violations   []string                  `json:"violations"`
}

type soakSeriesJSON struct {
	WarmupEnd   float64 `json:"warmup_end"`
	Final       float64 `json:"final"`
	Max         float64 `json:"max"`
	TrendPerMin float64 `json:"trend_per_min"`
}

type soakCkJSON struct {
	Completed  int         `json:"completed"`
	Failed     int         `json:"failed"`
	Aborted    int         `json:"aborted"`
	DurationMs ckQuantiles `json:"duration_ms"`
	SyncMaxUs  ckQuantiles `json:"sync_max_us"` // of each checkpoint's longest synchronous part
	// of each checkpoint's longest time on CPU in a synchronous part
	SyncCPUMaxUs ckQuantiles `json:"sync_cpu_max_us"`
	// Where the durations went (soak.Checkpoint): trigger to the last
	// synchronous part, trigger to every part written, written to durable.
	BarriersMs ckQuantiles    `json:"barriers_ms"`
	WrittenMs  ckQuantiles    `json:"written_ms"`
	CommitMs   ckQuantiles    `json:"commit_ms"`
	Tail       []soakTailJSON `json:"tail"`       // at or over the duration's p99, longest first
	LongestID  uint64         `json:"longest_id"` // the checkpoint of the longest duration
	StalledID  uint64         `json:"stalled_id"` // the checkpoint of the longest synchronous part
	BytesMax   uint64         `json:"bytes_max"`
}

// soakTailJSON is one of the slowest checkpoints of a soak.
type soakTailJSON struct {
	ID         uint64  `json:"id"`
	Child      int     `json:"child"`
	AtS        float64 `json:"at_s"`
	DurationMs float64 `json:"duration_ms"`
	BarriersMs float64 `json:"barriers_ms"`
	WrittenMs  float64 `json:"written_ms"`
	CommitMs   float64 `json:"commit_ms"`
	SyncMaxUs  float64 `json:"sync_max_us"`
	// WrittenLast is the subtask whose part was written last.
	WrittenLast string `json:"written_last"`
}

// printSoakStalls prints a count of stalls by cause under title, and the
// longest of them.
func printSoakStalls(w io.Writer, title string, byCause map[string]int, longest []soak.Stall) {
	if len(byCause) == 0 {
		fmt.Fprintf(w, "%s: none\n", title)
		return
	}
	var parts []string
	n := 0
	for _, c := range slices.Sorted(maps.Keys(byCause)) {
		parts = append(parts, fmt.Sprintf("%s %d", c, byCause[c]))
		n += byCause[c]
	}
	fmt.Fprintf(w, "%s: %d: %s; the longest:\n", title, n, strings.Join(parts, ", "))
	for _, x := range longest {
		fmt.Fprintf(w, "  child %d at %v: %s\n", x.Child, x.At.Round(time.Second), x.Desc)
	}
}

// soakStallsJSON is the job's stalls: counted by cause, and the longest
// described.
type soakStallsJSON struct {
	ByCause map[string]int `json:"by_cause"`
	Longest []string       `json:"longest"`
	// PartsByCause and LongestParts are the same of the checkpoints'
	// synchronous parts over the bound.
	PartsByCause map[string]int `json:"parts_by_cause"`
	LongestParts []string       `json:"longest_parts"`
}

type soakVerifyJSON struct {
	OK      bool   `json:"ok"`
	Records uint64 `json:"records"`
	Lines   uint64 `json:"lines"`
	Files   int    `json:"files"`
	Keys    uint64 `json:"keys"`
	Error   string `json:"error,omitempty"`
}

func soakJSONOf(f soakFlags, s *soaker, sum soak.Summary, check *soakCheck, violations []string) soakJSON {
	ck := sum.Checkpoints
	q := func(x soak.Quantiles, unit time.Duration) ckQuantiles {
		u := float64(unit)
		return ckQuantiles{P50: float64(x.P50) / u, P99: float64(x.P99) / u, Max: float64(x.Max) / u}
	}
	out := soakJSON{Pipeline: f.job.Pipeline, Keys: f.job.Keys, Rate: f.job.Rate, Parallelism: f.job.Parallelism,
		Seconds: sum.Seconds, WarmupS: f.warmup.Seconds(), Samples: sum.Samples, Series: map[string]soakSeriesJSON{},
		Checkpoints: soakCkJSON{Completed: ck.Completed, Failed: ck.Failed, Aborted: ck.Aborted,
			DurationMs: q(ck.Duration, time.Millisecond), SyncMaxUs: q(ck.SyncMax, time.Microsecond),
			SyncCPUMaxUs: q(ck.SyncCPUMax, time.Microsecond),
			BarriersMs:   q(ck.Barriers, time.Millisecond), WrittenMs: q(ck.Written, time.Millisecond),
			CommitMs: q(ck.Commit, time.Millisecond), Tail: []soakTailJSON{},
			LongestID: ck.Longest.ID, StalledID: ck.Stalled.ID, BytesMax: ck.BytesMax},
		RSSGrowthPct: sum.RSSGrowth * 100, Failures: sum.Failures, Restarts: sum.Restarts, Kills: sum.Kills,
		Children: s.children, Violations: violations,
		Stalls: soakStallsJSON{ByCause: sum.Stalls.ByCause, Longest: []string{},
			PartsByCause: sum.Stalls.PartsByCause, LongestParts: []string{}}}
	for _, c := range ck.Tail {
		out.Checkpoints.Tail = append(out.Checkpoints.Tail, soakTailJSON{ID: c.ID, Child: c.Child, AtS: c.At.Seconds(),
			DurationMs: ms(c.Duration), BarriersMs: ms(c.Barriers), WrittenMs: ms(c.Written), CommitMs: ms(c.Commit()),
			SyncMaxUs: us(c.SyncMax), WrittenLast: c.WrittenLast})
	}
	if out.Stalls.ByCause == nil {
		out.Stalls.ByCause = map[string]int{}
	}
	if out.Stalls.PartsByCause == nil {
		out.Stalls.PartsByCause = map[string]int{}
	}
	for _, x := range sum.Stalls.Longest {
		out.Stalls.Longest = append(out.Stalls.Longest, x.Desc)
	}
	for _, x := range sum.Stalls.LongestParts {
		out.Stalls.LongestParts = append(out.Stalls.LongestParts, x.Desc)
	}
	if out.Violations == nil {
		out.Violations = []string{}
	}
	for _, x := range sum.Series {
		out.Series[x.Name] = soakSeriesJSON{WarmupEnd: x.WarmupEnd, Final: x.Final, Max: x.Max, TrendPerMin: x.TrendPerMin}
	}
	if check != nil {
		v := &soakVerifyJSON{OK: check.err == nil, Records: check.Records, Lines: check.Lines, Files: check.Files, Keys: check.Keys}
		if check.err != nil {
			v.Error = check.err.Error()
		}
		out.Verify = v
	}
	return out
}
