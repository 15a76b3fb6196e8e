package soak

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Summary sums up a soak's samples and checkpoints (see the package doc).
type Summary struct {
	Seconds float64 // of the last sample
	Warmup  time.Duration
	Samples int
	// Series has one entry per level column of the CSV, in its order.
	Series      []Series
	Checkpoints CheckpointSummary
	// RSSGrowth is the largest RSS after the warm-up over the largest
	// during it, minus 1 (0.05: 5% more); 0 without samples on either side.
	RSSGrowth float64
	// Stalls sums up the job's stalls (set by SummarizeStalls).
	Stalls StallSummary
	// Restarts, Failures and Kills count over the soak.
	Restarts int
	Failures int
	Kills    int
}

// Series sums up one column.
type Series struct {
	Name      string
	WarmupEnd float64 // the first sample at or after the warm-up's end
	Final     float64
	Max       float64
	// TrendPerMin is the least-squares slope of the samples after the
	// warm-up, in the column's unit per minute; 0 with fewer than two.
	TrendPerMin float64
}

// CheckpointSummary sums up the soak's checkpoints.
type CheckpointSummary struct {
	Completed int
	Failed    int
	Aborted   int // in flight when a failure or a kill ended an attempt
	// Duration and SyncMax are over the completed checkpoints: their
	// durations, and their longest synchronous parts of a subtask.
	Duration Quantiles
	SyncMax  Quantiles
	// SyncCPUMax is over their longest times on CPU in a synchronous
	// part (Checkpoint.SyncCPUMax).
	SyncCPUMax Quantiles
	// Barriers, Written and Commit split the durations (see Checkpoint):
	// each is over the completed checkpoints, so their p99s need not add
	// up to the duration's.
	Barriers, Written, Commit Quantiles
	// Tail is the completed checkpoints at or over the duration's p99,
	// longest first (at most tailMax), with where their time went.
	Tail []Checkpoint
	// Longest and Stalled are the completed checkpoints with the longest
	// duration and with the longest synchronous part.
	Longest, Stalled Checkpoint
	BytesMax         uint64 // the most one checkpoint wrote
}

// Summarize sums up samples (in the order they were taken) and the soak's
// checkpoints, with the samples before warmup counting as the warm-up.
func Summarize(samples []Sample, cks []Checkpoint, warmup time.Duration) Summary {
	s := Summary{Warmup: warmup, Samples: len(samples), Checkpoints: summarizeCheckpoints(cks)}
	if len(samples) == 0 {
		return s
	}
	last := &samples[len(samples)-1]
	s.Seconds = last.At.Seconds()
	s.Restarts, s.Failures, s.Kills = last.Restarts, last.Failures, last.Kills
	after := len(samples) // index of the first sample after the warm-up
	for i := range samples {
		if samples[i].At >= warmup {
			after = i
			break
		}
	}
	for _, c := range columns {
		if c.level {
			s.Series = append(s.Series, summarizeSeries(c, samples, after))
		}
	}
	s.RSSGrowth = rssGrowth(samples, after)
	return s
}

func summarizeSeries(c column, samples []Sample, after int) Series {
	s := Series{Name: c.name, Final: c.value(&samples[len(samples)-1])}
	if after < len(samples) {
		s.WarmupEnd = c.value(&samples[after])
	} else {
		s.WarmupEnd = s.Final
	}
	t := make([]float64, 0, len(samples)-after)
	v := make([]float64, 0, len(samples)-after)
	for i := range samples {
		x := c.value(&samples[i])
		s.Max = max(s.Max, x)
		if i >= after {
			t = append(t, samples[i].At.Minutes())
			v = append(v, x)
		}
	}
	s.TrendPerMin = Slope(t, v)
	return s
}

// Slope returns the least-squares slope of y over x; 0 with fewer than
// two points or no spread in x.
func Slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 || len(x) != len(y) {
		return 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// rssGrowth compares the largest RSS after the warm-up (samples from
// index after on) with the largest during it.
func rssGrowth(samples []Sample, after int) float64 {
	var during, since uint64
	for i := range samples {
		if i < after {
			during = max(during, samples[i].RSS.Total)
		} else {
			since = max(since, samples[i].RSS.Total)
		}
	}
	if during == 0 || since == 0 {
		return 0
	}
	return float64(since)/float64(during) - 1
}

func summarizeCheckpoints(cks []Checkpoint) CheckpointSummary {
	var s CheckpointSummary
	var durations, syncs, syncCPUs, barriers, written, commits []time.Duration
	var done []Checkpoint
	for _, c := range cks {
		switch {
		case c.Completed():
			s.Completed++
		case c.Failed():
			s.Failed++
			continue
		default:
			s.Aborted++
			continue
		}
		durations = append(durations, c.Duration)
		syncs = append(syncs, c.SyncMax)
		syncCPUs = append(syncCPUs, c.SyncCPUMax)
		barriers = append(barriers, c.Barriers)
		written = append(written, c.Written)
		commits = append(commits, c.Commit())
		done = append(done, c)
		if c.Duration > s.Longest.Duration {
			s.Longest = c
		}
		if c.SyncMax > s.Stalled.SyncMax {
			s.Stalled = c
		}
		s.BytesMax = max(s.BytesMax, c.BytesWritten)
	}
	s.Duration, s.SyncMax, s.SyncCPUMax = QuantilesOf(durations), QuantilesOf(syncs), QuantilesOf(syncCPUs)
	s.Barriers, s.Written, s.Commit = QuantilesOf(barriers), QuantilesOf(written), QuantilesOf(commits)
	slices.SortStableFunc(done, func(a, b Checkpoint) int { return cmp.Compare(b.Duration, a.Duration) })
	for _, c := range done {
		if c.Duration < s.Duration.P99 || len(s.Tail) == tailMax {
			break
		}
		s.Tail = append(s.Tail, c)
	}
	return s
}

// tailMax is the most checkpoints CheckpointSummary.Tail lists: the 1%
// over p99 of a 30-minute soak with 1 s checkpoints is 18.
const tailMax = 32

// Bounds are what a soak asserts; a negative bound is not checked.
type Bounds struct {
	MaxRSSGrowthPct      float64 // RSSGrowth, in percent
	MaxFailedCheckpoints int
}

// Violations returns what in s breaks b, one sentence each, and a restart
// that no injected failure explains, which a soak never allows.
func (s Summary) Violations(b Bounds) []string {
	var v []string
	if b.MaxRSSGrowthPct >= 0 && s.RSSGrowth*100 > b.MaxRSSGrowthPct {
		v = append(v, fmt.Sprintf("RSS grew %.1f%% after the warm-up of %v, more than --max-rss-growth %g%%",
			s.RSSGrowth*100, s.Warmup, b.MaxRSSGrowthPct))
	}
	if b.MaxFailedCheckpoints >= 0 && s.Checkpoints.Failed > b.MaxFailedCheckpoints {
		v = append(v, fmt.Sprintf("%d checkpoints failed, more than --max-failed-checkpoints %d",
			s.Checkpoints.Failed, b.MaxFailedCheckpoints))
	}
	if s.Restarts > s.Failures {
		v = append(v, fmt.Sprintf("the job restarted %d times for %d injected failures: a task failed on its own",
			s.Restarts, s.Failures))
	}
	return v
}

// StallSummary sums up the job's stalls over the soak.
type StallSummary struct {
	// ByCause counts the steps over the bound received, by cause;
	// Longest are the longest of them, longest first (at most
	// longestStalls).
	ByCause map[string]int
	Longest []Stall
	// PartsByCause and LongestParts are the same of the checkpoints'
	// synchronous parts over the bound, timed on their own.
	PartsByCause map[string]int
	LongestParts []Stall
}

// longestStalls is how many stalls a summary describes.
const longestStalls = 10

// SummarizeStalls sums up the stalls received over the soak.
func SummarizeStalls(stalls []Stall) StallSummary {
	s := StallSummary{ByCause: map[string]int{}, PartsByCause: map[string]int{}}
	for _, st := range stalls {
		if st.Part {
			s.PartsByCause[st.Cause]++
			s.LongestParts = append(s.LongestParts, st)
		} else {
			s.ByCause[st.Cause]++
			s.Longest = append(s.Longest, st)
		}
	}
	s.Longest, s.LongestParts = longest(s.Longest), longest(s.LongestParts)
	return s
}

// longest sorts stalls longest first and keeps the first longestStalls.
func longest(stalls []Stall) []Stall {
	slices.SortStableFunc(stalls, func(a, b Stall) int { return cmp.Compare(b.Duration, a.Duration) })
	return stalls[:min(len(stalls), longestStalls)]
}
