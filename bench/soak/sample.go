package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
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
// to digits decimals; value reads a Sample's and set writes it back.
type column struct {
	name   string
	level  bool
	digits int
	value  func(*Sample) float64
	set    func(*Sample, float64)
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func fromS(v float64) time.Duration  { return time.Duration(math.Round(v * 1e9)) }
func fromMs(v float64) time.Duration { return time.Duration(math.Round(v * 1e6)) }
func fromUs(v float64) time.Duration { return time.Duration(math.Round(v * 1e3)) }

// columns are the CSV's columns, in order; the package doc says what each
// holds.
var columns = []column{
	{"t_s", false, 3, func(s *Sample) float64 { return s.At.Seconds() },
		func(s *Sample, v float64) { s.At = fromS(v) }},
	{"child", false, 0, func(s *Sample) float64 { return float64(s.Child) },
		func(s *Sample, v float64) { s.Child = int(v) }},
	{"rss_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Total) },
		func(s *Sample, v float64) { s.RSS.Total = uint64(v) }},
	{"rss_anon_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Anon) },
		func(s *Sample, v float64) { s.RSS.Anon = uint64(v) }},
	{"rss_file_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.File) },
		func(s *Sample, v float64) { s.RSS.File = uint64(v) }},
	{"rss_shmem_bytes", true, 0, func(s *Sample) float64 { return float64(s.RSS.Shmem) },
		func(s *Sample, v float64) { s.RSS.Shmem = uint64(v) }},
	{"heap_live_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.HeapLiveBytes) },
		func(s *Sample, v float64) { s.Runtime.HeapLiveBytes = uint64(v) }},
	{"heap_objects_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.HeapObjectsBytes) },
		func(s *Sample, v float64) { s.Runtime.HeapObjectsBytes = uint64(v) }},
	{"go_held_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GoHeldBytes) },
		func(s *Sample, v float64) { s.Runtime.GoHeldBytes = uint64(v) }},
	{"gc_cycles", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GCCycles) },
		func(s *Sample, v float64) { s.Runtime.GCCycles = uint64(v) }},
	{"gc_pauses", true, 0, func(s *Sample) float64 { return float64(s.Runtime.GCPauses) },
		func(s *Sample, v float64) { s.Runtime.GCPauses = uint64(v) }},
	{"gc_pause_max_us", true, 1, func(s *Sample) float64 { return us(s.Runtime.GCPauseMax) },
		func(s *Sample, v float64) { s.Runtime.GCPauseMax = fromUs(v) }},
	{"gc_assist_ms", true, 3, func(s *Sample) float64 { return ms(s.Runtime.GCAssist) },
		func(s *Sample, v float64) { s.Runtime.GCAssist = fromMs(v) }},
	{"state_bytes", true, 0, func(s *Sample) float64 { return float64(s.State.Bytes) },
		func(s *Sample, v float64) { s.State.Bytes = uint64(v) }},
	{"state_files", true, 0, func(s *Sample) float64 { return float64(s.State.Files) },
		func(s *Sample, v float64) { s.State.Files = int(v) }},
	{"sink_bytes", true, 0, func(s *Sample) float64 { return float64(s.Sink.Bytes) },
		func(s *Sample, v float64) { s.Sink.Bytes = uint64(v) }},
	{"sink_files", true, 0, func(s *Sample) float64 { return float64(s.Sink.Files) },
		func(s *Sample, v float64) { s.Sink.Files = int(v) }},
	{"ck_completed", false, 0, func(s *Sample) float64 { return float64(s.CheckpointsCompleted) },
		func(s *Sample, v float64) { s.CheckpointsCompleted = int(v) }},
	{"ck_failed", false, 0, func(s *Sample) float64 { return float64(s.CheckpointsFailed) },
		func(s *Sample, v float64) { s.CheckpointsFailed = int(v) }},
	{"ck_last_id", false, 0, func(s *Sample) float64 { return float64(s.Last.ID) },
		func(s *Sample, v float64) { s.Last.ID = uint64(v) }},
	{"ck_last_duration_ms", true, 3, func(s *Sample) float64 { return ms(s.Last.Duration) },
		func(s *Sample, v float64) { s.Last.Duration = fromMs(v) }},
	{"ck_last_sync_max_us", true, 1, func(s *Sample) float64 { return us(s.Last.SyncMax) },
		func(s *Sample, v float64) { s.Last.SyncMax = fromUs(v) }},
	{"ck_last_bytes", true, 0, func(s *Sample) float64 { return float64(s.Last.BytesWritten) },
		func(s *Sample, v float64) { s.Last.BytesWritten = uint64(v) }},
	{"records_per_s", true, 0, func(s *Sample) float64 { return s.RecordsPerSec },
		func(s *Sample, v float64) { s.RecordsPerSec = v }},
	{"latency_p99_us", true, 1, func(s *Sample) float64 { return us(s.LatencyP99) },
		func(s *Sample, v float64) { s.LatencyP99 = fromUs(v) }},
	{"latency_samples", false, 0, func(s *Sample) float64 { return float64(s.LatencySamples) },
		func(s *Sample, v float64) { s.LatencySamples = uint64(v) }},
	{"restarts", false, 0, func(s *Sample) float64 { return float64(s.Restarts) },
		func(s *Sample, v float64) { s.Restarts = int(v) }},
	{"failures", false, 0, func(s *Sample) float64 { return float64(s.Failures) },
		func(s *Sample, v float64) { s.Failures = int(v) }},
	{"kills", false, 0, func(s *Sample) float64 { return float64(s.Kills) },
		func(s *Sample, v float64) { s.Kills = int(v) }},
	// Columns from here on were added later: a CSV without them reads,
	// as zeros.
	{"state_mapped_bytes", true, 0, func(s *Sample) float64 { return float64(s.Runtime.StateMappedBytes) },
		func(s *Sample, v float64) { s.Runtime.StateMappedBytes = uint64(v) }},
}

// requiredColumns is how many of the columns every CSV has.
const requiredColumns = 29

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

// ReadCSV reads what CSV writes: the header, then a Sample a row. A line
// that CSV would not have written (a header of other columns, a row with
// a cell too many or too few, a cell that is not a number the column can
// hold, a time before the previous row's) is an error that names it by
// its line number and its column. Empty lines are skipped.
func ReadCSV(r io.Reader) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	line := 0
	next := func() (string, bool) {
		for sc.Scan() {
			line++
			if text := strings.TrimSuffix(sc.Text(), "\r"); text != "" {
				return text, true
			}
		}
		return "", false
	}
	header, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("no header: the file is empty")
	}
	n, err := checkHeader(header)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", line, err)
	}
	var samples []Sample
	for {
		row, ok := next()
		if !ok {
			break
		}
		s, err := parseRow(row, n)
		if err == nil && len(samples) > 0 && s.At < samples[len(samples)-1].At {
			err = fmt.Errorf("column 1 (t_s): %v s, before the previous row's %v s",
				s.At.Seconds(), samples[len(samples)-1].At.Seconds())
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		samples = append(samples, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("after line %d: %w", line, err)
	}
	return samples, nil
}

// checkHeader checks that header is the one CSV writes.
func checkHeader(header string) (int, error) {
	names := strings.Split(header, ",")
	for i, c := range columns {
		if i >= requiredColumns && i == len(names) {
			return i, nil
		}
		if i >= len(names) || names[i] != c.name {
			got := "nothing"
			if i < len(names) {
				got = strconv.Quote(names[i])
			}
			return 0, fmt.Errorf("column %d of the header is %s, want %q: not a soak's CSV, or of another version", i+1, got, c.name)
		}
	}
	if len(names) > len(columns) {
		return 0, fmt.Errorf("the header has %d columns, want %d: not a soak's CSV, or of another version", len(names), len(columns))
	}
	return len(columns), nil
}

// parseRow parses one row of a CSV of the first n columns.
func parseRow(row string, n int) (Sample, error) {
	var s Sample
	cells := strings.Split(row, ",")
	if len(cells) != n {
		return s, fmt.Errorf("%d cells, want one per column: %d", len(cells), n)
	}
	for i, c := range columns[:n] {
		v, err := strconv.ParseFloat(cells[i], 64)
		switch {
		case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
			err = fmt.Errorf("%q is not a number", cells[i])
		case v < 0:
			err = fmt.Errorf("%q is negative", cells[i])
		case c.digits == 0 && v != math.Trunc(v):
			err = fmt.Errorf("%q is not a whole number", cells[i])
		default:
			c.set(&s, v)
			// NB: a value the field cannot hold does not read back.
			if back := c.value(&s); math.Abs(back-v) > 1e-6*max(1, v) {
				err = fmt.Errorf("%q is out of range", cells[i])
			}
		}
		if err != nil {
			return s, fmt.Errorf("column %d (%s): %w", i+1, c.name, err)
		}
	}
	return s, nil
}
