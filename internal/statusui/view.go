package statusui

import "time"

// None marks a time of a timeline that did not happen: a barrier that never
// came on a channel that ended first, or a producer the checkpoint has no
// statistics of.
const None time.Duration = -1

// OverviewView is the overview page: the job graph, each operator with its
// rates over Interval.
type OverviewView struct {
	Generated time.Time `json:"generated"`
	// Interval is the time the rates cover: since the view before this one.
	// Lifetime says there was none: each subtask's rates then cover its
	// whole life (the time it has run, as its busy, backpressured and
	// idle time add up), and Interval is 0.
	Interval time.Duration `json:"interval_ns"`
	Lifetime bool          `json:"lifetime"`
	// Operators are in the job's order, which is topological.
	Operators []OperatorView `json:"operators"`
	Edges     []EdgeView     `json:"edges"`

	CheckpointsCompleted int `json:"checkpoints_completed"`
	CheckpointsFailed    int `json:"checkpoints_failed"`
	CheckpointsAborted   int `json:"checkpoints_aborted"`
	Restarts             int `json:"restarts"`
	// LastCheckpoint is the newest checkpoint of the history; nil before
	// the first.
	LastCheckpoint *CheckpointRow `json:"last_checkpoint,omitempty"`
}

// OperatorView is one operator of the overview, its figures summed over its
// subtasks.
type OperatorView struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"` // "source", "operator" or "sink"
	Parallelism int    `json:"parallelism"`
	Keyed       bool   `json:"keyed"`
	// Task is the head operator of the chain that runs this operator; the
	// operators of a chain share their task's time, so they have the same
	// shares.
	Task string `json:"task"`
	Rates
	// Subtasks are the operator's subtasks that have run.
	Subtasks []SubtaskRates `json:"subtasks"`
}

// Rates are an operator's or a subtask's figures over an OverviewView's
// interval.
type Rates struct {
	RecordsInPerSecond  float64 `json:"records_in_per_second"`
	RecordsOutPerSecond float64 `json:"records_out_per_second"`
	// BusyShare, BackpressuredShare and IdleShare split the task's time
	// in the interval (each in [0, 1]); all 0 when it had none (it did not
	// run).
	BusyShare          float64 `json:"busy_share"`
	BackpressuredShare float64 `json:"backpressured_share"`
	IdleShare          float64 `json:"idle_share"`
	// Watermark is the event time the subtask passed down (for an
	// operator, the least of its subtasks'); zero before the first, and
	// on streams without event time.
	Watermark time.Time `json:"watermark,omitzero"`
}

// SubtaskRates are one subtask's Rates.
type SubtaskRates struct {
	Subtask int `json:"subtask"`
	Rates
}

// EdgeView is one edge of the overview's graph.
type EdgeView struct {
	From         string `json:"from"`
	To           string `json:"to"`
	Partitioning string `json:"partitioning"` // "forward", "rebalance" or "hash"
	Port         int    `json:"port"`         // the input of To it feeds (1: a join's second)
	// Chained says the edge stays inside a task: it has no rings.
	Chained bool `json:"chained"`
	// QueuedBytes and CapacityBytes sum the edge's rings: their fill
	// shows where backpressure starts. Both are 0 while the job does not
	// run.
	QueuedBytes   int `json:"queued_bytes"`
	CapacityBytes int `json:"capacity_bytes"`
}

// CheckpointsView is the checkpoint history page.
type CheckpointsView struct {
	Generated time.Time `json:"generated"`
	// Total counts the checkpoints in the history; Checkpoints holds the
	// newest of them, at most Limit (0: no limit), newest first.
	Total int `json:"total"`
	Limit int `json:"limit"`
	// Completed, Failed and Aborted count every checkpoint the job took,
	// also those older than the history it keeps.
	Completed   int             `json:"completed"`
	Failed      int             `json:"failed"`
	Aborted     int             `json:"aborted"`
	Checkpoints []CheckpointRow `json:"checkpoints"`
}

// CheckpointRow is one checkpoint of the history.
type CheckpointRow struct {
	ID uint64 `json:"id"`
	// Kind is "aligned", or "unaligned" when any subtask took its
	// snapshot unaligned; "" for a checkpoint without subtask statistics
	// (one that failed or was aborted).
	Kind         string        `json:"kind"`
	Final        bool          `json:"final"` // taken at the end of input
	Trigger      time.Time     `json:"trigger"`
	Duration     time.Duration `json:"duration_ns"` // trigger to completion or failure
	BytesWritten uint64        `json:"bytes_written"`
	BytesReused  uint64        `json:"bytes_reused"`
	// InflightBytes sums the in-flight data the subtasks persisted.
	InflightBytes uint64 `json:"inflight_bytes"`
	// Slowest names the subtask acknowledged last ("count#1"), and
	// SlowestAcked is when, from the trigger; "" and 0 without subtask
	// statistics.
	Slowest      string        `json:"slowest"`
	SlowestAcked time.Duration `json:"slowest_acked_ns"`
	// Status is "completed", "failed: <why>" or "aborted: <why>"; Result
	// is its first word.
	Status string `json:"status"`
	Result string `json:"result"`
}

// CheckpointView is the page of one checkpoint: its row of the history, a
// table of its subtasks and its barrier timeline.
type CheckpointView struct {
	Checkpoint CheckpointRow `json:"checkpoint"`
	// Written is the time from the trigger until every part was written;
	// the rest of the duration is the commit.
	Written time.Duration `json:"written_ns"`
	// Subtasks are in the job's order of their tasks, then by subtask.
	Subtasks []SubtaskRow `json:"subtasks"`
	// CriticalPath lists the subtasks whose waits decided when the
	// checkpoint's parts were all written, from a source to the subtask
	// acknowledged last ("gen#0", "count#1", ...).
	CriticalPath []string     `json:"critical_path"`
	Timeline     TimelineView `json:"timeline"`
}

// SubtaskRow is one task's part of a checkpoint, named by the head operator
// of its chain.
type SubtaskRow struct {
	Operator   string        `json:"operator"`
	Subtask    int           `json:"subtask"`
	Unaligned  bool          `json:"unaligned"`
	StartDelay time.Duration `json:"start_delay_ns"` // trigger to the first barrier seen
	Alignment  time.Duration `json:"alignment_ns"`   // first barrier to snapshot
	Sync       time.Duration `json:"sync_ns"`        // synchronous part of the snapshot
	Async      time.Duration `json:"async_ns"`       // background write of the snapshot
	Bytes      uint64        `json:"bytes"`          // state bytes written
	// InflightBytes is the in-flight data an unaligned snapshot persisted.
	InflightBytes uint64 `json:"inflight_bytes"`
	// WaitedOn names the input channel whose barrier came last, by its
	// upstream subtask ("gen#1"), and WaitedOnChannel is its index; "" and
	// -1 for a source.
	WaitedOn        string `json:"waited_on"`
	WaitedOnChannel int    `json:"waited_on_channel"`
	// Acked is when the part was written and acknowledged, from the
	// trigger.
	Acked time.Duration `json:"acked_ns"`
	// Critical says the subtask is on the checkpoint's critical path.
	Critical bool `json:"critical"`
}

// TimelineView is the barrier timeline of one checkpoint: one row per input
// channel of every subtask, and one per source subtask, with times as
// offsets from the trigger.
type TimelineView struct {
	Checkpoint uint64 `json:"checkpoint"`
	// Duration is trigger to completion; Written is trigger to the last
	// part written.
	Duration time.Duration `json:"duration_ns"`
	Written  time.Duration `json:"written_ns"`
	Rows     []TimelineRow `json:"rows"`
	// ElementID is the id of the svg element TimelineSVG draws; "timeline"
	// when empty. A page with several timelines gives each its own.
	ElementID string `json:"-"`
}

// TimelineRow is one row of a barrier timeline: an input channel of a
// subtask (From#FromSubtask → Operator#Subtask, input Channel), or a
// source subtask (Source, Channel -1). Times are offsets from the
// checkpoint's trigger; None where a time did not happen.
type TimelineRow struct {
	Label       string `json:"label"` // "gen#0 → count#1", or "gen#0 (source)"
	Source      bool   `json:"source"`
	Operator    string `json:"operator"` // the subtask's task, by its head operator
	Subtask     int    `json:"subtask"`
	Channel     int    `json:"channel"`
	From        string `json:"from,omitempty"`
	FromSubtask int    `json:"from_subtask"`
	// Unaligned says the subtask took its snapshot unaligned.
	Unaligned bool `json:"unaligned"`
	// Critical says the row is a step of the checkpoint's critical path:
	// the channel its subtask waited on, or the source it began at.
	Critical bool `json:"critical"`

	// Left is when the barrier left the producer (the upstream subtask
	// forwarded it); Arrived when the subtask first saw it; Done when the
	// channel was done with the checkpoint (the barrier read, or reached
	// by an unaligned snapshot's recording). None for a source row.
	Left    time.Duration `json:"left_ns"`
	Arrived time.Duration `json:"arrived_ns"`
	Done    time.Duration `json:"done_ns"`
	// The subtask's own times: the snapshot began at Snapshot and its
	// synchronous part took Sync; its barrier left for its outputs at
	// Forwarded (None for a sink); its background write took Async and
	// ended when the part was acknowledged, at Acked.
	Snapshot  time.Duration `json:"snapshot_ns"`
	Sync      time.Duration `json:"sync_ns"`
	Forwarded time.Duration `json:"forwarded_ns"`
	Async     time.Duration `json:"async_ns"`
	Acked     time.Duration `json:"acked_ns"`
	// InflightBytes is the channel's in-flight data the checkpoint
	// persisted (unaligned only).
	InflightBytes uint64 `json:"inflight_bytes"`
}

// DurationChart is a chart of checkpoint durations: several labelled series
// (one per mode of a comparison, say), against time or as a distribution.
type DurationChart struct {
	Title string
	// CDF draws each series as a distribution: its durations sorted,
	// against the share of its checkpoints that took at most as long.
	// Otherwise each is drawn against DurationPoint.At.
	CDF    bool
	Series []DurationSeries
	// ElementID is the id of the svg element; "durations" when empty.
	ElementID string
}

// DurationSeries is one labelled series of a DurationChart.
type DurationSeries struct {
	Label  string
	Points []DurationPoint
}

// DurationPoint is one checkpoint of a DurationSeries.
type DurationPoint struct {
	// At places the point on the time axis: the checkpoint's trigger, as
	// an offset from the series' start.
	At       time.Duration
	Duration time.Duration
	// Link, if set, is where the point leads (the checkpoint's page).
	Link string
	// Title is the point's tooltip; by default its duration.
	Title string
}
