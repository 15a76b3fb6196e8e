package nexmark

import "fmt"

// Kind tags which member of an Event is valid.
type Kind uint8

// Event kinds. The zero Kind marks an Event that holds nothing.
const (
	KindPerson Kind = iota + 1
	KindAuction
	KindBid
)

// String returns "person", "auction" or "bid", the `type` of the JSON dump.
func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one generated event, a tagged union: only the member that Kind
// names is meaningful; Generator.Next leaves the other two as they were.
// It holds no pointers, so it can be copied into ring memory as it is.
type Event struct {
	Kind    Kind
	Person  Person
	Auction Auction
	Bid     Bid
}

// DateTime is the event time of the valid member, epoch milliseconds.
func (e *Event) DateTime() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	case KindBid:
		return e.Bid.DateTime
	}
	return 0
}

// Person is a new user of the auction site.
type Person struct {
	ID           int64
	Name         Text16 // "First Last"
	EmailAddress Text16
	CreditCard   Text32 // "dddd dddd dddd dddd"
	City         Text16
	State        Text16 // two letters
	DateTime     int64  // epoch ms
	Extra        Extra
}

// Auction is a new item put up for sale.
type Auction struct {
	ID          int64
	ItemName    Text32
	Description Text128
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // epoch ms
	Expires     int64 // epoch ms
	Seller      int64 // a Person.ID
	Category    int64
	Extra       Extra
}

// Bid is an offer on an auction. Channel and URL are Flink's additions to
// Beam's model, both determined by ChannelID.
type Bid struct {
	Auction   int64 // an Auction.ID
	Bidder    int64 // a Person.ID
	Price     int64
	DateTime  int64 // epoch ms
	Extra     Extra
	ChannelID ChannelID
}

// Channel is the bid's channel name ("Google", ..., "channel-4711").
func (b *Bid) Channel() string { return b.ChannelID.Name() }

// URL is the bid's URL.
func (b *Bid) URL() string { return b.ChannelID.URL() }
