package queries

import (
	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// q3Rec is one input of q3's join: a person, or an auction in category 10.
type q3Rec struct {
	Person            bool
	Seller            int64 // the person's id, or the auction's seller
	Auction           int64 // the auction's id
	Name, City, State nexmark.Text16
}

// q3Row is q3's result: an auction and its seller's name and address.
type q3Row struct {
	Name, City, State nexmark.Text16
	Auction           int64
}

// q3 is "local item suggestion": every category-10 auction whose seller
// lives in Oregon, Idaho or California, with the seller's name and city.
// It is an incremental (unwindowed) join, so it emits each pair as soon as
// its second half arrives.
func q3(events ringflow.Stream[nexmark.Event], out *Output) {
	recs := ringflow.FlatMapPtr(events, "people-and-auctions",
		func(ev *nexmark.Event, out *ringflow.Collector[q3Rec]) {
			switch {
			case ev.Kind == nexmark.KindPerson:
				p := &ev.Person
				out.Emit(q3Rec{Person: true, Seller: p.ID, Name: p.Name, City: p.City, State: p.State})
			case ev.Kind == nexmark.KindAuction && ev.Auction.Category == 10:
				out.Emit(q3Rec{Seller: ev.Auction.Seller, Auction: ev.Auction.ID})
			}
		})
	bySeller := ringflow.KeyBy(recs, func(r q3Rec) int64 { return r.Seller })
	joined := ringflow.Process(bySeller, "join", func() ringflow.ProcessFunc[int64, q3Rec, q3Row] { return &q3Join{} })
	sink(joined, out, func(dst []byte, r q3Row) []byte {
		return nexmark.AppendQ3Row(dst, r.Name.Bytes(), r.City.Bytes(), r.State.Bytes(), r.Auction)
	})
}

// q3Seller is what q3 remembers of a person: whether they live in one of
// the selected states, and then their name and address.
type q3Seller struct {
	Selected          bool
	Name, City, State nexmark.Text16
}

// q3Join joins auctions with their sellers, keyed by person id. People are
// kept (every person, so that an auction of an unselected seller is dropped
// on arrival rather than kept waiting); auctions are kept only until their
// seller arrives: a bid stream may name a seller up to 10 people ahead.
type q3Join struct {
	sellers *ringflow.ValueState[int64, q3Seller]
	pending *ringflow.ValueState[int64, []int64] // auction ids waiting for their seller
}

func (j *q3Join) Open(s *ringflow.KeyedScope[int64]) error {
	j.sellers = ringflow.NewValueState[int64, q3Seller](s, "seller")
	j.pending = ringflow.NewValueState[int64, []int64](s, "pending")
	return nil
}

func (j *q3Join) Process(ctx *ringflow.KeyedContext[int64], r q3Rec, out *ringflow.Collector[q3Row]) error {
	if !r.Person {
		s, known := j.sellers.Value()
		switch {
		case !known:
			waiting, _ := j.pending.Value()
			// NB: append only ever writes past the length a snapshot of the
			// old slice header sees, so this is copy-on-write safe.
			j.pending.Update(append(waiting, r.Auction))
		case s.Selected:
			out.Emit(q3Row{Name: s.Name, City: s.City, State: s.State, Auction: r.Auction})
		}
		return nil
	}
	s := q3Seller{Selected: selectedState(&r.State)}
	if s.Selected {
		s.Name, s.City, s.State = r.Name, r.City, r.State
	}
	j.sellers.Update(s)
	waiting, _ := j.pending.Value()
	if s.Selected {
		for _, a := range waiting {
			out.Emit(q3Row{Name: s.Name, City: s.City, State: s.State, Auction: a})
		}
	}
	if waiting != nil {
		j.pending.Clear()
	}
	return nil
}

func (j *q3Join) OnTimer(*ringflow.KeyedContext[int64], int64, ringflow.TimeDomain, *ringflow.Collector[q3Row]) error {
	return nil
}

// selectedState reports whether a person's state is OR, ID or CA.
func selectedState(t *nexmark.Text16) bool {
	switch string(t.Bytes()) {
	case "OR", "ID", "CA":
		return true
	}
	return false
}
