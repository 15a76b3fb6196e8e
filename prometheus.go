package ringflow

import (
	"strconv"

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
//	ringflow_checkpoints_total{result}               result: completed, failed
//	ringflow_restarts_total                          restarts after a failure
func NewCollector(j *Job) prometheus.Collector { return &collector{job: j} }

var (
	descRecordsIn = prometheus.NewDesc("ringflow_records_in_total",
		"Records an operator subtask received.", []string{"operator", "subtask"}, nil)
	descRecordsOut = prometheus.NewDesc("ringflow_records_out_total",
		"Records an operator subtask emitted.", []string{"operator", "subtask"}, nil)
	descLate = prometheus.NewDesc("ringflow_late_records_dropped_total",
		"Records behind the watermark by more than the allowed lateness.", []string{"operator", "subtask"}, nil)
	descCheckpoints = prometheus.NewDesc("ringflow_checkpoints_total",
		"Checkpoints by result.", []string{"result"}, nil)
	descRestarts = prometheus.NewDesc("ringflow_restarts_total",
		"Restarts after a failure.", nil, nil)
)

type collector struct{ job *Job }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecordsIn, descRecordsOut, descLate, descCheckpoints, descRestarts} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.job.Metrics()
	for _, s := range m.Subtasks {
		sub := strconv.Itoa(s.Subtask)
		ch <- prometheus.MustNewConstMetric(descRecordsIn, prometheus.CounterValue, float64(s.RecordsIn), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descRecordsOut, prometheus.CounterValue, float64(s.RecordsOut), s.Operator, sub)
		ch <- prometheus.MustNewConstMetric(descLate, prometheus.CounterValue, float64(s.LateDropped), s.Operator, sub)
	}
	ch <- prometheus.MustNewConstMetric(descCheckpoints, prometheus.CounterValue, float64(m.CheckpointsCompleted), "completed")
	ch <- prometheus.MustNewConstMetric(descCheckpoints, prometheus.CounterValue, float64(m.CheckpointsFailed), "failed")
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(m.Restarts))
}
