package pipelines

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
)

// runEngine builds c's pipeline as a ringflow job and runs it.
func runEngine(ctx context.Context, c Config, produced *counters, sinks *lanes) error {
	job := ringflow.NewJob(ringflow.Config{Workers: c.Workers, Parallelism: c.Parallelism,
		MaxParallelism: MaxParallelism})
	key := func(r Record) uint64 { return r.Key }
	switch c.Pipeline {
	case "passthrough":
		src := ringflow.Source(job, "source", countedGen(c, seedMain, produced, 0))
		ringflow.Sink(src, "sink", func(r Record) error {
			sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos)
			return nil
		})
	case "map-filter":
		src := ringflow.Source(job, "source", countedGen(c, seedMain, produced, 0))
		kept := ringflow.Filter(ringflow.Map(src, "map", mapValue), "filter", keepValue)
		ringflow.Sink(kept, "sink", func(r Record) error {
			sinks.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos)
			return nil
		})
	case "keyed-count":
		src := ringflow.Source(job, "source", countedGen(c, seedMain, produced, 0))
		counts := ringflow.Reduce(ringflow.KeyBy(src, key), "count", func(acc, r Record) Record {
			r.Value += acc.Value
			return r
		})
		ringflow.Sink(counts, "sink", func(r Record) error {
			sinks.byKey(r.Key).add(digestCount(&r), r.SrcNanos)
			return nil
		})
	case "window":
		src := ringflow.SourceWithEventTime(job, "source", countedGen(c, seedMain, produced, 0), eventTime)
		wins := ringflow.Window(ringflow.KeyBy(src, key), "window", ringflow.TumblingWindows(windowSizeMs*time.Millisecond), countAgg{})
		ringflow.Sink(wins, "sink", func(w ringflow.WindowResult[uint64, WindowCount]) error {
			sinks.byKey(w.Key).add(digestWindow(w.Key, w.Start, w.Value.Count), w.Value.SrcNanos)
			return nil
		})
	case "join":
		left := ringflow.SourceWithEventTime(job, "left", countedGen(c, seedMain, produced, 0), eventTime)
		right := ringflow.SourceWithEventTime(job, "right", countedGen(c, seedRight, produced, c.Parallelism), eventTime)
		pairs := ringflow.WindowJoin(ringflow.KeyBy(left, key), ringflow.KeyBy(right, key), "join",
			ringflow.TumblingWindows(windowSizeMs*time.Millisecond), joinPair)
		ringflow.Sink(pairs, "sink", func(j Joined) error {
			sinks.byKey(j.Key).add(digestJoined(&j), j.SrcNanos)
			return nil
		})
	}
	return job.Run(ctx)
}

// eventTime is the watermark strategy of the event-time pipelines: sources
// generate in event-time order, so the watermark trails the newest record
// by 1 ms only.
var eventTime = ringflow.WatermarkStrategy[Record]{Timestamp: func(r Record) int64 { return r.TimeMs }}

// sourceShare returns the number of records and the rate of the source with
// the given seed: all of them, or the join's share.
func sourceShare(c Config, seed uint64) (records uint64, rate float64) {
	if c.Pipeline != "join" {
		return c.Records, c.Rate
	}
	if seed == seedMain {
		return (c.Records + 1) / 2, c.Rate / 2
	}
	return c.Records / 2, c.Rate / 2
}

// sourceGen returns the generator of the source with the given seed.
func sourceGen(c Config, seed uint64) gen {
	g := gen{keys: c.Keys, seed: seed}
	if c.Pipeline == "window" || c.Pipeline == "join" {
		g.stride = c.EventStride
	}
	return g
}

// countedGen returns a ringflow generator of the source with the given
// seed whose subtask i counts what it produces in produced's slot first+i.
func countedGen(c Config, seed uint64, produced *counters, first int) ringflow.NewSource[Record] {
	records, rate := sourceShare(c, seed)
	newGen := ringflow.Generate(sourceGen(c, seed).record, ringflow.GenOptions{Count: records, Rate: rate})
	return func() ringflow.SourceFunc[Record] {
		return &countedSource{SourceFunc: newGen(), produced: produced, first: first}
	}
}

// countedSource counts the records of a source, once per batch.
type countedSource struct {
	ringflow.SourceFunc[Record]
	produced *counters
	first    int
	n        *atomic.Uint64
}

func (s *countedSource) Open(subtask, parallelism int, pos []byte) error {
	s.n = s.produced.slot(s.first + subtask)
	return s.SourceFunc.Open(subtask, parallelism, pos)
}

func (s *countedSource) Read(buf []Record) (int, error) {
	n, err := s.SourceFunc.Read(buf)
	s.n.Add(uint64(n))
	return n, err
}

// NextReady passes on the generator's pacing (operator.Pacer).
func (s *countedSource) NextReady() time.Time {
	if p, ok := s.SourceFunc.(interface{ NextReady() time.Time }); ok {
		return p.NextReady()
	}
	return time.Time{}
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
