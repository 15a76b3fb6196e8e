package ringflow

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewCollector returns a Prometheus collector of j's metrics (Job.Metrics),
// read once per scrape. Register it with a prometheus.Registry and serve
// that with promhttp.HandlerFor. The names follow Prometheus's
// conventions and Flink's meanings:
//
//	ringflow_records_in_total{operator, subtask}     records received
//	ringflow_records_out_total{operator, subtask}    records emitted
//	ringflow_late_records_dropped_total{operator, subtask}
//	ringflow_busy_seconds_total{operator, subtask}           time with work
//	ringflow_backpressured_seconds_total{operator, subtask}  stopped by a full output
//	ringflow_idle_seconds_total{operator, subtask}           time with nothing to do
//	ringflow_watermark_lag_seconds{operator, subtask}        now less the subtask's event
//	                                                         time (none before its first)
//	ringflow_checkpoints_total{result}               result: completed, failed, aborted
//	ringflow_restarts_total                          restarts after a failure
//	ringflow_state_mapped_bytes                      keyed state outside the Go heap (the process's)
//	ringflow_stalls_total{cause}                     steps and synchronous parts over Config.StallBound (Job.Stalls)
//	ringflow_worker_parks_total{worker}              sleeps with nothing to do
//	ringflow_worker_preempted_total{worker}          switched out while runnable
//	ringflow_channel_queued_bytes{from, to}          a ring's fill; from and to are
//	                                                 "operator#subtask"
//	ringflow_channel_limit_bytes{from, to}           the most the ring may hold now
//	                                                 (its debloat limit: Config.Debloat)
//
// and, from the completed checkpoints (Job.Checkpoints), histograms in
// seconds of each checkpoint's duration and of each subtask's part of it,
// and the figures of the last one:
//
//	ringflow_checkpoint_duration_seconds             trigger to completion
//	ringflow_checkpoint_start_delay_seconds          trigger to a subtask's first barrier
//	ringflow_checkpoint_alignment_seconds            first barrier to snapshot
//	ringflow_checkpoint_sync_seconds                 the synchronous part
//	ringflow_checkpoint_async_seconds                the write of the subtask's part
//	ringflow_checkpoint_size_bytes                   bytes the last one wrote
//	ringflow_checkpoint_persisted_inflight_bytes     in-flight data it persisted
//	ringflow_last_checkpoint_completed_timestamp_seconds
func NewCollector(j *Job) prometheus.Collector { return &collector{job: j} }

var (
	descRecordsIn = prometheus.NewDesc("ringflow_records_in_total",
		"Records an operator subtask received.", []string{"operator", "subtask"}, nil)
	descRecordsOut = prometheus.NewDesc("ringflow_records_out_total",
		"Records an operator subtask emitted.", []string{"operator", "subtask"}, nil)
	descLate = prometheus.NewDesc("ringflow_late_records_dropped_total",
		"Records behind the watermark by more than the allowed lateness.", []string{"operator", "subtask"}, nil)
	descBusy = prometheus.NewDesc("ringflow_busy_seconds_total",
		"Time an operator subtask's task had work.", []string{"operator", "subtask"}, nil)
	descBackpressured = prometheus.NewDesc("ringflow_backpressured_seconds_total",
		"Time an operator subtask's task was stopped by a full output ring.", []string{"operator", "subtask"}, nil)
	descIdle = prometheus.NewDesc("ringflow_idle_seconds_total",
		"Time an operator subtask's task had nothing to do.", []string{"operator", "subtask"}, nil)
	descLag = prometheus.NewDesc("ringflow_watermark_lag_seconds",
		"How far an operator subtask's watermark is behind the wall clock.", []string{"operator", "subtask"}, nil)
	descCheckpoints = prometheus.NewDesc("ringflow_checkpoints_total",
		"Checkpoints by result.", []string{"result"}, nil)
	descRestarts = prometheus.NewDesc("ringflow_restarts_total",
		"Restarts after a failure.", nil, nil)
	descStateMapped = prometheus.NewDesc("ringflow_state_mapped_bytes",
		"Keyed state the process holds outside the Go heap, all its jobs together.", nil, nil)
	descParks = prometheus.NewDesc("ringflow_worker_parks_total",
		"Times a worker slept with nothing to do.", []string{"worker"}, nil)
	descPreempted = prometheus.NewDesc("ringflow_worker_preempted_total",
		"Times a worker's thread was switched out while it could run.", []string{"worker"}, nil)
	descStalls = prometheus.NewDesc("ringflow_stalls_total",
		"Task steps and checkpoints' synchronous parts longer than the stall bound, by the likeliest cause.", []string{"cause"}, nil)
	descQueued = prometheus.NewDesc("ringflow_channel_queued_bytes",
		"Bytes written into a ring between two subtasks and not yet read.", []string{"from", "to"}, nil)
	descLimit = prometheus.NewDesc("ringflow_channel_limit_bytes",
		"Bytes a ring between two subtasks may hold now: its consumer's debloat limit, or its capacity less the control reserve.",
		[]string{"from", "to"}, nil)
	descCkDuration = prometheus.NewDesc("ringflow_checkpoint_duration_seconds",
		"Completed checkpoints, trigger to completion.", nil, nil)
	descCkStartDelay = prometheus.NewDesc("ringflow_checkpoint_start_delay_seconds",
		"Subtasks of completed checkpoints: trigger to the first barrier.", nil, nil)
	descCkAlignment = prometheus.NewDesc("ringflow_checkpoint_alignment_seconds",
		"Subtasks of completed checkpoints: first barrier to snapshot.", nil, nil)
	descCkSync = prometheus.NewDesc("ringflow_checkpoint_sync_seconds",
		"Subtasks of completed checkpoints: the synchronous part.", nil, nil)
	descCkAsync = prometheus.NewDesc("ringflow_checkpoint_async_seconds",
		"Subtasks of completed checkpoints: the write of the part.", nil, nil)
	descCkSize = prometheus.NewDesc("ringflow_checkpoint_size_bytes",
		"Bytes the last completed checkpoint wrote.", nil, nil)
	descCkInflight = prometheus.NewDesc("ringflow_checkpoint_persisted_inflight_bytes",
		"In-flight data the last completed checkpoint persisted.", nil, nil)
	descCkLast = prometheus.NewDesc("ringflow_last_checkpoint_completed_timestamp_seconds",
		"When the last checkpoint completed, in Unix seconds.", nil, nil)
)

// checkpointBuckets are the upper bounds, in seconds, of the checkpoint
// histograms: 100µs to ~26s, each four times the last.
var checkpointBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// histogram accumulates observations into checkpointBuckets.
type histogram struct {
	counts map[float64]uint64
	n      uint64
	sum    float64
}

func (h *histogram) observe(d time.Duration) {
	if h.counts == nil {
		h.counts = map[float64]uint64{}
	}
	v := d.Seconds()
	for _, b := range checkpointBuckets {
		if v <= b {
			h.counts[b]++ // NB: cumulative, as Prometheus's buckets are
		}
	}
	h.n++
	h.sum += v
}

func (h *histogram) metric(d *prometheus.Desc) prometheus.Metric {
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, h.counts)
}

type collector struct{ job *Job }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecordsIn, descRecordsOut, descLate, descBusy, descBackpressured, descIdle,
		descLag, descCheckpoints, descRestarts, descStateMapped, descStalls,
		descParks, descPreempted, descQueued, descLimit, descCkDuration, descCkStartDelay, descCkAlignment, descCkSync, descCkAsync,
		descCkSize, descCkInflight, descCkLast} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m, now := c.job.Metrics(), time.Now()
	for _, s := range m.Subtasks {
		sub := strconv.Itoa(s.Subtask)
		ch <- prometheus.MustNewConstMetric(descRecordsIn, prometheus.CounterValue, float64(s.RecordsIn), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descRecordsOut, prometheus.CounterValue, float64(s.RecordsOut), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descLate, prometheus.CounterValue, float64(s.LateDropped), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, s.Busy.Seconds(), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descBackpressured, prometheus.CounterValue, s.Backpressured.Seconds(), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descIdle, prometheus.CounterValue, s.Idle.Seconds(), s.Operator, sub)
		if !s.Watermark.IsZero() {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, now.Sub(s.Watermark).Seconds(), s.Operator, sub)
		}
	}
	ch <- prometheus.MustNewConstMetric(descCheckpoints, prometheus.CounterValue, float64(m.CheckpointsCompleted), "completed")
	ch <- prometheus.MustNewConstMetric(descCheckpoints, prometheus.CounterValue, float64(m.CheckpointsFailed), "failed")
	ch <- prometheus.MustNewConstMetric(descCheckpoints, prometheus.CounterValue, float64(m.CheckpointsAborted), "aborted")
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(m.Restarts))
	ch <- prometheus.MustNewConstMetric(descStateMapped, prometheus.GaugeValue, float64(m.StateMappedBytes))
	for cause, n := range m.Stalls {
		ch <- prometheus.MustNewConstMetric(descStalls, prometheus.CounterValue, float64(n), cause)
	}
	for i, w := range m.Workers {
		id := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(descParks, prometheus.CounterValue, float64(w.Parks), id)
		ch <- prometheus.MustNewConstMetric(descPreempted, prometheus.CounterValue, float64(w.Preempted), id)
	}
	for _, q := range m.Channels {
		from, to := q.From+"#"+strconv.Itoa(q.FromSubtask), q.To+"#"+strconv.Itoa(q.ToSubtask)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(q.QueuedBytes), from, to)
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(q.LimitBytes), from, to)
	}
	c.collectCheckpoints(ch)
}

// collectCheckpoints sends the checkpoint histograms, over every completed
// checkpoint, and the last completed checkpoint's figures.
func (c *collector) collectCheckpoints(ch chan<- prometheus.Metric) {
	sum := c.job.checkpointSummary()
	ch <- sum.duration.metric(descCkDuration)
	ch <- sum.startDelay.metric(descCkStartDelay)
	ch <- sum.alignment.metric(descCkAlignment)
	ch <- sum.sync.metric(descCkSync)
	ch <- sum.async.metric(descCkAsync)
	last := sum.last
	if last == nil {
		return
	}
	var inflight uint64
	for _, s := range last.Subtasks {
		inflight += s.InflightBytes
	}
	ch <- prometheus.MustNewConstMetric(descCkSize, prometheus.GaugeValue, float64(last.BytesWritten))
	ch <- prometheus.MustNewConstMetric(descCkInflight, prometheus.GaugeValue, float64(inflight))
	done := last.Trigger.Add(last.Duration)
	ch <- prometheus.MustNewConstMetric(descCkLast, prometheus.GaugeValue, float64(done.UnixNano())/1e9)
}
