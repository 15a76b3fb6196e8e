package ringflow

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringflow/ringflow/internal/statusui"
)

// Tunables of the status pages.
const (
	// statusHistoryLimit is how many checkpoints the history shows by
	// default: the newest. A long run holds thousands, and a page of
	// thousands of rows is slow to draw and to read; ?limit=0 shows all.
	statusHistoryLimit = 200
	// statusRefresh is how often the overview and the history reload
	// themselves; ?refresh=0 stops them.
	statusRefresh = 5 * time.Second
	// statusMinRateInterval is the shortest interval the overview's rates
	// cover: a view sooner after the one before is measured from an
	// older one, so that two viewers, or a reload, do not make rates of a
	// few milliseconds (a handful of batches).
	statusMinRateInterval = time.Second
)

// StatusHandler returns an http.Handler that serves j's status pages and
// metrics:
//
//	/                       the overview: the job graph, each operator coloured by its
//	                        busy and backpressured share, records/s, watermarks
//	/checkpoints            the checkpoint history (?limit=N, 0: all; default the newest 200)
//	/checkpoints/{id}       one checkpoint: its subtasks and its barrier timeline
//	/api/overview           the same views as JSON
//	/api/checkpoints
//	/api/checkpoints/{id}
//	/metrics                Prometheus metrics (NewCollector) and the Go runtime's
//
// The pages are HTML with inline SVG and CSS: complete without JavaScript,
// nothing fetched from elsewhere, every link relative, so the handler may
// be mounted under a prefix with http.StripPrefix. The overview and the
// history reload themselves every 5 seconds (?refresh=N seconds, 0:
// never).
//
// The handler may be used before j runs, while it runs, and after it has
// ended, from any goroutine; it computes nothing until a page is asked for.
// The overview's rates cover the interval since the view before (at least
// a second; the first view covers each subtask's whole life), so that a
// page left reloading shows what the job does now.
//
// A checkpoint's id may recur in the history: a checkpoint aborted by a
// failure leaves its id unused in the store, and the attempt after the
// restore takes it again. /checkpoints/{id} shows the latest.
func StatusHandler(j *Job) http.Handler {
	s := &statusServer{job: j}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(j), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.overviewPage)
	mux.HandleFunc("GET /checkpoints", s.checkpointsPage)
	mux.HandleFunc("GET /checkpoints/{id}", s.checkpointPage)
	mux.HandleFunc("GET /api/overview", s.overviewJSON)
	mux.HandleFunc("GET /api/checkpoints", s.checkpointsJSON)
	mux.HandleFunc("GET /api/checkpoints/{id}", s.checkpointJSON)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// statusServer serves the status pages of one job.
type statusServer struct {
	job *Job
	mu  struct {
		sync.Mutex
		// bases are the metrics of earlier overviews the rates are
		// measured from, oldest first: at most two, each at least
		// statusMinRateInterval after the one before.
		bases []metricsAt
	}
}

type metricsAt struct {
	m  Metrics
	at time.Time
}

func (s *statusServer) overviewPage(w http.ResponseWriter, r *http.Request) {
	writePage(w, func(w io.Writer) error {
		return statusui.WriteOverview(w, s.overview(time.Now()), refreshOf(r))
	})
}

func (s *statusServer) overviewJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.overview(time.Now()))
}

func (s *statusServer) checkpointsPage(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v := s.checkpoints(limit)
	writePage(w, func(w io.Writer) error { return statusui.WriteCheckpoints(w, v, refreshOf(r)) })
}

func (s *statusServer) checkpointsJSON(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, s.checkpoints(limit))
}

func (s *statusServer) checkpointPage(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.checkpoint(w, r); ok {
		writePage(w, func(w io.Writer) error { return statusui.WriteCheckpoint(w, v) })
	}
}

func (s *statusServer) checkpointJSON(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.checkpoint(w, r); ok {
		writeJSON(w, v)
	}
}

// checkpoint returns the view of the checkpoint r names, or replies 404
// naming the id.
func (s *statusServer) checkpoint(w http.ResponseWriter, r *http.Request) (statusui.CheckpointView, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("no checkpoint %q: a checkpoint id is a number", raw), http.StatusNotFound)
		return statusui.CheckpointView{}, false
	}
	cps := s.job.Checkpoints()
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i].ID == id {
			return checkpointView(cps[i], operatorOrder(s.job.Graph())), true
		}
	}
	msg := fmt.Sprintf("no checkpoint %d in the history", id)
	if len(cps) > 0 {
		msg += fmt.Sprintf(" (it holds %d to %d)", slices.MinFunc(cps, byID).ID, slices.MaxFunc(cps, byID).ID)
	} else {
		msg += " (no checkpoint has ended yet)"
	}
	http.Error(w, msg, http.StatusNotFound)
	return statusui.CheckpointView{}, false
}

func byID(a, b CheckpointStats) int { return cmp.Compare(a.ID, b.ID) }

// writePage renders a page into a buffer first, so that a failure is an
// error reply, not half a page.
func writePage(w http.ResponseWriter, render func(io.Writer) error) {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "status json: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}

// refreshOf returns the reload interval a request asks for with
// ?refresh=N (seconds; 0: never), or the default.
func refreshOf(r *http.Request) time.Duration {
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	return statusRefresh
}

// limitOf returns how many checkpoints a request asks for with ?limit=N
// (0: all), or the default.
func limitOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return statusHistoryLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("limit %q: want a number of checkpoints, 0 for all", v)
	}
	return n, nil
}

// overview returns the overview at now, its rates measured from an earlier
// view's metrics, and keeps now's for later views.
func (s *statusServer) overview(now time.Time) statusui.OverviewView {
	m := s.job.Metrics()
	g := s.job.Graph()
	cps := s.job.Checkpoints()
	s.mu.Lock()
	base, ok := s.rateBase(now)
	if n := len(s.mu.bases); n == 0 || now.Sub(s.mu.bases[n-1].at) >= statusMinRateInterval {
		s.mu.bases = append(s.mu.bases, metricsAt{m, now})
		if len(s.mu.bases) > 2 {
			s.mu.bases = s.mu.bases[1:]
		}
	}
	s.mu.Unlock()
	v := overviewView(g, m, base, ok, now)
	v.CheckpointsCompleted, v.CheckpointsFailed, v.CheckpointsAborted = m.CheckpointsCompleted,
		m.CheckpointsFailed, m.CheckpointsAborted
	v.Restarts = m.Restarts
	if len(cps) > 0 {
		last := checkpointRow(cps[len(cps)-1])
		v.LastCheckpoint = &last
	}
	return v
}

// rateBase returns the newest kept metrics at least statusMinRateInterval
// older than now, or else the oldest kept; false if none is kept. s.mu is
// held.
func (s *statusServer) rateBase(now time.Time) (metricsAt, bool) {
	bases := s.mu.bases
	for i := len(bases) - 1; i >= 0; i-- {
		if now.Sub(bases[i].at) >= statusMinRateInterval {
			return bases[i], true
		}
	}
	if len(bases) > 0 {
		return bases[0], true
	}
	return metricsAt{}, false
}

// overviewView returns the overview of graph g with metrics m at now, its
// rates measured since base; over each subtask's life without one.
func overviewView(g Graph, m Metrics, base metricsAt, hasBase bool, now time.Time) statusui.OverviewView {
	v := statusui.OverviewView{Generated: now, Lifetime: !hasBase}
	if hasBase {
		v.Interval = now.Sub(base.at)
	}
	before := map[subtaskKey]SubtaskMetrics{}
	for _, s := range base.m.Subtasks {
		before[subtaskKey{s.Operator, s.Subtask}] = s
	}
	for _, op := range g.Operators {
		ov := statusui.OperatorView{Name: op.Name, Kind: op.Kind, Parallelism: op.Parallelism, Keyed: op.Keyed,
			Task: op.Task}
		var sum SubtaskMetrics
		for _, s := range m.Subtasks {
			if s.Operator != op.Name {
				continue
			}
			d := subtaskDelta(s, before[subtaskKey{s.Operator, s.Subtask}])
			elapsed := v.Interval
			if !hasBase {
				elapsed = d.Busy + d.Backpressured + d.Idle // the subtask's life
			}
			ov.Subtasks = append(ov.Subtasks, statusui.SubtaskRates{Subtask: s.Subtask, Rates: ratesOf(d, elapsed)})
			if len(ov.Subtasks) == 1 || s.Watermark.Before(sum.Watermark) {
				sum.Watermark = s.Watermark
			}
			sum.Busy += d.Busy
			sum.Backpressured += d.Backpressured
			sum.Idle += d.Idle
		}
		ov.Rates = ratesOf(sum, 0) // the shares of the subtasks' time together
		for _, st := range ov.Subtasks {
			ov.RecordsInPerSecond += st.RecordsInPerSecond
			ov.RecordsOutPerSecond += st.RecordsOutPerSecond
		}
		v.Operators = append(v.Operators, ov)
	}
	for _, e := range g.Edges {
		ev := statusui.EdgeView{From: e.From, To: e.To, Partitioning: e.Partitioning, Port: e.Port, Chained: e.Chained}
		for _, c := range m.Channels {
			if c.From == e.From && c.To == e.To {
				ev.QueuedBytes += c.QueuedBytes
				ev.CapacityBytes += c.CapacityBytes
			}
		}
		v.Edges = append(v.Edges, ev)
	}
	return v
}

// subtaskDelta returns the counters of s less those of before (the zero
// value for none), and s's watermark.
func subtaskDelta(s, before SubtaskMetrics) SubtaskMetrics {
	return SubtaskMetrics{Operator: s.Operator, Subtask: s.Subtask,
		RecordsIn: s.RecordsIn - before.RecordsIn, RecordsOut: s.RecordsOut - before.RecordsOut,
		Busy: s.Busy - before.Busy, Backpressured: s.Backpressured - before.Backpressured, Idle: s.Idle - before.Idle,
		Watermark: s.Watermark}
}

// ratesOf returns the rates of counters d over elapsed.
func ratesOf(d SubtaskMetrics, elapsed time.Duration) statusui.Rates {
	r := statusui.Rates{Watermark: d.Watermark}
	if elapsed > 0 {
		r.RecordsInPerSecond = float64(d.RecordsIn) / elapsed.Seconds()
		r.RecordsOutPerSecond = float64(d.RecordsOut) / elapsed.Seconds()
	}
	if total := d.Busy + d.Backpressured + d.Idle; total > 0 {
		r.BusyShare = float64(d.Busy) / float64(total)
		r.BackpressuredShare = float64(d.Backpressured) / float64(total)
		r.IdleShare = float64(d.Idle) / float64(total)
	}
	return r
}

// checkpoints returns the history view of the job's checkpoints: those the
// job keeps (the latest keptCheckpoints), with the counts by outcome of all
// it took.
func (s *statusServer) checkpoints(limit int) statusui.CheckpointsView {
	v := checkpointsView(s.job.Checkpoints(), limit, time.Now())
	sum := s.job.checkpointSummary()
	v.Completed, v.Failed, v.Aborted = sum.completed, sum.failed, sum.aborted
	return v
}

// checkpointsView returns the history view of cps (oldest first): the
// newest limit (0: all), newest first.
func checkpointsView(cps []CheckpointStats, limit int, now time.Time) statusui.CheckpointsView {
	v := statusui.CheckpointsView{Generated: now, Total: len(cps), Limit: limit}
	for _, c := range cps {
		switch resultOf(c.Status) {
		case "completed":
			v.Completed++
		case "failed":
			v.Failed++
		case "aborted":
			v.Aborted++
		}
	}
	shown := cps
	if limit > 0 && len(shown) > limit {
		shown = shown[len(shown)-limit:]
	}
	v.Checkpoints = make([]statusui.CheckpointRow, 0, len(shown))
	for i := len(shown) - 1; i >= 0; i-- {
		v.Checkpoints = append(v.Checkpoints, checkpointRow(shown[i]))
	}
	return v
}

// resultOf returns the first word of a checkpoint's status.
func resultOf(status string) string {
	if i := strings.IndexByte(status, ':'); i >= 0 {
		return status[:i]
	}
	return status
}

func checkpointRow(c CheckpointStats) statusui.CheckpointRow {
	row := statusui.CheckpointRow{ID: c.ID, Final: c.Final, Trigger: c.Trigger, Duration: c.Duration,
		BytesWritten: c.BytesWritten, BytesReused: c.BytesReused, Status: c.Status, Result: resultOf(c.Status)}
	if len(c.Subtasks) > 0 {
		row.Kind = "aligned"
		if c.Unaligned() {
			row.Kind = "unaligned"
		}
	}
	for _, st := range c.Subtasks {
		row.InflightBytes += st.InflightBytes
		if row.Slowest == "" || st.Acked > row.SlowestAcked {
			row.Slowest, row.SlowestAcked = subtaskName(st.Operator, st.Subtask), st.Acked
		}
	}
	return row
}

func subtaskName(op string, sub int) string { return op + "#" + strconv.Itoa(sub) }

// operatorOrder numbers the job's operators in their (topological) order.
func operatorOrder(g Graph) map[string]int {
	order := make(map[string]int, len(g.Operators))
	for i, op := range g.Operators {
		order[op.Name] = i
	}
	return order
}

// sortedSubtasks returns c's subtasks in the job's order of their tasks
// (order; unknown ones last), then by subtask.
func sortedSubtasks(c CheckpointStats, order map[string]int) []SubtaskCheckpointStats {
	rank := func(op string) int {
		if i, ok := order[op]; ok {
			return i
		}
		return len(order)
	}
	subs := slices.Clone(c.Subtasks)
	slices.SortStableFunc(subs, func(a, b SubtaskCheckpointStats) int {
		if d := rank(a.Operator) - rank(b.Operator); d != 0 {
			return d
		}
		if a.Operator != b.Operator {
			return strings.Compare(a.Operator, b.Operator)
		}
		return a.Subtask - b.Subtask
	})
	return subs
}

// checkpointView returns the page of checkpoint c; order is the job's
// operators' (operatorOrder).
func checkpointView(c CheckpointStats, order map[string]int) statusui.CheckpointView {
	v := statusui.CheckpointView{Checkpoint: checkpointRow(c), Written: c.Written}
	onPath := map[subtaskKey]int{} // the channel each step waited on
	for _, step := range c.CriticalPath() {
		onPath[subtaskKey{step.Operator, step.Subtask}] = step.Channel
		v.CriticalPath = append(v.CriticalPath, subtaskName(step.Operator, step.Subtask))
	}
	subs := sortedSubtasks(c, order)
	forwarded := map[subtaskKey]time.Duration{}
	for _, st := range subs {
		forwarded[subtaskKey{st.Operator, st.Subtask}] = st.Forwarded
	}
	v.Timeline = statusui.TimelineView{Checkpoint: c.ID, Duration: c.Duration, Written: c.Written}
	for _, st := range subs {
		channel, critical := onPath[subtaskKey{st.Operator, st.Subtask}]
		row := statusui.SubtaskRow{Operator: st.Operator, Subtask: st.Subtask, Unaligned: st.Unaligned,
			StartDelay: st.StartDelay, Alignment: st.Alignment, Sync: st.Sync, Async: st.Async, Bytes: st.Bytes,
			InflightBytes: st.InflightBytes, WaitedOnChannel: st.WaitedOn, Acked: st.Acked, Critical: critical}
		if c := st.WaitedOn; c >= 0 && c < len(st.Inputs) {
			row.WaitedOn = subtaskName(st.Inputs[c].From, st.Inputs[c].FromSubtask)
		}
		v.Subtasks = append(v.Subtasks, row)
		v.Timeline.Rows = append(v.Timeline.Rows, timelineRows(st, forwarded, critical, channel)...)
	}
	return v
}

// subtaskKey names a subtask by its operator (for checkpoint statistics,
// its task's head operator).
type subtaskKey struct {
	op  string
	sub int
}

// timelineRows returns the timeline rows of subtask st: one per input
// channel, or, for a source, one of its own. forwarded holds when each
// subtask of the checkpoint forwarded its barrier; critical says st is on
// the critical path, waiting on channel.
func timelineRows(st SubtaskCheckpointStats, forwarded map[subtaskKey]time.Duration, critical bool,
	channel int) []statusui.TimelineRow {
	name := subtaskName(st.Operator, st.Subtask)
	base := statusui.TimelineRow{Operator: st.Operator, Subtask: st.Subtask, Channel: -1, Unaligned: st.Unaligned,
		Snapshot: st.Snapshot, Sync: st.Sync, Forwarded: st.Forwarded, Async: st.Async, Acked: st.Acked,
		Left: statusui.None, Arrived: statusui.None, Done: statusui.None}
	if st.Forwarded == 0 {
		base.Forwarded = statusui.None // a sink forwards nothing
	}
	if len(st.Inputs) == 0 {
		row := base
		row.Source, row.Critical = st.WaitedOn < 0, critical
		row.Label = name + " (source)"
		if !row.Source {
			row.Label = name + " (no channel statistics)"
		}
		return []statusui.TimelineRow{row}
	}
	rows := make([]statusui.TimelineRow, 0, len(st.Inputs))
	for i, in := range st.Inputs {
		row := base
		row.Label = subtaskName(in.From, in.FromSubtask) + " → " + name
		row.Channel, row.From, row.FromSubtask = i, in.From, in.FromSubtask
		row.Critical = critical && channel == i
		row.Arrived, row.Done, row.InflightBytes = in.Arrived, in.Done, in.InflightBytes
		if f := forwarded[subtaskKey{in.From, in.FromSubtask}]; f > 0 {
			row.Left = f
		}
		rows = append(rows, row)
	}
	return rows
}
