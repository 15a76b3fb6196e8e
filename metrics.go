package ringflow

import (
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// Metrics is a snapshot of a job's counters (see Job.Metrics). Counters
// count over the job's whole life, across restarts: records a restart
// replays count again, as Flink's do.
type Metrics struct {
	// Subtasks has one entry per operator subtask that has run, in the
	// order of the job's operators, then by subtask.
	Subtasks []SubtaskMetrics
	// Checkpoints counts the job's checkpoints by outcome.
	CheckpointsCompleted, CheckpointsFailed, CheckpointsAborted int
	// Restarts counts the restarts after a failure.
	Restarts int
	// Stalls counts the task steps and synchronous parts longer than
	// Config.StallBound, by cause (see Job.Stalls).
	Stalls map[string]int64
	// Workers are the worker threads' scheduler counters (Job.WorkerStats).
	Workers []WorkerStats
	// Channels are the rings between subtasks while the job runs (none
	// before or after).
	Channels []ChannelMetrics
	// StateMappedBytes is the keyed state of plain data (no pointers in
	// key or value) that the process holds outside the Go heap, in memory
	// mapped for it: the Go runtime's statistics do not count it. It is
	// the process's, all its jobs' together.
	StateMappedBytes int64
}

// ChannelMetrics describe the ring from one operator subtask to another.
type ChannelMetrics struct {
	From, To               string
	FromSubtask, ToSubtask int
	// QueuedBytes is the ring's fill: bytes written and not yet read.
	QueuedBytes, CapacityBytes int
	// LimitBytes is the most the ring may hold now: its consumer's limit
	// with Config.Debloat, else its capacity less the control reserve.
	LimitBytes int
}

// SubtaskMetrics are the counters of one operator subtask.
type SubtaskMetrics struct {
	Operator string
	Subtask  int
	// RecordsIn and RecordsOut count the records the subtask received
	// (from its input rings, from the operator before it in its chain, or,
	// for a source, from its input) and emitted, a batch at a time.
	RecordsIn, RecordsOut int64
	// LateDropped counts records behind the watermark by more than the
	// allowed lateness (windows and joins).
	LateDropped int64
	// StepsCut counts the steps of the subtask's task, when it heads one,
	// that ran out of time part-way through an input frame.
	StepsCut int64
	// Busy, Backpressured and Idle split the time of the subtask's task
	// (shared by the operators of a chain), from each of its steps to the
	// next: busy if the step made progress, backpressured if it stopped
	// for lack of room in an output ring, idle otherwise. They add up to
	// the time from its first step to its last.
	Busy, Backpressured, Idle time.Duration
	// Watermark is the subtask's event time (zero before the first
	// watermark, and on streams without event time).
	Watermark time.Time
}

// Operator returns the counters of the named operator summed over its
// subtasks (Subtask is -1), with the least of their watermarks, and
// whether the job has such an operator.
func (m Metrics) Operator(name string) (SubtaskMetrics, bool) {
	sum, ok := SubtaskMetrics{Operator: name, Subtask: -1}, false
	for _, s := range m.Subtasks {
		if s.Operator == name {
			if !ok || s.Watermark.Before(sum.Watermark) {
				sum.Watermark = s.Watermark
			}
			ok = true
			sum.RecordsIn += s.RecordsIn
			sum.RecordsOut += s.RecordsOut
			sum.LateDropped += s.LateDropped
			sum.StepsCut += s.StepsCut
			sum.Busy += s.Busy
			sum.Backpressured += s.Backpressured
			sum.Idle += s.Idle
		}
	}
	return sum, ok
}

// Metrics returns a snapshot of the job's counters. It is safe to call at
// any time, from any goroutine, while the job runs; each counter is read
// once, so counters of one snapshot may be a batch apart.
func (j *Job) Metrics() Metrics {
	m := Metrics{StateMappedBytes: cow.MappedBytes()}
	j.metricsMu.Lock()
	for _, n := range j.nodes {
		for i, c := range j.metrics[n.name] {
			m.Subtasks = append(m.Subtasks, SubtaskMetrics{Operator: n.name, Subtask: i,
				RecordsIn: c.RecordsIn.Load(), RecordsOut: c.RecordsOut.Load(),
				LateDropped: c.LateDropped.Load(), StepsCut: c.StepsCut.Load(),
				Busy: time.Duration(c.BusyNs.Load()), Backpressured: time.Duration(c.BackpressuredNs.Load()),
				Idle: time.Duration(c.IdleNs.Load()), Watermark: watermarkTime(c.Watermark.Load())})
		}
	}
	j.metricsMu.Unlock()
	sum := j.checkpointSummary()
	m.CheckpointsCompleted, m.CheckpointsFailed, m.CheckpointsAborted = sum.completed, sum.failed, sum.aborted
	m.Restarts = j.Restarts()
	m.Stalls = j.stallCounts()
	m.Workers = j.WorkerStats()
	j.statsMu.Lock()
	for _, c := range j.channels {
		m.Channels = append(m.Channels, ChannelMetrics{From: c.from, To: c.to, FromSubtask: c.fromSubtask,
			ToSubtask: c.toSubtask, QueuedBytes: c.r.Len(), CapacityBytes: c.r.Capacity(), LimitBytes: c.r.Limit()})
	}
	j.statsMu.Unlock()
	return m
}

// watermarkTime returns watermark wm (epoch milliseconds) as a time; the
// zero time for none.
func watermarkTime(wm int64) time.Time {
	if wm <= 0 || wm == operator.MaxWatermark {
		return time.Time{}
	}
	return time.UnixMilli(wm)
}
