package compare

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/statusui"
)

// Report is the result of a comparison.
type Report struct {
	Pipeline string `json:"pipeline"`
	// Modes are the checkpointed modes, in the order they ran.
	Modes []ModeResult `json:"modes"`
	// NoCheckpoints is the run without checkpoints, if mode none ran, and
	// NoCheckpointsDebloat its run with debloating (Config.Debloat).
	NoCheckpoints        *ModeResult `json:"no_checkpoints,omitempty"`
	NoCheckpointsDebloat *ModeResult `json:"no_checkpoints_debloat,omitempty"`
	// Rings is the number of rings between tasks; RingBytes = Rings ×
	// RingCapacity bounds the in-flight bytes one checkpoint may persist.
	Rings        int    `json:"rings"`
	RingCapacity int    `json:"ring_capacity"`
	RingBytes    uint64 `json:"ring_bytes"`
}

// Quantiles summarize durations, in milliseconds (nearest rank).
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// ModeResult is one mode's run. Checkpoint figures cover the completed,
// non-final checkpoints.
type ModeResult struct {
	Mode Mode `json:"mode"`
	// Debloat is the run's ringflow.Config.Debloat; negative: off.
	Debloat       time.Duration `json:"debloat_ns"`
	RecordsPerSec float64       `json:"records_per_sec"` // records at the sink / wall time of the run
	// CheckpointMs: trigger to completion.
	CheckpointMs Quantiles `json:"checkpoint_ms"`
	// AlignmentMs: first barrier to snapshot, over the non-source subtasks.
	AlignmentMs Quantiles `json:"alignment_ms"`
	// StartDelayMs: trigger to first barrier, over the non-source subtasks.
	StartDelayMs Quantiles `json:"start_delay_ms"`
	// SyncMs and AsyncMs: the synchronous and background parts of the
	// snapshot, over the non-source subtasks.
	SyncMs  Quantiles `json:"sync_ms"`
	AsyncMs Quantiles `json:"async_ms"`
	// InflightBytes is the in-flight data persisted, summed over the
	// checkpoints; InflightBytesMax the most one checkpoint persisted.
	InflightBytes    uint64 `json:"inflight_bytes"`
	InflightBytesMax uint64 `json:"inflight_bytes_max"`
	// CheckpointBytes is the median BytesWritten of a checkpoint.
	CheckpointBytes uint64 `json:"checkpoint_bytes"`
	// RestoreMs is the time from starting the restored job until its sink
	// saw its first record; RestoreRunMs the whole restored run.
	RestoreMs    float64 `json:"restore_ms"`
	RestoreRunMs float64 `json:"restore_run_ms"`
	RestoredFrom uint64  `json:"restored_from"` // checkpoint id; 0: nothing restored
	SinkRecords  int64   `json:"sink_records"`
	Seconds      float64 `json:"seconds"`
	Completed    int     `json:"checkpoints_completed"`
	Failed       int     `json:"checkpoints_failed"`
	Aborted      int     `json:"checkpoints_aborted"`
	// UnalignedParts counts the non-source subtasks' parts of checkpoints
	// taken unaligned, of Parts in all.
	UnalignedParts int     `json:"unaligned_parts"`
	Parts          int     `json:"parts"`
	Stalls         []Stall `json:"stalls,omitempty"`
	// Profile sums up the mode's fgprof profile (with Config.ProfileDir
	// only).
	Profile *Frames `json:"profile,omitempty"`
	// Checkpoints are the run's checkpoint statistics, and Slowest the
	// status page's view of its slowest checkpoint, for reports.
	Checkpoints []ringflow.CheckpointStats `json:"-"`
	Slowest     *statusui.CheckpointView   `json:"-"`
}

// Name names the run: its mode, and its debloat target if it has one.
func (m ModeResult) Name() string {
	if m.Debloat > 0 {
		return fmt.Sprintf("%s debloat %v", m.Mode, m.Debloat)
	}
	return string(m.Mode)
}

// Stall is the subtask that waited longest in one checkpoint.
type Stall struct {
	Checkpoint    uint64  `json:"checkpoint"`
	Status        string  `json:"status"`
	DurationMs    float64 `json:"duration_ms"`
	Operator      string  `json:"operator"`
	Subtask       int     `json:"subtask"`
	Channel       int     `json:"channel"` // input channel waited on (-1: a source)
	StartDelayMs  float64 `json:"start_delay_ms"`
	AlignmentMs   float64 `json:"alignment_ms"`
	WaitMs        float64 `json:"wait_ms"` // start delay + alignment
	Unaligned     bool    `json:"unaligned"`
	InflightBytes uint64  `json:"inflight_bytes"`
	// WrittenMs is when every part of the checkpoint was written (the rest
	// of DurationMs is its commit); AsyncMaxMs the longest write of one
	// subtask's part.
	WrittenMs  float64 `json:"written_ms"`
	AsyncMaxMs float64 `json:"async_max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// isSource says whether a subtask is one of the pipelines' sources, whose
// start delay and alignment are 0 by definition.
func isSource(op string) bool { return op == "source" || op == "left" || op == "right" }

// summarize computes a mode's figures from the job's checkpoint stats.
func summarize(m Mode, cps []ringflow.CheckpointStats, records int64, elapsed time.Duration) ModeResult {
	r := ModeResult{Mode: m, SinkRecords: records, Seconds: elapsed.Seconds(), Stalls: Stalls(cps)}
	if elapsed > 0 {
		r.RecordsPerSec = float64(records) / elapsed.Seconds()
	}
	var durs, aligns, delays, syncs, asyncs []time.Duration
	var sizes []uint64
	for _, c := range cps {
		if c.Final {
			continue
		}
		if strings.HasPrefix(c.Status, "aborted") {
			r.Aborted++
			continue
		}
		if c.Status != "completed" {
			r.Failed++
			continue
		}
		r.Completed++
		durs = append(durs, c.Duration)
		sizes = append(sizes, c.BytesWritten)
		var inflight uint64
		for _, s := range c.Subtasks {
			inflight += s.InflightBytes
			if !isSource(s.Operator) {
				r.Parts++
				if s.Unaligned {
					r.UnalignedParts++
				}
				aligns = append(aligns, s.Alignment)
				delays = append(delays, s.StartDelay)
				syncs, asyncs = append(syncs, s.Sync), append(asyncs, s.Async)
			}
		}
		r.InflightBytes += inflight
		r.InflightBytesMax = max(r.InflightBytesMax, inflight)
	}
	r.CheckpointMs, r.AlignmentMs, r.StartDelayMs = quantiles(durs), quantiles(aligns), quantiles(delays)
	r.SyncMs, r.AsyncMs = quantiles(syncs), quantiles(asyncs)
	if len(sizes) > 0 {
		slices.Sort(sizes)
		r.CheckpointBytes = sizes[(len(sizes)-1)/2]
	}
	return r
}

// quantiles returns nearest-rank p50 and p99 and the max of ds.
func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Quantiles{P50: ms(rank(0.50)), P99: ms(rank(0.99)), Max: ms(s[len(s)-1])}
}

// Stalls returns, for each non-final checkpoint (completed or failed), the
// subtask with the longest wait: start delay plus alignment. Ties go to
// the first subtask listed.
func Stalls(cps []ringflow.CheckpointStats) []Stall {
	var out []Stall
	for _, c := range cps {
		if c.Final || len(c.Subtasks) == 0 {
			continue
		}
		worst, async := c.Subtasks[0], c.Subtasks[0].Async
		for _, s := range c.Subtasks[1:] {
			if s.StartDelay+s.Alignment > worst.StartDelay+worst.Alignment {
				worst = s
			}
			async = max(async, s.Async)
		}
		out = append(out, Stall{Checkpoint: c.ID, Status: c.Status, DurationMs: ms(c.Duration),
			Operator: worst.Operator, Subtask: worst.Subtask, Channel: worst.WaitedOn, StartDelayMs: ms(worst.StartDelay),
			AlignmentMs: ms(worst.Alignment), WaitMs: ms(worst.StartDelay + worst.Alignment),
			Unaligned: worst.Unaligned, InflightBytes: worst.InflightBytes, WrittenMs: ms(c.Written), AsyncMaxMs: ms(async)})
	}
	return out
}

// tableFlags are the flags of the tables; a test adds tabwriter.Debug to
// see where each cell ends.
var tableFlags uint = tabwriter.AlignRight

// WriteStalls writes the stall report: one line per checkpoint and mode.
func WriteStalls(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tableFlags)
	fmt.Fprintf(tw, "# pipeline %s: per checkpoint, the subtask that waited longest (start delay + alignment).\n", r.Pipeline)
	fmt.Fprintln(tw, "# channel: the input channel whose barrier came last (the one waited on).")
	fmt.Fprintln(tw, "mode\tcheckpoint\tstatus\tduration ms\tsubtask\tchannel\tstart delay ms\talignment ms\twait ms\tkind\tin-flight B\t")
	for _, m := range r.Modes {
		for _, s := range m.Stalls {
			kind := "aligned"
			if s.Unaligned {
				kind = "unaligned"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%s[%d]\t%d\t%.1f\t%.1f\t%.1f\t%s\t%d\t\n", m.Name(), s.Checkpoint,
				strings.SplitN(s.Status, ":", 2)[0], s.DurationMs, s.Operator, s.Subtask, s.Channel,
				s.StartDelayMs, s.AlignmentMs, s.WaitMs, kind, s.InflightBytes)
		}
	}
	return tw.Flush()
}

// WriteTable writes the comparison as a table, modes as rows.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tableFlags)
	fmt.Fprintf(tw, "pipeline %s; in-flight bound %d rings x %d B = %d B\n", r.Pipeline, r.Rings, r.RingCapacity, r.RingBytes)
	fmt.Fprintln(tw, "mode\trecords/s\tckpts ok/failed\tckpt p50/p99/max ms\talign p50/p99/max ms\tstart delay p50/max ms\t"+
		"async p50/max ms\tunaligned parts\tin-flight B sum/max\tckpt B p50\trestore ms first/run\t")
	rows := append([]ModeResult(nil), r.Modes...)
	for _, none := range []*ModeResult{r.NoCheckpoints, r.NoCheckpointsDebloat} {
		if none != nil {
			rows = append(rows, *none)
		}
	}
	for _, m := range rows {
		if m.Mode == None {
			fmt.Fprintf(tw, "%s\t%.0f\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", m.Name(), m.RecordsPerSec)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d/%d\t%s\t%s\t%.1f/%.1f\t%.1f/%.1f\t%d/%d\t%d/%d\t%d\t%.1f/%.1f\t\n", m.Name(), m.RecordsPerSec,
			m.Completed, m.Failed, q(m.CheckpointMs), q(m.AlignmentMs), m.StartDelayMs.P50, m.StartDelayMs.Max,
			m.AsyncMs.P50, m.AsyncMs.Max,
			m.UnalignedParts, m.Parts, m.InflightBytes, m.InflightBytesMax, m.CheckpointBytes, m.RestoreMs, m.RestoreRunMs)
	}
	return tw.Flush()
}

func q(x Quantiles) string { return fmt.Sprintf("%.1f/%.1f/%.1f", x.P50, x.P99, x.Max) }
