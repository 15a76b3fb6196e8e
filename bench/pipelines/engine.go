package pipelines

import (
	"context"
	"time"

	"github.com/ringflow/ringflow"
)

// runEngine builds c's pipeline as a ringflow job and runs it.
func runEngine(ctx context.Context, c Config, produced *counters, sinks *lanes) error {
	job := ringflow.NewJob(ringflow.Config{Workers: c.Workers, Parallelism: c.Parallelism,
		MaxParallelism: MaxParallelism, NoPin: c.NoPin})
	key := func(r Record) uint64 { return r.Key }
	windows := ringflow.TumblingWindows(windowSizeMs * time.Millisecond)
	switch c.Pipeline {
	case "passthrough":
		src := ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0))
		ringflow.Sink(src, "sink", func(r Record) error {
			sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos)
			return nil
		})
	case "map-filter":
		src := ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0))
		kept := ringflow.Filter(ringflow.Map(src, "map", mapValue), "filter", keepValue)
		ringflow.Sink(kept, "sink", func(r Record) error {
			sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos)
			return nil
		})
	case "keyed-count":
		src := ringflow.Source(job, "source", newEngineSource(c, seedMain, produced, 0))
		counts := ringflow.Reduce(ringflow.KeyBy(src, key), "count", func(acc, r Record) Record {
			r.Value += acc.Value
			return r
		})
		ringflow.Sink(counts, "sink", func(r Record) error {
			sinks.byKey(r.Key).add(digestCount(&r), r.SrcNanos)
			return nil
		})
	case "window":
		src := ringflow.SourceWithEventTime(job, "source", newEngineSource(c, seedMain, produced, 0),
			eventTime(c.EventStride))
		wins := ringflow.Window(ringflow.KeyBy(src, key), "window", windows, countAgg{})
		ringflow.Sink(wins, "sink", func(w ringflow.WindowResult[uint64, WindowCount]) error {
			sinks.byKey(w.Key).add(digestWindow(w.Key, w.Start, w.Value.Count), w.Value.SrcNanos)
			return nil
		})
	case "join":
		left := ringflow.SourceWithEventTime(job, "left", newEngineSource(c, seedMain, produced, 0),
			eventTime(c.EventStride))
		right := ringflow.SourceWithEventTime(job, "right", newEngineSource(c, seedRight, produced, c.Parallelism),
			eventTime(c.EventStride))
		pairs := ringflow.WindowJoin(ringflow.KeyBy(left, key), ringflow.KeyBy(right, key), "join", windows, joinPair)
		ringflow.Sink(pairs, "sink", func(j Joined) error {
			sinks.byKey(j.Key).add(digestJoined(&j), j.SrcNanos)
			return nil
		})
	}
	return job.Run(ctx)
}

// eventTime returns the watermark strategy of the event-time pipelines:
// sources generate in event-time order, so the watermark trails the newest
// record by 1 ms only.
func eventTime(stride uint64) ringflow.WatermarkStrategy[Record] {
	return ringflow.WatermarkStrategy[Record]{Timestamp: func(r Record) int64 { return timeMs(r.Seq, stride) }}
}

// newEngineSource returns the ringflow source with the given seed; its subtask
// i counts what it produces in produced's slot first+i.
func newEngineSource(c Config, seed uint64, produced *counters, first int) ringflow.NewSource[Record] {
	spec := specOf(c, seed)
	return func() ringflow.SourceFunc[Record] {
		return &engineSource{spec: spec, produced: produced, first: first}
	}
}

// countAgg counts a key's records in a window and keeps the newest sample
// time among them.
type countAgg struct{}

func (countAgg) Create() WindowCount { return WindowCount{} }
func (countAgg) Add(acc WindowCount, r Record) WindowCount {
	acc.Count++
	acc.SrcNanos = max(acc.SrcNanos, r.SrcNanos)
	return acc
}
func (countAgg) Result(acc WindowCount) WindowCount { return acc }
func (countAgg) Merge(a, b WindowCount) WindowCount {
	return WindowCount{Count: a.Count + b.Count, SrcNanos: max(a.SrcNanos, b.SrcNanos)}
}
