package nexmark

import "fmt"

// Generator yields the events of one Config in event-number order. It is a
// value-sized state machine (its position is one integer), not safe for
// concurrent use; give each source its own, from Config.Split.
type Generator struct {
	cfg     Config
	end     uint64 // exclusive bound on event numbers
	pos     uint64 // next event number
	delayUs int64

	// Derived once so that Next does no division by configuration.
	numEventsForAuctions int64 // events until NumInFlightAuctions more auctions exist
}

// NewGenerator returns a generator positioned at cfg.Start, or the reason
// cfg is invalid.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:     cfg,
		end:     cfg.end(),
		pos:     cfg.Start,
		delayUs: cfg.interEventDelayUs(),
		numEventsForAuctions: int64(cfg.NumInFlightAuctions) * proportionDenom /
			auctionProportion,
	}
	return g, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// Position is the number of the next event Next will yield (or would, were
// the stream not exhausted). A source checkpoints it and restores with Seek.
func (g *Generator) Position() uint64 { return g.pos }

// Seek makes pos the next event number. pos must be one this generator
// yields: Start + k*Stride for some k >= 0 (it may lie past the end, leaving
// the generator exhausted).
func (g *Generator) Seek(pos uint64) error {
	if pos < g.cfg.Start || (pos-g.cfg.Start)%g.cfg.Stride != 0 {
		return fmt.Errorf("nexmark: Seek(%d): not an event of this generator (start %d, stride %d)",
			pos, g.cfg.Start, g.cfg.Stride)
	}
	g.pos = pos
	return nil
}

// Next writes the next event into ev and reports whether there was one. It
// does not allocate, and it writes only ev.Kind and the member Kind names.
func (g *Generator) Next(ev *Event) bool {
	if g.pos >= g.end {
		return false
	}
	g.fill(ev, g.pos)
	g.pos += g.cfg.Stride // NB: Validate bounds Start and Stride, so no overflow.
	return true
}

// EventAt writes event number n of the whole stream into ev, whatever this
// generator's position and split: every event is a function of its number.
func (g *Generator) EventAt(n uint64, ev *Event) error {
	if n >= g.end {
		return fmt.Errorf("nexmark: EventAt(%d): stream has %d events", n, g.end)
	}
	g.fill(ev, n)
	return nil
}

// fill makes event number n, which is also its event id (Beam's
// firstEventId is 0), with a java.util.Random seeded with that id.
func (g *Generator) fill(ev *Event, n uint64) {
	id := int64(n)
	ts := g.cfg.BaseTimeMs + id*g.delayUs/1000
	r := newJavaRandom(id)
	switch rem := id % proportionDenom; {
	case rem < personProportion:
		ev.Kind = KindPerson
		g.person(&ev.Person, id, &r, ts)
	case rem < personProportion+auctionProportion:
		ev.Kind = KindAuction
		g.auction(&ev.Auction, id, &r, ts)
	default:
		ev.Kind = KindBid
		g.bid(&ev.Bid, id, &r, ts)
	}
}

// person is Beam's PersonGenerator.nextPerson.
func (g *Generator) person(p *Person, id int64, r *javaRandom, ts int64) {
	*p = Person{} // NB: clears text bytes past each length, so equal events are == equal.
	p.ID = lastBase0PersonID(id) + FirstPersonID
	first := r.nextIntn(int32(len(firstNames)))
	last := r.nextIntn(int32(len(lastNames)))
	size := 8
	size += setWord(p.Name[:], fullNames[first][last])
	size += setEmail(&p.EmailAddress, r)
	size += setCreditCard(&p.CreditCard, r)
	size += setWord(p.City[:], usCities[r.nextIntn(int32(len(usCities)))])
	size += setWord(p.State[:], usStates[r.nextIntn(int32(len(usStates)))])
	p.DateTime = ts
	p.Extra = nextExtra(r, size, g.cfg.AvgPersonBytes)
}

// auction is Beam's AuctionGenerator.nextAuction.
func (g *Generator) auction(a *Auction, id int64, r *javaRandom, ts int64) {
	*a = Auction{}
	a.ID = lastBase0AuctionID(id) + FirstAuctionID
	if r.nextIntn(int32(g.cfg.HotSellersRatio)) > 0 {
		// The first person of the latest block of 100 is the hot seller.
		a.Seller = lastBase0PersonID(id) / hotBlock * hotBlock
	} else {
		a.Seller = g.nextBase0PersonID(id, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(r.nextIntn(numCategories))
	a.InitialBid = nextPrice(r)
	a.DateTime = ts
	a.Expires = ts + g.nextAuctionLengthMs(id, r, ts)
	nameLen := setRandomText(a.ItemName[:], r, 20)
	descLen := setRandomText(a.Description[:], r, 100)
	a.Reserve = a.InitialBid + nextPrice(r)
	size := 8 + nameLen + descLen + 8 + 8 + 8 + 8 + 8
	a.Extra = nextExtra(r, size, g.cfg.AvgAuctionBytes)
}

// bid is Beam's BidGenerator.nextBid, plus Flink's channel. The channel is
// drawn from a second java.util.Random so that every field Beam has stays
// bit-identical to Beam's (Flink draws it between the price and the extra);
// that Random's seed is the event id passed through splitmix64, because the
// first draws of java.util.Randoms with consecutive seeds are strongly
// correlated.
func (g *Generator) bid(b *Bid, id int64, r *javaRandom, ts int64) {
	if r.nextIntn(int32(g.cfg.HotAuctionRatio)) > 0 {
		// The first auction of the latest block of 100 is the hot one.
		b.Auction = lastBase0AuctionID(id) / hotBlock * hotBlock
	} else {
		b.Auction = g.nextBase0AuctionID(id, r)
	}
	b.Auction += FirstAuctionID
	if r.nextIntn(int32(g.cfg.HotBiddersRatio)) > 0 {
		// The second person of the block, so hot bidders are not hot sellers.
		b.Bidder = lastBase0PersonID(id)/hotBlock*hotBlock + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id, r)
	}
	b.Bidder += FirstPersonID
	b.Price = nextPrice(r)
	b.DateTime = ts
	b.Extra = nextExtra(r, 8+8+8+8, g.cfg.AvgBidBytes)
	cr := newJavaRandom(int64(splitmix64(uint64(id))))
	b.ChannelID = nextChannel(&cr)
}

// lastBase0PersonID is the id (from 0) of the latest person at or before
// event id: the current one when id is a person event.
func lastBase0PersonID(id int64) int64 {
	epoch, offset := id/proportionDenom, id%proportionDenom
	if offset >= personProportion {
		offset = personProportion - 1
	}
	return epoch*personProportion + offset
}

// lastBase0AuctionID is the id (from 0) of the latest auction at or before
// event id: the current one when id is an auction event.
func lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/proportionDenom, id%proportionDenom
	switch {
	case offset < personProportion: // a person: the last auction of the previous epoch
		epoch--
		offset = auctionProportion - 1
	case offset >= personProportion+auctionProportion: // a bid: this epoch's last auction
		offset = auctionProportion - 1
	default:
		offset -= personProportion
	}
	return epoch*auctionProportion + offset
}

// nextBase0PersonID picks one of the NumActivePeople latest people, or one
// of the next personIDLead not yet created.
func (g *Generator) nextBase0PersonID(id int64, r *javaRandom) int64 {
	numPeople := lastBase0PersonID(id) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + r.nextLongn(active+personIDLead)
}

// nextBase0AuctionID picks one of the NumInFlightAuctions latest auctions,
// or one of the next auctionIDLead not yet created.
func (g *Generator) nextBase0AuctionID(id int64, r *javaRandom) int64 {
	maxAuction := lastBase0AuctionID(id)
	minAuction := max(maxAuction-int64(g.cfg.NumInFlightAuctions), 0)
	return minAuction + r.nextLongn(maxAuction-minAuction+1+auctionIDLead)
}

// nextAuctionLengthMs draws an auction length averaging the event time it
// takes to create NumInFlightAuctions more auctions.
func (g *Generator) nextAuctionLengthMs(id int64, r *javaRandom, ts int64) int64 {
	future := g.cfg.BaseTimeMs + (id+g.numEventsForAuctions)*g.delayUs/1000
	horizonMs := future - ts
	return 1 + r.nextLongn(max(horizonMs*2, 1))
}

// fullNames holds "First Last" for every pair, so a person's name is a copy.
var fullNames = func() (t [len(firstNames)][len(lastNames)]string) {
	for i, f := range firstNames {
		for j, l := range lastNames {
			t[i][j] = f + " " + l
		}
	}
	return t
}()

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}
