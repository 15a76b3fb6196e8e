package queries

import (
	"fmt"
	"strconv"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// bids projects the bids out of the events, early, so that nothing
// downstream moves 400-byte events.
func bids(events ringflow.Stream[nexmark.Event]) ringflow.Stream[nexmark.Bid] {
	return ringflow.FlatMapPtr(events, "bids", func(ev *nexmark.Event, out *ringflow.Collector[nexmark.Bid]) {
		if ev.Kind == nexmark.KindBid {
			out.Emit(ev.Bid)
		}
	})
}

// q0 passes every bid through.
func q0(events ringflow.Stream[nexmark.Event], out *Output) {
	sink(bids(events), out, func(dst []byte, b nexmark.Bid) []byte { return nexmark.AppendQ0Row(dst, &b) })
}

// q1Bid is a bid with its price in euros: Flink's DECIMAL(23, 3) as an
// integer number of thousandths.
type q1Bid struct {
	Auction, Bidder int64
	EuroMilli       int64 // 0.908 × price, in thousandths of a euro
	DateTime        int64
}

// euroMilliMax bounds the prices whose conversion fits in an int64.
const euroMilliMax = (1<<63 - 1) / 908

// q1 converts every bid's price from dollars to euros.
func q1(events ringflow.Stream[nexmark.Event], out *Output) {
	eur := ringflow.Map(bids(events), "euros", func(b nexmark.Bid) q1Bid {
		if b.Price > euroMilliMax || b.Price < -euroMilliMax {
			panic(fmt.Errorf("q1: price %d of the bid at %d on auction %d: its euro value overflows",
				b.Price, b.DateTime, b.Auction))
		}
		return q1Bid{Auction: b.Auction, Bidder: b.Bidder, EuroMilli: b.Price * 908, DateTime: b.DateTime}
	})
	sink(eur, out, appendQ1Row)
}

// appendQ1Row formats a q1 row as nexmark.AppendQ1Row does, from the
// converted price.
func appendQ1Row(dst []byte, b q1Bid) []byte {
	dst = strconv.AppendInt(dst, b.Auction, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, b.Bidder, 10)
	dst = append(dst, ',')
	m := uint64(b.EuroMilli)
	if b.EuroMilli < 0 {
		dst = append(dst, '-')
		m = -m
	}
	dst = strconv.AppendUint(dst, m/1000, 10)
	frac := m % 1000
	dst = append(dst, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10), ',')
	return strconv.AppendInt(dst, b.DateTime, 10)
}

// q2Bid is q2's row: a bid's auction and price.
type q2Bid struct{ Auction, Price int64 }

// q2 selects the bids on every 123rd auction.
func q2(events ringflow.Stream[nexmark.Event], out *Output) {
	sel := ringflow.FlatMapPtr(events, "select", func(ev *nexmark.Event, out *ringflow.Collector[q2Bid]) {
		if ev.Kind == nexmark.KindBid && ev.Bid.Auction%123 == 0 {
			out.Emit(q2Bid{ev.Bid.Auction, ev.Bid.Price})
		}
	})
	sink(sel, out, func(dst []byte, b q2Bid) []byte { return nexmark.AppendQ2Row(dst, b.Auction, b.Price) })
}
