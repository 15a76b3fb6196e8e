package soak

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"time"
)

// Sample is what the soak saw at one Report of its child (see the package
// doc for each field's column).
type Sample struct {
	At      time.Duration // since the soak started
	Child   int           // 1, 2, ...: a kill starts the next
	RSS     RSS
	Runtime Runtime
	State   DirUsage
	Sink    DirUsage
	// CheckpointsCompleted and CheckpointsFailed count over the soak.
	CheckpointsCompleted, CheckpointsFailed int
	// Last is the latest completed checkpoint; zero before the first.
	Last           Checkpoint
	RecordsPerSec  float64
	LatencyP99     time.Duration
	LatencySamples uint64
	// Restarts, Failures and Kills count over the soak.
	Restarts, Failures, Kills int
}

// column is one column of the CSV. A level is summed up in the summary;
// the others (time, ids, counters) are not. Its values are written rounded
// to digits decimals.
type column struct {
	name   string
	level  bool
	digits int
	value  func(*Sample) float64
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// columns are the CSV's columns, in order; the package doc says what each
// holds.
var columns = []column{
	{"t_s", false, 3, func(s *Sample) float64 { return s.At.Seconds() }},
	{"child", false, 0, func(s *Sample) float64 { return float64(s.Child) }},
	{"rss_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Total) }},
	{"rss_anon_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Anon) }},
	{"rss_file_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.File) }},
	{"rss_shmem_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Shmem) }},
	{"heap_live_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.HeapLiveBytes) }},
	{"heap_objects_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.HeapObjectsBytes) }},
	{"go_held_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GoHeldBytes) }},
	{"gc_cycles", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GCCycles) }},
	{"gc_pauses", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GCPauses) }},
	{"gc_pause_max_us", true, 1, func(s *Sample) float64 { return us(s.Runtime.GCPauseMax) }},
	{"gc_assist_ms", true, 3, func(s *Sample) float64 { return ms(s.Runtime.GCAssist) }},
	{"state_bytes", true, 0, func(s *Sample) float64 { return float64(s.State.Bytes) }},
	{"state_files", true, 0, func(s *Sample) float64 { return float64(s.State.Files) }},
	{"sink_bytes", true, 0, func(s *Sample) float64 { return float64(s.Sink.Bytes) }},
	{"sink_files", true, 0, func(s *Sample) float64 { return float64(s.Sink.Files) }},
	{"ck_completed", false, 0, func(s *Sample) float64 { return float64(s.CheckpointsCompleted) }},
	{"ck_failed", false, 0, func(s *Sample) float64 { return float64(s.CheckpointsFailed) }},
	{"ck_last_id", false, 0, func(s *Sample) float64 { return float64(s.Last.ID) }},
	{"ck_last_duration_ms", true, 3, func(s *Sample) float64 { return ms(s.Last.Duration) }},
	{"ck_last_sync_max_us", true, 1, func(s *Sample) float64 { return us(s.Last.SyncMax) }},
	{"ck_last_bytes", true, 0, func(s *Sample) float64 { return float64(s.Last.BytesWritten) }},
	{"records_per_s", true, 0, func(s *Sample) float64 { return s.RecordsPerSec }},
	{"latency_p99_us", true, 1, func(s *Sample) float64 { return us(s.LatencyP99) }},
	{"latency_samples", false, 0, func(s *Sample) float64 { return float64(s.LatencySamples) }},
	{"restarts", false, 0, func(s *Sample) float64 { return float64(s.Restarts) }},
	{"failures", false, 0, func(s *Sample) float64 { return float64(s.Failures) }},
	{"kills", false, 0, func(s *Sample) float64 { return float64(s.Kills) }},
}

// Header returns the CSV's header line, without its newline.
func Header() string {
	b := make([]byte, 0, 512)
	for i, c := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c.name...)
	}
	return string(b)
}

// CSV writes Samples as CSV rows, each flushed as it is written, so that
// the file of a soak that was itself killed holds every row until then.
type CSV struct {
	w   *bufio.Writer
	row []byte
}

// NewCSV writes the header to w and returns the writer of the rows.
func NewCSV(w io.Writer) (*CSV, error) {
	c := &CSV{w: bufio.NewWriter(w)}
	c.w.WriteString(Header())
	c.w.WriteByte('\n')
	return c, c.w.Flush()
}

// Write writes s as one row.
func (c *CSV) Write(s *Sample) error {
	c.row = AppendRow(c.row[:0], s)
	c.w.Write(c.row)
	c.w.WriteByte('\n')
	return c.w.Flush()
}

// AppendRow appends s's row, without its newline, to b: each column's
// value rounded to its digits, without trailing zeros.
func AppendRow(b []byte, s *Sample) []byte {
	for i, c := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		scale := math.Pow10(c.digits)
		b = strconv.AppendFloat(b, math.Round(c.value(s)*scale)/scale, 'f', -1, 64)
	}
	return b
}
