package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

func sub(op string, i int, delay, align time.Duration, unaligned bool, inflight uint64) ringflow.SubtaskCheckpointStats {
	return ringflow.SubtaskCheckpointStats{Operator: op, Subtask: i, StartDelay: delay, Alignment: align,
		Unaligned: unaligned, InflightBytes: inflight}
}

// syntheticStats: checkpoint 1 aligned and slow on count[1]; 2 failed, slow
// on count[0]; 3 unaligned; 4 final (ignored everywhere).
func syntheticStats() []ringflow.CheckpointStats {
	ms := time.Millisecond
	return []ringflow.CheckpointStats{
		{ID: 1, Duration: 900 * ms, BytesWritten: 100, Status: "completed", Subtasks: []ringflow.SubtaskCheckpointStats{
			sub("source", 0, 0, 0, false, 0), sub("count", 0, 10*ms, 20*ms, false, 0), sub("count", 1, 300*ms, 500*ms, false, 0)}},
		{ID: 2, Duration: 5000 * ms, Status: "failed: timeout", Subtasks: []ringflow.SubtaskCheckpointStats{
			sub("count", 0, 4000*ms, 900*ms, false, 0), sub("count", 1, 100*ms, 0, false, 0)}},
		{ID: 3, Duration: 20 * ms, BytesWritten: 300, Status: "completed", Subtasks: []ringflow.SubtaskCheckpointStats{
			sub("source", 0, 0, 0, true, 0), sub("count", 0, 2*ms, 0, true, 700), sub("count", 1, 2*ms, 0, true, 900)}},
		{ID: 4, Duration: 10 * ms, BytesWritten: 1 << 30, Status: "completed", Final: true, Subtasks: []ringflow.SubtaskCheckpointStats{
			sub("count", 0, 9000*ms, 9000*ms, false, 1<<30)}},
	}
}

func TestStalls(t *testing.T) {
	got := Stalls(syntheticStats())
	want := []Stall{
		{Checkpoint: 1, Status: "completed", DurationMs: 900, Operator: "count", Subtask: 1, StartDelayMs: 300, AlignmentMs: 500, WaitMs: 800},
		{Checkpoint: 2, Status: "failed: timeout", DurationMs: 5000, Operator: "count", Subtask: 0, StartDelayMs: 4000, AlignmentMs: 900, WaitMs: 4900},
		// A tie (2+0 on both) goes to the first listed.
		{Checkpoint: 3, Status: "completed", DurationMs: 20, Operator: "count", Subtask: 0, StartDelayMs: 2, WaitMs: 2, Unaligned: true, InflightBytes: 700},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d stalls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stall %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	var b bytes.Buffer
	if err := WriteStalls(&b, Report{Pipeline: "keyed-count", Modes: []ModeResult{{Mode: Aligned, Stalls: got}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"count[1]", "count[0]", "failed", "unaligned", "4900.0"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("stall report lacks %q:\n%s", s, b.String())
		}
	}
}

func TestSummarize(t *testing.T) {
	r := summarize(Aligned, syntheticStats(), 5000, 2*time.Second)
	if r.RecordsPerSec != 2500 || r.Completed != 2 || r.Failed != 1 {
		t.Errorf("records/s %v completed %d failed %d, want 2500 2 1", r.RecordsPerSec, r.Completed, r.Failed)
	}
	if want := (Quantiles{P50: 20, P99: 900, Max: 900}); r.CheckpointMs != want {
		t.Errorf("checkpoint ms %+v, want %+v", r.CheckpointMs, want)
	}
	// Alignment over the non-source subtasks of completed checkpoints: 20, 500, 0, 0.
	if want := (Quantiles{P50: 0, P99: 500, Max: 500}); r.AlignmentMs != want {
		t.Errorf("alignment ms %+v, want %+v", r.AlignmentMs, want)
	}
	if want := (Quantiles{P50: 2, P99: 300, Max: 300}); r.StartDelayMs != want {
		t.Errorf("start delay ms %+v, want %+v", r.StartDelayMs, want)
	}
	if r.InflightBytes != 1600 || r.InflightBytesMax != 1600 || r.CheckpointBytes != 100 {
		t.Errorf("in-flight %d max %d checkpoint bytes %d, want 1600 1600 100", r.InflightBytes, r.InflightBytesMax, r.CheckpointBytes)
	}
	if r.UnalignedParts != 2 || r.Parts != 4 {
		t.Errorf("unaligned parts %d of %d, want 2 of 4 (sources do not count)", r.UnalignedParts, r.Parts)
	}
}

func TestQuantilesNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got, want := quantiles(ds), (Quantiles{P50: 50, P99: 99, Max: 100}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := quantiles(nil); got != (Quantiles{}) {
		t.Errorf("empty: got %+v", got)
	}
}

func TestSourceSkewAndPositions(t *testing.T) {
	cfg := Config{Pipeline: "keyed-count", Skew: 0.3}.WithDefaults()
	g := newGen(cfg, 1)
	hot, n := 0, 100_000
	for seq := uint64(0); seq < uint64(n); seq++ {
		r := g.record(seq)
		if r.Key == hotKey {
			hot++
		} else if r.Key > cfg.Keys {
			t.Fatalf("seq %d: key %d beyond %d keys", seq, r.Key, cfg.Keys)
		}
	}
	if f := float64(hot) / float64(n); f < 0.29 || f > 0.31 {
		t.Errorf("hot key fraction %.3f, want about 0.3", f)
	}
	// A source resumes where its position says; a restore source then
	// gives exactly one record, of the hot key and the restore run's event
	// time, and ends.
	s := &source{g: g}
	if err := s.Open(1, 2, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]Record, 10)
	if n, err := s.Read(buf); n != 10 || err != nil || buf[9].Seq != 19 {
		t.Fatalf("read %d, %v, last seq %d; want 10, nil, 19", n, err, buf[9].Seq)
	}
	r := &source{g: g, restore: true}
	if err := r.Open(1, 2, s.Position()); err != nil {
		t.Fatal(err)
	}
	want := g.record(21)
	want.Key, want.TsMs = hotKey, restoreTsMs
	if n, err := r.Read(buf); n != 1 || err != nil || buf[0] != want {
		t.Fatalf("restore read %d, %v, %+v; want %+v", n, err, buf[0], want)
	}
	if n, err := r.Read(buf); n != 0 || err == nil {
		t.Fatalf("restore source after its record: %d, %v; want io.EOF", n, err)
	}
	if err := r.Open(0, 1, []byte{1, 2}); err == nil {
		t.Error("a 2-byte position was accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Pipeline: "nope"},
		{Pipeline: "join", Skew: 1.5},
		{Pipeline: "join", Interval: -1},
		{Pipeline: "join", Modes: []Mode{Aligned, Aligned}},
		{Pipeline: "join", Modes: []Mode{"fast"}},
		{Pipeline: "join", RingCapacity: 5000},
	} {
		if err := c.WithDefaults().Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", c, err)
		}
	}
}

// poolRun is the frame where the pool waits for its workers.
const poolRun = "github.com/ringflow/ringflow/sched.(*Pool).Run"

// TestCompareShort runs every pipeline in every mode for a moment and checks
// that each mode measured something and restored a checkpoint.
func TestCompareShort(t *testing.T) {
	for _, p := range Pipelines {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Pipeline: p, Skew: 0.5, SlowSink: time.Microsecond, Interval: 20 * time.Millisecond,
				Duration: time.Second, ProfileDir: dir, TempDir: t.TempDir(), Keys: 100}
			r, err := Compare(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Modes) != 3 || r.NoCheckpoints == nil || r.NoCheckpoints.SinkRecords == 0 {
				t.Fatalf("modes %+v, none %+v", r.Modes, r.NoCheckpoints)
			}
			for i, m := range r.Modes {
				if m.Mode != AllModes[i] || m.SinkRecords == 0 || m.Completed == 0 || m.RestoredFrom == 0 || m.RestoreMs <= 0 {
					t.Errorf("mode %d: %+v", i, m)
				}
				if m.Profile == nil || len(m.Profile.Top) == 0 || len(m.Checkpoints) < m.Completed || m.Slowest == nil ||
					len(m.Slowest.Timeline.Rows) == 0 {
					t.Fatalf("%s: profile %+v, %d checkpoint stats (%d completed), slowest %+v; want frames, all stats, a timeline",
						m.Mode, m.Profile, len(m.Checkpoints), m.Completed, m.Slowest)
				}
				for _, f := range m.Profile.Top {
					// NB: the pool's wait for its workers is sched.(*Pool).Run
					// itself; its closure (Pool.Run.func1) is a worker's own
					// goroutine, caught starting or ending its thread.
					if strings.HasPrefix(f.Function, "testing.") || f.Function == poolRun || idleWaits[f.Function] {
						t.Errorf("%s: top frame %+v is the caller's wait for the job, or the engine's idle wait", m.Mode, f)
					}
				}
				if m.InflightBytesMax > r.RingBytes {
					t.Errorf("%s: %d in-flight bytes in one checkpoint, more than the rings' %d", m.Mode, m.InflightBytesMax, r.RingBytes)
				}
			}
			if r.Modes[1].UnalignedParts != r.Modes[1].Parts {
				t.Errorf("unaligned mode: %d of %d parts unaligned", r.Modes[1].UnalignedParts, r.Modes[1].Parts)
			}
			if r.Modes[0].UnalignedParts != 0 || r.Modes[0].InflightBytes != 0 {
				t.Errorf("aligned mode: %d unaligned parts, %d in-flight bytes", r.Modes[0].UnalignedParts, r.Modes[0].InflightBytes)
			}
			for _, f := range []string{"aligned.fgprof.pprof", "unaligned.fgprof.pprof", "timeout.fgprof.pprof", "none.fgprof.pprof", "stalls.txt"} {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("profile file %s: %v", f, err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(cfg.TempDir, "*")); len(left) != 0 {
				t.Errorf("state dirs left behind: %v", left)
			}
		})
	}
}

// TestStopFgprofPanic: a panic while fgprof writes its profile is an error
// that names fgprof, not a crash of the comparison.
func TestStopFgprofPanic(t *testing.T) {
	err := stopFgprof(func() error { var hz int; return errors.New(fmt.Sprint(1e9 / hz)) })
	if err == nil || !strings.Contains(err.Error(), "fgprof") {
		t.Fatalf("got %v, want an error naming fgprof", err)
	}
	if err := stopFgprof(func() error { return nil }); err != nil {
		t.Fatalf("a clean stop: %v", err)
	}
}
