package queries

import (
	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// q8Rec is a new person (ID is theirs) or a new auction (ID is its
// seller's).
type q8Rec struct {
	Person bool
	ID     int64
	Name   nexmark.Text16
}

// q8Row is q8's result: a window and a person who joined and opened an
// auction in it.
type q8Row struct {
	WindowStart, Person int64
	Name                nexmark.Text16
}

// q8 is "monitor new users": the people who created an auction in the 10 s
// tumbling window they joined in, each once. Auctions are first counted per
// seller and window, so that the window join sees each seller once per
// window and emits each (window, person) once however many auctions they
// opened.
func q8(events ringflow.Stream[nexmark.Event], out *Output) {
	recs := ringflow.FlatMapPtr(events, "people-and-auctions", func(ev *nexmark.Event, out *ringflow.Collector[q8Rec]) {
		switch ev.Kind {
		case nexmark.KindPerson:
			out.Emit(q8Rec{Person: true, ID: ev.Person.ID, Name: ev.Person.Name})
		case nexmark.KindAuction:
			out.Emit(q8Rec{ID: ev.Auction.Seller})
		}
	})
	id := func(r q8Rec) int64 { return r.ID }
	people := ringflow.Filter(recs, "people", func(r q8Rec) bool { return r.Person })
	auctions := ringflow.Filter(recs, "auctions", func(r q8Rec) bool { return !r.Person })
	sellers := ringflow.Window(ringflow.KeyBy(auctions, id), "sellers", ringflow.TumblingWindows(q8Size), count[q8Rec]{})
	joined := ringflow.WindowJoin(ringflow.KeyBy(people, id),
		ringflow.KeyBy(sellers, func(s ringflow.WindowResult[int64, int64]) int64 { return s.Key }),
		"join", ringflow.TumblingWindows(q8Size),
		func(p q8Rec, s ringflow.WindowResult[int64, int64]) q8Row {
			return q8Row{WindowStart: s.Start, Person: p.ID, Name: p.Name}
		})
	sink(joined, out, func(dst []byte, r q8Row) []byte {
		return nexmark.AppendQ8Row(dst, r.WindowStart, r.Person, r.Name.Bytes())
	})
}
