package queries

import (
	"math"
	"slices"
	"sync"

	"github.com/ringflow/ringflow/bench/nexmark"
)

// The plain-Go baseline: the same queries written with goroutines and
// channels of batches, as a Go programmer would without an engine (no
// checkpoints, no key groups, state in Go maps). It is the lower bound on
// what an engine's plumbing costs; dfbench nexmark --baseline chan puts it
// side by side with ringflow.

// chanBatch is the number of events a baseline source generates between
// sends, and the most records a batch holds.
const chanBatch = 1024

// HasChanBaseline reports whether RunChan implements query q (q0, q1, q2
// and q5).
func HasChanBaseline(q string) bool {
	switch q {
	case "q0", "q1", "q2", "q5":
		return true
	}
	return false
}

// RunChan runs query q over cfg's events as plain Go with p parallel
// pipelines, handing the rows to out as Build's sink does.
func RunChan(q string, cfg nexmark.Config, p int, out *Output) error {
	if !HasChanBaseline(q) {
		return errorf("no plain-Go baseline for query %q (have q0, q1, q2, q5)", q)
	}
	if out == nil {
		return errorf("%s baseline: nil Output", q)
	}
	parts, err := cfg.Split(p)
	if err != nil {
		return errorf("%s baseline: %w", q, err)
	}
	switch q {
	case "q0":
		return chanStateless(parts, out, func(ev *nexmark.Event, dst []nexmark.Bid) []nexmark.Bid {
			if ev.Kind == nexmark.KindBid {
				dst = append(dst, ev.Bid)
			}
			return dst
		}, func(dst []byte, b *nexmark.Bid) []byte { return nexmark.AppendQ0Row(dst, b) })
	case "q1":
		return chanStateless(parts, out, func(ev *nexmark.Event, dst []q1Bid) []q1Bid {
			if b := &ev.Bid; ev.Kind == nexmark.KindBid {
				dst = append(dst, q1Bid{Auction: b.Auction, Bidder: b.Bidder, EuroMilli: b.Price * 908, DateTime: b.DateTime})
			}
			return dst
		}, func(dst []byte, b *q1Bid) []byte { return appendQ1Row(dst, *b) })
	case "q2":
		return chanStateless(parts, out, func(ev *nexmark.Event, dst []q2Bid) []q2Bid {
			if ev.Kind == nexmark.KindBid && ev.Bid.Auction%123 == 0 {
				dst = append(dst, q2Bid{ev.Bid.Auction, ev.Bid.Price})
			}
			return dst
		}, func(dst []byte, b *q2Bid) []byte { return nexmark.AppendQ2Row(dst, b.Auction, b.Price) })
	}
	return chanQ5(parts, out)
}

// chanStateless runs one pipeline per part: a generator goroutine projects
// events into batches and sends them to a sink goroutine, which returns
// the emptied batches for reuse.
func chanStateless[T any](parts []nexmark.Config, out *Output, project func(*nexmark.Event, []T) []T,
	format func([]byte, *T) []byte) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		full, free := make(chan []T, 4), make(chan []T, 4)
		for range 4 {
			free <- make([]T, 0, chanBatch)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(full)
			errs[i] = generate(part, func(evs []nexmark.Event) {
				b := (<-free)[:0]
				for k := range evs {
					b = project(&evs[k], b)
				}
				full <- b
			})
		}()
		go func() {
			defer wg.Done()
			for b := range full {
				if err := writeBatch(out, b, format); err != nil && errs[i] == nil {
					errs[i] = err
				}
				free <- b
			}
		}()
	}
	wg.Wait()
	return firstError(errs)
}

// generate runs a generator over part, handing each batch of events to f.
func generate(part nexmark.Config, f func([]nexmark.Event)) error {
	g, err := nexmark.NewGenerator(part)
	if err != nil {
		return err
	}
	evs := make([]nexmark.Event, chanBatch)
	for {
		n := 0
		for n < len(evs) && g.Next(&evs[n]) {
			n++
		}
		if n == 0 {
			return nil
		}
		f(evs[:n])
	}
}

// writeBatch counts a batch of rows and, if there is a write function,
// formats and writes them.
func writeBatch[T any](o *Output, b []T, format func([]byte, *T) []byte) error {
	o.rows.Add(int64(len(b)))
	if o.write == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range b {
		o.buf = format(o.buf[:0], &b[k])
		if err := o.write(o.buf); err != nil {
			return err
		}
	}
	return nil
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// bidAt is a bid's auction and event time, as q5's counters see it.
type bidAt struct{ Auction, DateTime int64 }

// q5Batch goes from a source to a counter: bids whose auctions the counter
// owns, and the source's watermark after them.
type q5Batch struct {
	source int
	bids   []bidAt
	wm     int64
}

// q5Partial goes from a counter to the merger: a window's largest count
// among the counter's auctions and those auctions, or (isWm) the counter's
// watermark, after every window it passed.
type q5Partial struct {
	counter int
	window  int64
	top     hottest
	wm      int64
	isWm    bool
}

// chanQ5 runs q5 in plain Go: p sources partition bids by auction to p
// counters, which count per auction and sliding window and, when the
// watermark (the least of the sources') passes a window, send its local
// hottest auctions to one merger, which keeps the overall hottest.
func chanQ5(parts []nexmark.Config, out *Output) error {
	p := len(parts)
	toCounter := make([]chan q5Batch, p)
	for i := range toCounter {
		toCounter[i] = make(chan q5Batch, 4*p)
	}
	toMerger := make(chan q5Partial, 64)
	errs := make([]error, p+1)
	var sources, counters sync.WaitGroup
	for i, part := range parts {
		sources.Add(1)
		go func() {
			defer sources.Done()
			errs[i] = q5Source(i, part, toCounter)
		}()
	}
	for c := range p {
		counters.Add(1)
		go func() {
			defer counters.Done()
			q5Counter(c, p, toCounter[c], toMerger)
		}()
	}
	go func() {
		sources.Wait()
		for _, ch := range toCounter {
			close(ch)
		}
		counters.Wait()
		close(toMerger)
	}()
	errs[p] = q5Merger(p, toMerger, out)
	return firstError(errs)
}

// q5Source generates one part's events and sends its bids to the counters
// owning their auctions, each batch with the source's watermark.
func q5Source(i int, part nexmark.Config, toCounter []chan q5Batch) error {
	p := len(toCounter)
	maxTs := int64(math.MinInt64)
	send := func(bids [][]bidAt, wm int64) {
		for c := range bids {
			toCounter[c] <- q5Batch{source: i, bids: bids[c], wm: wm}
			bids[c] = make([]bidAt, 0, chanBatch/p+1)
		}
	}
	bids := make([][]bidAt, p)
	err := generate(part, func(evs []nexmark.Event) {
		for k := range evs {
			if b := &evs[k].Bid; evs[k].Kind == nexmark.KindBid {
				c := int(uint64(b.Auction) % uint64(p))
				bids[c] = append(bids[c], bidAt{b.Auction, b.DateTime})
			}
			maxTs = max(maxTs, evs[k].DateTime())
		}
		send(bids, maxTs-OutOfOrderness.Milliseconds()-1)
	})
	send(bids, math.MaxInt64)
	return err
}

// q5Counter counts one partition's bids per window start and auction.
func q5Counter(c, p int, in <-chan q5Batch, toMerger chan<- q5Partial) {
	size, slide := q5Size.Milliseconds(), q5Slide.Milliseconds()
	counts := map[int64]map[int64]int64{} // window start -> auction -> bids
	var starts []int64                    // open window starts, ascending
	wms := make([]int64, p)
	for i := range wms {
		wms[i] = math.MinInt64
	}
	wm := int64(math.MinInt64)
	for b := range in {
		for _, bid := range b.bids {
			for s := windowStart(bid.DateTime, slide); s > bid.DateTime-size; s -= slide {
				w, ok := counts[s]
				if !ok {
					w = map[int64]int64{}
					counts[s] = w
					i, _ := slices.BinarySearch(starts, s)
					starts = slices.Insert(starts, i, s)
				}
				w[bid.Auction]++
			}
		}
		wms[b.source] = b.wm
		if m := slices.Min(wms); m > wm {
			wm = m
			for len(starts) > 0 && starts[0]+size-1 <= wm {
				s := starts[0]
				toMerger <- q5Partial{counter: c, window: s, top: localHottest(counts[s])}
				delete(counts, s)
				starts = starts[1:]
			}
			toMerger <- q5Partial{counter: c, wm: wm, isWm: true}
		}
	}
}

// localHottest returns the largest count of a window and its auctions.
func localHottest(w map[int64]int64) hottest {
	var h hottest
	for a, n := range w {
		switch {
		case n > h.Num:
			h = hottest{Num: n, Auctions: append(h.Auctions[:0], a)}
		case n == h.Num:
			h.Auctions = append(h.Auctions, a)
		}
	}
	return h
}

// q5Merger combines the counters' partial results per window and emits a
// window's hottest auctions once every counter's watermark has passed it.
func q5Merger(p int, in <-chan q5Partial, out *Output) error {
	size := q5Size.Milliseconds()
	tops := map[int64]hottest{}
	wms := make([]int64, p)
	for i := range wms {
		wms[i] = math.MinInt64
	}
	var rows []q5Row
	var err error
	for m := range in {
		if !m.isWm {
			t := tops[m.window]
			switch {
			case m.top.Num > t.Num:
				t = m.top
			case m.top.Num == t.Num:
				t.Auctions = append(t.Auctions, m.top.Auctions...)
			}
			tops[m.window] = t
			continue
		}
		wms[m.counter] = m.wm
		wm := slices.Min(wms)
		for s, t := range tops {
			if s+size-1 <= wm {
				for _, a := range t.Auctions {
					rows = append(rows, q5Row{WindowStart: s, Auction: a, Num: t.Num})
				}
				delete(tops, s)
			}
		}
		if len(rows) > 0 && err == nil {
			err = writeBatch(out, rows, func(dst []byte, r *q5Row) []byte {
				return nexmark.AppendQ5Row(dst, r.WindowStart, r.Auction, r.Num)
			})
			rows = rows[:0]
		}
	}
	return err
}
