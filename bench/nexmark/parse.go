package nexmark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// jsonEvent is the union of the dump format's fields.
type jsonEvent struct {
	Type         string  `json:"type"`
	ID           *int64  `json:"id"`
	Name         *string `json:"name"`
	EmailAddress *string `json:"email_address"`
	CreditCard   *string `json:"credit_card"`
	City         *string `json:"city"`
	State        *string `json:"state"`
	ItemName     *string `json:"item_name"`
	Description  *string `json:"description"`
	InitialBid   *int64  `json:"initial_bid"`
	Reserve      *int64  `json:"reserve"`
	Expires      *int64  `json:"expires"`
	Seller       *int64  `json:"seller"`
	Category     *int64  `json:"category"`
	Auction      *int64  `json:"auction"`
	Bidder       *int64  `json:"bidder"`
	Price        *int64  `json:"price"`
	Channel      *string `json:"channel"`
	URL          *string `json:"url"`
	DateTime     *int64  `json:"date_time"`
	Extra        *string `json:"extra"`
}

// ParseJSON reads one line of the --dump format (WriteJSON's output) back
// into ev, so a test can evaluate queries over a dump file. Every field must
// be present, and unknown fields are an error.
//
// NB: the extra field comes back with its length only: an Extra records how
// the generator makes the padding, and arbitrary text has no such recipe,
// so re-dumping a parsed event prints different padding of the same length.
// No query reads extra's bytes. The channel must be one of the generator's
// (its url is checked against it).
func ParseJSON(line []byte, ev *Event) error {
	var j jsonEvent
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("nexmark: parse event: %w", err)
	}
	p := parser{j: &j}
	switch j.Type {
	case "person":
		ev.Kind = KindPerson
		p.person(&ev.Person)
	case "auction":
		ev.Kind = KindAuction
		p.auction(&ev.Auction)
	case "bid":
		ev.Kind = KindBid
		p.bid(&ev.Bid)
	default:
		return fmt.Errorf("nexmark: parse event: type %q, want person, auction or bid", j.Type)
	}
	if p.err != nil {
		return fmt.Errorf("nexmark: parse %s event: %w", j.Type, p.err)
	}
	return nil
}

// parser fills an event from a decoded line, keeping the first error.
type parser struct {
	j   *jsonEvent
	err error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *parser) int(name string, v *int64) int64 {
	if v == nil {
		p.fail("missing field %s", name)
		return 0
	}
	return *v
}

func (p *parser) str(name string, v *string) string {
	if v == nil {
		p.fail("missing field %s", name)
		return ""
	}
	return *v
}

func (p *parser) text(name string, v *string, set func(string) error) {
	if err := set(p.str(name, v)); err != nil {
		p.fail("field %s: %w", name, err)
	}
}

func (p *parser) extra(x *Extra) {
	n := len(p.str("extra", p.j.Extra))
	if n >= 1<<16 {
		p.fail("field extra: %d bytes, at most %d", n, 1<<16-1)
	}
	*x = makeExtra(0, n)
}

func (p *parser) person(d *Person) {
	j := p.j
	*d = Person{ID: p.int("id", j.ID), DateTime: p.int("date_time", j.DateTime)}
	p.text("name", j.Name, d.Name.Set)
	p.text("email_address", j.EmailAddress, d.EmailAddress.Set)
	p.text("credit_card", j.CreditCard, d.CreditCard.Set)
	p.text("city", j.City, d.City.Set)
	p.text("state", j.State, d.State.Set)
	p.extra(&d.Extra)
}

func (p *parser) auction(d *Auction) {
	j := p.j
	*d = Auction{
		ID:         p.int("id", j.ID),
		InitialBid: p.int("initial_bid", j.InitialBid),
		Reserve:    p.int("reserve", j.Reserve),
		DateTime:   p.int("date_time", j.DateTime),
		Expires:    p.int("expires", j.Expires),
		Seller:     p.int("seller", j.Seller),
		Category:   p.int("category", j.Category),
	}
	p.text("item_name", j.ItemName, d.ItemName.Set)
	p.text("description", j.Description, d.Description.Set)
	p.extra(&d.Extra)
}

func (p *parser) bid(d *Bid) {
	j := p.j
	*d = Bid{
		Auction:  p.int("auction", j.Auction),
		Bidder:   p.int("bidder", j.Bidder),
		Price:    p.int("price", j.Price),
		DateTime: p.int("date_time", j.DateTime),
	}
	name, url := p.str("channel", j.Channel), p.str("url", j.URL)
	if p.err != nil {
		return
	}
	id, ok := channelByName(name)
	switch {
	case !ok:
		p.fail("field channel: unknown channel %q", name)
	case id.URL() != url:
		p.fail("field url: %q is not channel %s's url %q", url, name, id.URL())
	}
	d.ChannelID = id
	p.extra(&d.Extra)
}

// channelByName inverts ChannelID.Name.
func channelByName(name string) (ChannelID, bool) {
	for i, h := range hotChannelNames {
		if name == h {
			return ChannelID(NumChannels + i), true
		}
	}
	digits, ok := strings.CutPrefix(name, "channel-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n >= NumChannels || strconv.Itoa(n) != digits {
		return 0, false
	}
	return ChannelID(n), true
}
