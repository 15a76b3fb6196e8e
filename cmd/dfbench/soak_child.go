package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/pipelines"
	"github.com/ringflow/ringflow/bench/soak"
)

// runSoakChild runs the job spec describes, as the child of a soak: it
// fails a task at each "fail" line on stdin, ends the sources when stdin
// ends, and writes a soak.Report on stdout every spec's interval and once
// more, with End, when the job has finished.
func runSoakChild(spec string, stdin io.Reader, stdout io.Writer) error {
	var j soakJob
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return fmt.Errorf("--child %q: %w", spec, err)
	}
	c := j.config()
	// NB: a new handler, not the default one wrapped: the default writes
	// through package log, which SetDefault sends back to this handler.
	slog.SetDefault(slog.New(injectedFilter{slog.NewTextHandler(os.Stderr, nil)}))
	ctl, live := &pipelines.Control{}, &pipelines.LiveHistogram{}
	c.Control, c.LiveLatency = ctl, live
	r := &childReporter{enc: json.NewEncoder(stdout), ctl: ctl, live: live, rt: soak.NewRuntimeReader(), last: time.Now()}
	c.OnJob = func(job *ringflow.Job) { r.job.Store(job) }
	go obey(stdin, ctl)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		r.every(j.Interval, done)
	}()
	_, err := pipelines.Run(context.Background(), c)
	close(done)
	<-exited
	if err != nil {
		return err
	}
	return r.report(&soak.End{SourceEnds: ctl.Ends(c.Parallelism)})
}

// obey fails the job at each "fail" line of stdin, and stops it when
// stdin ends: the parent closed it, or the parent is gone.
func obey(stdin io.Reader, ctl *pipelines.Control) {
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if sc.Text() == "fail" {
			ctl.Fail()
		}
	}
	ctl.Stop()
}

// injectedFilter leaves out the log records about failures the soak
// injected, whose stack traces would bury anything else on stderr; the
// reports count them.
type injectedFilter struct{ slog.Handler }

func (h injectedFilter) Handle(ctx context.Context, r slog.Record) error {
	injected := strings.Contains(r.Message, pipelines.InjectedMark)
	r.Attrs(func(a slog.Attr) bool {
		injected = injected || strings.Contains(a.Value.String(), pipelines.InjectedMark)
		return !injected
	})
	if injected {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h injectedFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return injectedFilter{h.Handler.WithAttrs(as)}
}

func (h injectedFilter) WithGroup(name string) slog.Handler {
	return injectedFilter{h.Handler.WithGroup(name)}
}

// childReporter writes the child's reports.
type childReporter struct {
	enc    *json.Encoder
	ctl    *pipelines.Control
	live   *pipelines.LiveHistogram
	rt     *soak.RuntimeReader
	job    atomic.Pointer[ringflow.Job]
	last   time.Time // of the previous report
	sinkIn int64     // records into the sink at the previous report
	lastID uint64    // of the newest checkpoint reported
	stalls int64     // stalls reported
}

// every reports every interval until done is closed.
func (r *childReporter) every(interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if r.report(nil) != nil {
				return // the parent is gone; stdin's end stops the job
			}
		}
	}
}

// report writes one report: what happened since the previous one.
func (r *childReporter) report(end *soak.End) error {
	now := time.Now()
	rep := soak.Report{Runtime: r.rt.Read(), Failures: r.ctl.Failures(), End: end}
	if job := r.job.Load(); job != nil {
		m := job.Metrics()
		rep.Restarts = m.Restarts
		if sink, ok := m.Operator("sink"); ok {
			rep.RecordsPerSec = float64(sink.RecordsIn-r.sinkIn) / now.Sub(r.last).Seconds()
			r.sinkIn = sink.RecordsIn
		}
		// NB: the job keeps only its latest checkpoints, and gives each
		// a new id, higher than those before.
		for _, c := range job.Checkpoints() {
			if c.ID > r.lastID {
				rep.Checkpoints = append(rep.Checkpoints, soak.CheckpointOf(c))
				r.lastID = c.ID
			}
		}
		latest, counts := job.Stalls()
		var total int64
		for _, n := range counts {
			total += n
		}
		// NB: the job keeps its latest stalls: more than that since the
		// last report are counted, and the latest described.
		for _, st := range latest[max(len(latest)-int(total-r.stalls), 0):] {
			rep.Stalls = append(rep.Stalls, soak.Stall{Duration: st.Duration, Cause: st.Cause, Part: st.Part != "", Desc: st.String()})
		}
		r.stalls = total
	}
	r.last = now
	var lat pipelines.Histogram
	r.live.Drain(&lat)
	rep.LatencyP99, rep.LatencySamples = time.Duration(lat.Quantile(0.99)), lat.Count()
	return r.enc.Encode(rep)
}
