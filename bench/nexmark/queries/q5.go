package queries

import (
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// Windows of the queries, as in the Flink SQL.
const (
	q5Size  = 10 * time.Second
	q5Slide = 2 * time.Second
	q7Size  = 10 * time.Second
	q8Size  = 10 * time.Second
	q11Gap  = 10 * time.Second
)

// auctionCount is one auction's bid count in one window.
type auctionCount = ringflow.WindowResult[int64, int64]

// q5Row is q5's result: one of a window's hottest auctions.
type q5Row struct{ WindowStart, Auction, Num int64 }

// q5 is "hot items": for every 10 s window sliding by 2 s, the auctions
// with the most bids. Bids are counted per auction and window; the counts
// are then regrouped by window, where the largest wins (Flink's SQL joins
// the counts with their per-window maximum instead).
func q5(events ringflow.Stream[nexmark.Event], out *Output) {
	auctions := ringflow.FlatMapPtr(events, "bid-auctions", func(ev *nexmark.Event, out *ringflow.Collector[int64]) {
		if ev.Kind == nexmark.KindBid {
			out.Emit(ev.Bid.Auction)
		}
	})
	counts := ringflow.Window(ringflow.KeyBy(auctions, func(a int64) int64 { return a }), "count",
		ringflow.SlidingWindows(q5Size, q5Slide), count[int64]{})
	byWindow := ringflow.KeyBy(counts, func(c auctionCount) int64 { return c.Start })
	hot := ringflow.Process(byWindow, "hottest", func() ringflow.ProcessFunc[int64, auctionCount, q5Row] { return &q5Hottest{} })
	sink(hot, out, func(dst []byte, r q5Row) []byte { return nexmark.AppendQ5Row(dst, r.WindowStart, r.Auction, r.Num) })
}

// q5Hottest keeps, per window start, the largest count so far and the
// auctions that have it; when the window's counts are complete it emits
// them. A window's counts all carry the window's last timestamp and arrive
// before the watermark passes it, so a timer there sees every count.
type q5Hottest struct {
	top *ringflow.ValueState[int64, hottest]
}

// hottest is a window's largest bid count and the auctions with that count.
type hottest struct {
	Num      int64
	Auctions []int64
}

func (h *q5Hottest) Open(s *ringflow.KeyedScope[int64]) error {
	h.top = ringflow.NewValueState[int64, hottest](s, "top")
	return nil
}

func (h *q5Hottest) Process(ctx *ringflow.KeyedContext[int64], c auctionCount, _ *ringflow.Collector[q5Row]) error {
	top, ok := h.top.Value()
	switch {
	case !ok:
		ctx.RegisterEventTimer(ctx.Timestamp())
		fallthrough
	case c.Value > top.Num:
		// NB: a new slice, not top.Auctions[:0]: a snapshot may still see the old one.
		h.top.Update(hottest{Num: c.Value, Auctions: []int64{c.Key}})
	case c.Value == top.Num:
		h.top.Update(hottest{Num: top.Num, Auctions: append(top.Auctions, c.Key)})
	}
	return nil
}

func (h *q5Hottest) OnTimer(ctx *ringflow.KeyedContext[int64], _ int64, _ ringflow.TimeDomain, out *ringflow.Collector[q5Row]) error {
	top, _ := h.top.Value()
	for _, a := range top.Auctions {
		out.Emit(q5Row{WindowStart: ctx.Key(), Auction: a, Num: top.Num})
	}
	h.top.Clear()
	return nil
}
