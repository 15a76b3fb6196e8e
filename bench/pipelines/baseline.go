package pipelines

import (
	"context"
	"math"
	"sync"
	"time"
)

// batchLen is the number of records in a full baseline batch; chanBatches
// the buffer of every baseline channel, in batches (about 1.3 MB of
// records, like a ringflow ring of 1 MiB).
const (
	batchLen    = 1024
	chanBatches = 32
)

// batch is what baseline channels carry.
type batch[T any] struct {
	recs []T
	wm   int64 // the sender's watermark after these records (event-time pipelines)
	from int   // the sender, an index among the receiver's senders
}

// pool recycles batches.
type pool[T any] struct{ p sync.Pool }

func (p *pool[T]) get() *batch[T] {
	if b, ok := p.p.Get().(*batch[T]); ok {
		b.recs = b.recs[:0]
		return b
	}
	return &batch[T]{recs: make([]T, 0, batchLen)}
}

func (p *pool[T]) put(b *batch[T]) { p.p.Put(b) }

// winResult is the window pipeline's output in the baseline.
type winResult struct {
	Key      uint64
	Start    int64
	Count    int64
	SrcNanos int64
}

// runChan runs c's pipeline on goroutines and channels.
func runChan(ctx context.Context, c Config, produced *counters, sinks *lanes, _ *Result) error {
	var wg sync.WaitGroup
	p := c.Parallelism
	var recs pool[Record]
	srcs := newChanSources(ctx, c, seedMain, produced, 0)
	switch c.Pipeline {
	case "passthrough", "map-filter":
		for i := range p {
			ch := make(chan *batch[Record], chanBatches)
			goDo(&wg, func() { srcs[i].forward(ch, &recs) })
			var in <-chan *batch[Record] = ch
			if c.Pipeline == "map-filter" {
				mapped, kept := make(chan *batch[Record], chanBatches), make(chan *batch[Record], chanBatches)
				goDo(&wg, func() { mapStage(ch, mapped) })
				goDo(&wg, func() { filterStage(mapped, kept, &recs) })
				in = kept
			}
			goDo(&wg, func() { sinkStage(in, &recs, &sinks.l[i], digestRecord, srcNanosOf) })
		}
	case "keyed-count":
		ins := partitioned(&wg, srcs, nil, &recs, c.EventStride)
		for i := range p {
			out := make(chan *batch[Record], chanBatches)
			goDo(&wg, func() { countStage(ins[i], out) })
			goDo(&wg, func() { sinkStage(out, &recs, &sinks.l[i], digestCount, srcNanosOf) })
		}
	case "window":
		ins := partitioned(&wg, srcs, nil, &recs, c.EventStride)
		var results pool[winResult]
		for i := range p {
			out := make(chan *batch[winResult], chanBatches)
			w := newChanWindows(p, c.EventStride, out, &results)
			goDo(&wg, func() { w.run(ins[i], &recs) })
			goDo(&wg, func() { sinkStage(out, &results, &sinks.l[i], digestWinResult, winSrcNanos) })
		}
	case "join":
		right := newChanSources(ctx, c, seedRight, produced, p)
		ins := partitioned(&wg, srcs, right, &recs, c.EventStride)
		var pairs pool[Joined]
		for i := range p {
			out := make(chan *batch[Joined], chanBatches)
			j := newChanJoin(p, c.EventStride, out, &pairs)
			goDo(&wg, func() { j.run(ins[i], &recs) })
			goDo(&wg, func() { sinkStage(out, &pairs, &sinks.l[i], digestJoined, joinedSrcNanos) })
		}
	}
	wg.Wait()
	return nil
}

func goDo(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}

func srcNanosOf(r *Record) int64          { return r.SrcNanos }
func winSrcNanos(r *winResult) int64      { return r.SrcNanos }
func joinedSrcNanos(j *Joined) int64      { return j.SrcNanos }
func digestWinResult(r *winResult) uint64 { return digestWindow(r.Key, r.Start, r.Count) }

// partitioned starts the sources (left, then right if any) on a keyed edge
// to P receivers and returns the receivers' channels, which close when
// every source has finished. Source j is sender j of every receiver. The
// records' event time advances 1 ms every stride records.
func partitioned(wg *sync.WaitGroup, left, right []*chanSource, bp *pool[Record], stride uint64) []chan *batch[Record] {
	p := len(left)
	outs := make([]chan *batch[Record], p)
	for i := range outs {
		outs[i] = make(chan *batch[Record], chanBatches)
	}
	var senders sync.WaitGroup
	for j, s := range append(append([]*chanSource(nil), left...), right...) {
		goDo(&senders, func() { s.partition(outs, bp, j, stride) })
	}
	goDo(wg, func() {
		senders.Wait()
		for _, ch := range outs {
			close(ch)
		}
	})
	return outs
}

// chanSource is one instance of a baseline source.
type chanSource struct {
	genSource
	stop <-chan struct{}
}

func newChanSources(ctx context.Context, c Config, seed uint64, produced *counters, first int) []*chanSource {
	spec := specOf(c, seed)
	srcs := make([]*chanSource, c.Parallelism)
	for i := range srcs {
		srcs[i] = &chanSource{stop: ctx.Done()}
		srcs[i].init(spec, i, c.Parallelism, 0, produced.slot(first+i))
	}
	return srcs
}

// next fills buf with the next records and returns how many. It returns 0
// when no record is due yet (paced sources), and done at the end or when
// the run is cancelled.
func (s *chanSource) next(buf []Record) (n int, done bool) {
	select {
	case <-s.stop:
		return 0, true
	default:
	}
	if s.exhausted() {
		return 0, true
	}
	return s.genSource.next(buf), false
}

// wait sleeps until the next record is due.
func (s *chanSource) wait() { time.Sleep(time.Until(s.nextDue())) }

// forward sends the source's records in batches to out, then closes it.
func (s *chanSource) forward(out chan<- *batch[Record], bp *pool[Record]) {
	defer close(out)
	for {
		b := bp.get()
		n, done := s.next(b.recs[:batchLen])
		if n == 0 {
			bp.put(b)
			if done {
				return
			}
			s.wait()
			continue
		}
		b.recs = b.recs[:n]
		out <- b
	}
}

// partition sends each record to receiver Key mod P, in batches that go
// when full, or when the source has nothing to do now, or at its end. Each
// batch carries the source's watermark (the newest record's time - 1).
func (s *chanSource) partition(outs []chan *batch[Record], bp *pool[Record], from int, stride uint64) {
	p := uint64(len(outs))
	bufs := make([]*batch[Record], p)
	for d := range bufs {
		bufs[d] = bp.get()
	}
	wm := int64(math.MinInt64)
	send := func(d uint64) {
		b := bufs[d]
		b.wm, b.from = wm, from
		outs[d] <- b
		bufs[d] = bp.get()
	}
	flush := func() {
		for d := range p {
			if len(bufs[d].recs) > 0 {
				send(d)
			}
		}
	}
	chunk := make([]Record, batchLen)
	for {
		n, done := s.next(chunk)
		for i := range chunk[:n] {
			r := &chunk[i]
			d := r.Key % p
			b := bufs[d]
			b.recs = append(b.recs, *r)
			if len(b.recs) == batchLen {
				wm = timeMs(r.Seq, stride) - 1
				send(d)
			}
		}
		if n > 0 {
			wm = timeMs(chunk[n-1].Seq, stride) - 1
		}
		if n == 0 {
			flush()
			if done {
				return
			}
			s.wait()
		}
	}
}

// mapStage applies mapValue to every record, in place.
func mapStage(in <-chan *batch[Record], out chan<- *batch[Record]) {
	defer close(out)
	for b := range in {
		for i := range b.recs {
			b.recs[i] = mapValue(b.recs[i])
		}
		out <- b
	}
}

// filterStage keeps the records keepValue accepts, in place.
func filterStage(in <-chan *batch[Record], out chan<- *batch[Record], bp *pool[Record]) {
	defer close(out)
	for b := range in {
		kept := b.recs[:0]
		for _, r := range b.recs {
			if keepValue(r) {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			bp.put(b)
			continue
		}
		b.recs = kept
		out <- b
	}
}

// countStage replaces each record's Value with the running sum of its
// key's Values (a rolling count), in place.
func countStage(in <-chan *batch[Record], out chan<- *batch[Record]) {
	defer close(out)
	counts := make(map[uint64]int64)
	for b := range in {
		for i := range b.recs {
			r := &b.recs[i]
			n := counts[r.Key] + r.Value
			counts[r.Key] = n
			r.Value = n
		}
		out <- b
	}
}

// sinkStage counts and digests what arrives into l and recycles the
// batches.
func sinkStage[T any](in <-chan *batch[T], bp *pool[T], l *lane, dig func(*T) uint64, src func(*T) int64) {
	for b := range in {
		for i := range b.recs {
			l.add(dig(&b.recs[i]), src(&b.recs[i]))
		}
		bp.put(b)
	}
}
