package pipelines

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
)

// runEngine builds c's pipeline as a ringflow job and runs it.
func runEngine(ctx context.Context, c Config, produced *counters, sinks *lanes, res *Result) error {
	// NB: RaiseGOMAXPROCS: a worker per CPU and the spare P, the setting
	// docs/perf.md's figures were measured with.
	job := ringflow.NewJob(ringflow.Config{Workers: c.Workers, Parallelism: c.Parallelism, RaiseGOMAXPROCS: true,
		MaxParallelism: MaxParallelism, NoPin: c.NoPin, NoSteal: c.NoSteal, NoRest: c.NoRest, StallBound: c.StallBound, Debloat: c.Debloat, HugePages: c.HugePages, Checkpoint: c.Checkpoint, Restart: c.Restart,
		RestoreFrom: c.RestoreFrom})
	key := func(r Record) uint64 { return r.Key }
	// The keyed pipelines give KeyBy the batch form of key as well, as a
	// program that cares for throughput does: one call per batch on each
	// side of the keyed edge instead of one per record.
	keyBy := func(s ringflow.Stream[Record]) ringflow.KeyedStream[uint64, Record] {
		return ringflow.KeyByBatch(s, key, recordKeys)
	}
	windows := ringflow.TumblingWindows(windowSizeMs * time.Millisecond)
	fail := &failInjector{after: c.FailAfter, control: c.Control}
	switch c.Pipeline {
	case "passthrough":
		src := fail.wrap(ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0)))
		if c.SinkDir != "" {
			toFile(c, src, func(r Record) { sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos) }, recordLine)
			break
		}
		sinkInto(src, sinks, digestRecord, srcNanosOf)
	case "map-filter":
		src := fail.wrap(ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0)))
		kept := ringflow.Filter(ringflow.Map(src, "map", mapValue), "filter", keepValue)
		if c.SinkDir != "" {
			toFile(c, kept, func(r Record) { sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos) }, recordLine)
			break
		}
		sinkInto(kept, sinks, digestRecord, srcNanosOf)
	case "keyed-count":
		src := fail.wrap(ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0)))
		// The rolling count keeps one int64 per key, as the baseline's Go
		// map does.
		counts := ringflow.MapWithState(keyBy(src), "count", func(n *int64, r Record) Record {
			*n += r.Value
			r.Value = *n
			return r
		})
		if c.SinkDir != "" {
			toFile(c, counts, func(r Record) { sinks.byKey(r.Key).add(digestCount(&r), r.SrcNanos) }, countLine)
			break
		}
		sinkInto(counts, sinks, digestCount, srcNanosOf)
	case "window":
		src := fail.wrap(ringflow.SourceWithEventTime(job, "source", newEngineSource(c, seedMain, produced, 0),
			eventTime(c.EventStride)))
		wins := ringflow.Window(keyBy(src), "window", windows, countAgg{})
		if c.SinkDir != "" {
			toFile(c, wins, func(w windowOut) { sinks.byKey(w.Key).add(digestWindowOut(&w), w.Value.SrcNanos) }, windowLine)
			break
		}
		sinkInto(wins, sinks, digestWindowOut, func(w *windowOut) int64 { return w.Value.SrcNanos })
	case "join":
		left := fail.wrap(ringflow.SourceWithEventTime(job, "left", newEngineSource(c, seedMain, produced, 0),
			eventTime(c.EventStride)))
		right := ringflow.SourceWithEventTime(job, "right", newEngineSource(c, seedRight, produced, c.Parallelism),
			eventTime(c.EventStride))
		pairs := ringflow.WindowJoin(keyBy(left), keyBy(right), "join", windows, joinPair)
		if c.SinkDir != "" {
			toFile(c, pairs, func(j Joined) { sinks.byKey(j.Key).add(digestJoined(&j), j.SrcNanos) }, joinedLine)
			break
		}
		sinkInto(pairs, sinks, digestJoined, joinedSrcNanos)
	}
	if c.OnJob != nil {
		c.OnJob(job)
	}
	var err error
	if w := sinks.windows; w.length > 0 {
		err = runInWindows(ctx, job, w)
	} else {
		err = job.Run(ctx)
	}
	res.Checkpoints, res.Restarts, res.RestoredFrom = job.Checkpoints(), job.Restarts(), job.RestoredFrom()
	res.Workers = job.WorkerStats()
	res.Stalls, res.StallCounts = job.Stalls()
	return err
}

// runInWindows runs job with its checkpoints paused in even windows and on
// in odd ones (Config.CheckpointWindows).
func runInWindows(ctx context.Context, job *ringflow.Job, w windows) error {
	job.PauseCheckpoints(pausedIn(0))
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for k := int64(1); ; k++ {
			t := time.NewTimer(time.Until(time.Unix(0, w.start+k*w.length)))
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
				job.PauseCheckpoints(pausedIn(k))
			}
		}
	}()
	err := job.Run(ctx)
	close(done)
	<-exited
	return err
}

// sinkInto adds the pipeline's sink: each subtask counts and digests the
// records it receives into its own lane, a batch at a time, as the
// baseline's sink goroutines do.
func sinkInto[T any](s ringflow.Stream[T], sinks *lanes, digest func(*T) uint64, srcNanos func(*T) int64) {
	ringflow.SinkBatches(s, "sink", func(subtask int) func(context.Context, []T) error {
		l := &sinks.l[subtask]
		return func(_ context.Context, recs []T) error {
			for i := range recs {
				l.add(digest(&recs[i]), srcNanos(&recs[i]))
			}
			return nil
		}
	})
}

// failInjector is the "fail" operator that Config.FailAfter and
// Config.Control add behind the (left) source: it panics, which fails its
// task, at the first record after `after` it sees in one Run (and never
// again in that Run), and at the first record after each Control.Fail.
type failInjector struct {
	after   uint64
	seen    atomic.Uint64
	failed  atomic.Bool
	control *Control
}

// wrap returns s, behind the failing operator if the injector is armed.
func (f *failInjector) wrap(s ringflow.Stream[Record]) ringflow.Stream[Record] {
	if f.after == 0 && f.control == nil {
		return s
	}
	return ringflow.Map(s, "fail", func(r Record) Record {
		if f.after > 0 {
			if n := f.seen.Add(1); n > f.after && f.failed.CompareAndSwap(false, true) {
				panic(fmt.Sprintf("dfbench: failure injected at record %d (--fail-after %d)", n, f.after))
			}
		}
		if f.control != nil {
			if n, ok := f.control.failNow(); ok {
				panic(injectedFailure(n))
			}
		}
		return r
	})
}

// toFile sends s through ringflow's transactional file sink into
// c.SinkDir, one line per record, which the sink formats into a buffer of
// its own; a "tally" map in front of it counts each record in its lane,
// so that Result still has a count, checksum and latency. NB: tally and
// line take records by value: a record's address passed to a function
// value would move every record to the heap.
func toFile[T any](c Config, s ringflow.Stream[T], tally func(T), line func([]byte, T) []byte) {
	tallied := ringflow.Map(s, "tally", func(r T) T {
		tally(r)
		return r
	})
	ringflow.TxnSink(tallied, "sink", ringflow.FileSinkOf(c.SinkDir, line))
}

// windowOut is the window pipeline's output record.
type windowOut = ringflow.WindowResult[uint64, WindowCount]

func digestWindowOut(w *windowOut) uint64 { return digestWindow(w.Key, w.Start, w.Value.Count) }

// The lines of the file sink (Config.SinkDir), fields separated by a
// space.
func recordLine(b []byte, r Record) []byte { return fields(b, r.Seq, r.Key, uint64(r.Value)) }
func countLine(b []byte, r Record) []byte  { return fields(b, r.Key, uint64(r.Value)) }
func windowLine(b []byte, w windowOut) []byte {
	return fields(b, w.Key, uint64(w.Start), uint64(w.Value.Count))
}
func joinedLine(b []byte, j Joined) []byte { return fields(b, j.Key, j.LeftSeq, j.RightSeq) }

func fields(b []byte, vs ...uint64) []byte {
	for i, v := range vs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, v, 10)
	}
	return b
}

// eventTime returns the watermark strategy of the event-time pipelines:
// sources generate in event-time order, so the watermark trails the newest
// record by 1 ms only.
func eventTime(stride uint64) ringflow.WatermarkStrategy[Record] {
	return ringflow.WatermarkStrategy[Record]{
		Timestamp: func(r Record) int64 { return timeMs(r.Seq, stride) },
		Timestamps: func(recs []Record, ts []int64) {
			for i := range recs {
				ts[i] = timeMs(recs[i].Seq, stride)
			}
		},
	}
}

// recordKeys is the batch form of the keyed pipelines' key function.
func recordKeys(recs []Record, keys []uint64) {
	for i := range recs {
		keys[i] = recs[i].Key
	}
}

// newEngineSource returns the ringflow source with the given seed; its subtask
// i counts what it produces in produced's slot first+i.
func newEngineSource(c Config, seed uint64, produced *counters, first int) ringflow.NewSource[Record] {
	spec := specOf(c, seed)
	return func() ringflow.SourceFunc[Record] {
		return &engineSource{spec: spec, produced: produced, first: first, control: c.Control}
	}
}

// countAgg counts a key's records in a window and keeps the newest sample
// time among them, in place (AddPtr) as the engine calls it.
type countAgg struct{}

func (countAgg) Create() WindowCount { return WindowCount{} }
func (countAgg) Add(acc WindowCount, r Record) WindowCount {
	acc.Count++
	acc.SrcNanos = max(acc.SrcNanos, r.SrcNanos)
	return acc
}
func (countAgg) AddPtr(acc *WindowCount, r *Record) {
	acc.Count++
	acc.SrcNanos = max(acc.SrcNanos, r.SrcNanos)
}
func (countAgg) Result(acc WindowCount) WindowCount { return acc }
func (countAgg) Merge(a, b WindowCount) WindowCount {
	return WindowCount{Count: a.Count + b.Count, SrcNanos: max(a.SrcNanos, b.SrcNanos)}
}
