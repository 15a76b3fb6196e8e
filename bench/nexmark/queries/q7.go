package queries

import (
	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// q7Bid is the part of a bid q7 reports.
type q7Bid struct{ Auction, Bidder, Price, DateTime int64 }

// q7Row is q7's result: one of a window's highest bids.
type q7Row struct {
	WindowStart int64
	Bid         q7Bid
}

// q7 is "highest bid": for every 10 s tumbling window, the bids whose price
// is the window's highest. Bids are grouped by their window; each group
// keeps only the bids at its running maximum price, which are exactly the
// bids the SQL's join of the window maximum back with the bids would find.
func q7(events ringflow.Stream[nexmark.Event], out *Output) {
	size := q7Size.Milliseconds()
	bids := ringflow.FlatMapPtr(events, "bids", func(ev *nexmark.Event, out *ringflow.Collector[q7Bid]) {
		if b := &ev.Bid; ev.Kind == nexmark.KindBid {
			out.Emit(q7Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime})
		}
	})
	byWindow := ringflow.KeyBy(bids, func(b q7Bid) int64 { return windowStart(b.DateTime, size) })
	top := ringflow.Window(byWindow, "highest", ringflow.TumblingWindows(q7Size), highestBids{})
	rows := ringflow.FlatMap(top, "rows", func(r ringflow.WindowResult[int64, highest], out *ringflow.Collector[q7Row]) {
		for _, b := range r.Value.Bids {
			out.Emit(q7Row{WindowStart: r.Start, Bid: b})
		}
	})
	sink(rows, out, func(dst []byte, r q7Row) []byte {
		b := nexmark.Bid{Auction: r.Bid.Auction, Bidder: r.Bid.Bidder, Price: r.Bid.Price, DateTime: r.Bid.DateTime}
		return nexmark.AppendQ7Row(dst, r.WindowStart, &b)
	})
}

// highest is the highest price seen and the bids at that price.
type highest struct {
	Price int64
	Bids  []q7Bid
}

// highestBids aggregates bids into the highest ones.
type highestBids struct{}

func (highestBids) Create() highest { return highest{} }

func (highestBids) Add(h highest, b q7Bid) highest {
	switch {
	case len(h.Bids) == 0 || b.Price > h.Price:
		// NB: a new slice, not h.Bids[:0]: a snapshot may still see the old one.
		return highest{Price: b.Price, Bids: []q7Bid{b}}
	case b.Price == h.Price:
		return highest{Price: h.Price, Bids: append(h.Bids, b)}
	}
	return h
}

func (highestBids) Result(h highest) highest { return h }

func (a highestBids) Merge(x, y highest) highest {
	for _, b := range y.Bids {
		x = a.Add(x, b)
	}
	return x
}
