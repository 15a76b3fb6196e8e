package soak

import (
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// Report is one line of the child's stdout, as JSON: what it saw since
// its previous Report.
type Report struct {
	Runtime        Runtime       `json:"runtime"`
	RecordsPerSec  float64       `json:"records_per_sec"` // into the sink
	LatencyP99     time.Duration `json:"latency_p99_ns"`
	LatencySamples uint64        `json:"latency_samples"`
	// Restarts and Failures count over the child's life: in-place
	// restarts of its job, and failures it injected.
	Restarts int `json:"restarts"`
	Failures int `json:"failures"`
	// Checkpoints are those that ended since the previous Report.
	Checkpoints []Checkpoint `json:"checkpoints,omitempty"`
	// Stalls are the job's stalls (ringflow.Job.Stalls) since the
	// previous Report.
	Stalls []Stall `json:"stalls,omitempty"`
	// End is set on the child's last Report, when its job has finished.
	End *End `json:"end,omitempty"`
}

// End is how the child's job finished: SourceEnds[i] is the number of
// records source subtask i generated (pipelines.Control.Ends), which the
// committed output must be the effect of.
type End struct {
	SourceEnds []uint64 `json:"source_ends"`
}

// Stall is one of the job's steps, or a checkpoint's synchronous part,
// over its stall bound (ringflow.Stall).
type Stall struct {
	Duration time.Duration `json:"duration_ns"`
	Cause    string        `json:"cause"`
	// Part says it is a checkpoint's synchronous part, not a step.
	Part bool `json:"part,omitempty"`
	// Desc describes it whole (ringflow.Stall's String).
	Desc string `json:"desc"`
	// Child and At are where the soak received it: set by the parent.
	Child int           `json:"-"`
	At    time.Duration `json:"-"`
}

// Checkpoint is one checkpoint of the soak's job.
type Checkpoint struct {
	ID       uint64        `json:"id"`
	Status   string        `json:"status"` // "completed", "failed: …" or "aborted: …"
	Final    bool          `json:"final"`  // taken at the end of the input
	Duration time.Duration `json:"duration_ns"`
	// SyncMax and AlignmentMax are the longest synchronous part and the
	// longest alignment of a subtask.
	SyncMax      time.Duration `json:"sync_max_ns"`
	AlignmentMax time.Duration `json:"alignment_max_ns"`
	// SyncCPUMax is the longest time a subtask's thread was on its core
	// in its synchronous part: SyncMax less the time it was preempted.
	SyncCPUMax time.Duration `json:"sync_cpu_max_ns"`
	// SyncCause says where the longest synchronous part's time went when
	// it was over the job's stall bound (ringflow's SyncCause); "" when
	// it was not.
	SyncCause string `json:"sync_cause,omitempty"`
	// Where the duration went, as offsets from the trigger: Barriers is
	// when the last subtask began its synchronous part (the barriers had
	// reached every subtask and been aligned), Written when every part
	// had been written. The rest of Duration is the commit.
	Barriers time.Duration `json:"barriers_ns"`
	Written  time.Duration `json:"written_ns"`
	// WrittenLast names the subtask whose part was written last, by the
	// head operator of its chain ("count#1").
	WrittenLast  string `json:"written_last,omitempty"`
	BytesWritten uint64 `json:"bytes_written"`
	// Child and At say which child took it and when the parent learnt of
	// it (since the soak started); the parent sets them.
	Child int           `json:"child,omitempty"`
	At    time.Duration `json:"at_ns,omitempty"`
}

// CheckpointOf returns the Checkpoint of a job's checkpoint statistics.
func CheckpointOf(s ringflow.CheckpointStats) Checkpoint {
	c := Checkpoint{ID: s.ID, Status: s.Status, Final: s.Final, Duration: s.Duration, Written: s.Written,
		BytesWritten: s.BytesWritten}
	var last time.Duration
	for _, st := range s.Subtasks {
		if st.Acked > last {
			last, c.WrittenLast = st.Acked, fmt.Sprintf("%s#%d", st.Operator, st.Subtask)
		}
		c.Barriers = max(c.Barriers, st.Snapshot)
		if st.Sync > c.SyncMax {
			c.SyncMax, c.SyncCause = st.Sync, st.SyncCause
		}
		c.SyncCPUMax = max(c.SyncCPUMax, st.SyncCPU)
		c.AlignmentMax = max(c.AlignmentMax, st.Alignment)
	}
	return c
}

// Commit is the part of the duration after every part was written: the
// commit's CPU work and the syncs that make the checkpoint durable.
func (c Checkpoint) Commit() time.Duration { return max(0, c.Duration-c.Written) }

// Completed reports whether the checkpoint completed; Failed whether it
// failed (a checkpoint in flight when its attempt ended is aborted,
// neither completed nor failed).
func (c Checkpoint) Completed() bool { return c.Status == "completed" }
func (c Checkpoint) Failed() bool    { return strings.HasPrefix(c.Status, "failed") }

// Runtime is the Go runtime's memory now, and its GC over the interval
// since the previous reading.
type Runtime struct {
	HeapLiveBytes    uint64        `json:"heap_live_bytes"`
	HeapObjectsBytes uint64        `json:"heap_objects_bytes"`
	GoHeldBytes      uint64        `json:"go_held_bytes"`
	GCCycles         uint64        `json:"gc_cycles"`
	GCPauses         uint64        `json:"gc_pauses"`
	GCPauseMax       time.Duration `json:"gc_pause_max_ns"`
	GCAssist         time.Duration `json:"gc_assist_ns"`
	// StateMappedBytes is the keyed state held outside the Go heap
	// (cow.MappedBytes).
	StateMappedBytes uint64 `json:"state_mapped_bytes"`
}

// The runtime/metrics RuntimeReader reads, by index.
const (
	mHeapLive = iota
	mHeapObjects
	mTotal
	mReleased
	mCycles
	mPauses
	mAssist
	mCount
)

var runtimeMetricNames = [mCount]string{
	mHeapLive:    "/gc/heap/live:bytes",
	mHeapObjects: "/memory/classes/heap/objects:bytes",
	mTotal:       "/memory/classes/total:bytes",
	mReleased:    "/memory/classes/heap/released:bytes",
	mCycles:      "/gc/cycles/total:gc-cycles",
	mPauses:      "/sched/pauses/total/gc:seconds",
	mAssist:      "/cpu/classes/gc/mark/assist:cpu-seconds",
}

// RuntimeReader reads Runtime figures of this process; each Read counts
// the GC's work since the previous one.
type RuntimeReader struct {
	s      []metrics.Sample
	cycles uint64
	pauses []uint64 // bucket counts of the pause histogram
	assist float64  // seconds
}

// NewRuntimeReader returns a reader whose first Read counts from now.
func NewRuntimeReader() *RuntimeReader {
	r := &RuntimeReader{s: make([]metrics.Sample, mCount)}
	for i, name := range runtimeMetricNames {
		r.s[i].Name = name
	}
	r.Read()
	return r
}

// Read returns the memory now and the GC's work since the previous Read.
func (r *RuntimeReader) Read() Runtime {
	metrics.Read(r.s)
	u := func(i int) uint64 {
		if r.s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return r.s[i].Value.Uint64()
	}
	out := Runtime{HeapLiveBytes: u(mHeapLive), HeapObjectsBytes: u(mHeapObjects), StateMappedBytes: uint64(max(cow.MappedBytes(), 0))}
	out.GoHeldBytes = u(mTotal) - min(u(mReleased), u(mTotal))
	cycles := u(mCycles)
	out.GCCycles, r.cycles = cycles-min(r.cycles, cycles), cycles
	if r.s[mAssist].Value.Kind() == metrics.KindFloat64 {
		assist := r.s[mAssist].Value.Float64()
		out.GCAssist = time.Duration(max(assist-r.assist, 0) * 1e9)
		r.assist = assist
	}
	if r.s[mPauses].Value.Kind() == metrics.KindFloat64Histogram {
		out.GCPauses, out.GCPauseMax = r.pausesSince(r.s[mPauses].Value.Float64Histogram())
	}
	return out
}

// pausesSince counts the pauses in h since the previous reading, and
// returns the upper bound of the highest bucket that gained one (its lower
// bound if the upper is infinite).
func (r *RuntimeReader) pausesSince(h *metrics.Float64Histogram) (n uint64, longest time.Duration) {
	for i, c := range h.Counts {
		var prev uint64
		if i < len(r.pauses) {
			prev = r.pauses[i]
		}
		if c <= prev {
			continue
		}
		n += c - prev
		bound := h.Buckets[i+1]
		if bound > 1e9 { // +Inf, or beyond any pause
			bound = h.Buckets[i]
		}
		longest = time.Duration(bound * 1e9)
	}
	// NB: Read may reuse h's slices; keep a copy.
	r.pauses = append(r.pauses[:0], h.Counts...)
	return n, longest
}

// Quantiles are nearest-rank quantiles of durations.
type Quantiles struct {
	P50 time.Duration
	P99 time.Duration
	Max time.Duration
}

// QuantilesOf returns the nearest-rank quantiles of ds, which it sorts;
// zero without values.
func QuantilesOf(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	rank := func(q float64) time.Duration {
		return ds[max(int(math.Ceil(q*float64(len(ds))))-1, 0)]
	}
	return Quantiles{P50: rank(0.5), P99: rank(0.99), Max: ds[len(ds)-1]}
}
