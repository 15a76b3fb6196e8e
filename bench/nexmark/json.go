package nexmark

import (
	"fmt"
	"io"
	"strconv"
)

// WriteJSON writes ev as one line of JSON (the `--dump` format): an object
// whose "type" is "person", "auction" or "bid", followed by every field of
// that event in snake_case, in the order of Beam's model, times in epoch
// milliseconds. Bids carry Flink's "channel" and "url". For example:
//
//	{"type":"bid","auction":1000,"bidder":1001,"price":2349,"channel":"Google","url":"https://...","date_time":1436918400100,"extra":"..."}
//
// It returns the writer's error, or an error for an Event of no Kind.
func WriteJSON(w io.Writer, ev *Event) error {
	var buf [1024]byte
	b, err := AppendJSON(buf[:0], ev)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// AppendJSON appends WriteJSON's line, newline included, to dst.
func AppendJSON(dst []byte, ev *Event) ([]byte, error) {
	switch ev.Kind {
	case KindPerson:
		return appendPersonJSON(dst, &ev.Person), nil
	case KindAuction:
		return appendAuctionJSON(dst, &ev.Auction), nil
	case KindBid:
		return appendBidJSON(dst, &ev.Bid), nil
	}
	return dst, fmt.Errorf("nexmark: JSON of an event of kind %v", ev.Kind)
}

func appendPersonJSON(b []byte, p *Person) []byte {
	b = append(b, `{"type":"person","id":`...)
	b = strconv.AppendInt(b, p.ID, 10)
	b = jsonField(b, "name", p.Name.Bytes())
	b = jsonField(b, "email_address", p.EmailAddress.Bytes())
	b = jsonField(b, "credit_card", p.CreditCard.Bytes())
	b = jsonField(b, "city", p.City.Bytes())
	b = jsonField(b, "state", p.State.Bytes())
	b = jsonInt(b, "date_time", p.DateTime)
	return jsonExtra(b, p.Extra)
}

func appendAuctionJSON(b []byte, a *Auction) []byte {
	b = append(b, `{"type":"auction","id":`...)
	b = strconv.AppendInt(b, a.ID, 10)
	b = jsonField(b, "item_name", a.ItemName.Bytes())
	b = jsonField(b, "description", a.Description.Bytes())
	b = jsonInt(b, "initial_bid", a.InitialBid)
	b = jsonInt(b, "reserve", a.Reserve)
	b = jsonInt(b, "date_time", a.DateTime)
	b = jsonInt(b, "expires", a.Expires)
	b = jsonInt(b, "seller", a.Seller)
	b = jsonInt(b, "category", a.Category)
	return jsonExtra(b, a.Extra)
}

func appendBidJSON(b []byte, x *Bid) []byte {
	b = append(b, `{"type":"bid","auction":`...)
	b = strconv.AppendInt(b, x.Auction, 10)
	b = jsonInt(b, "bidder", x.Bidder)
	b = jsonInt(b, "price", x.Price)
	b = jsonStringField(b, "channel", x.Channel())
	b = jsonStringField(b, "url", x.URL())
	b = jsonInt(b, "date_time", x.DateTime)
	return jsonExtra(b, x.Extra)
}

func jsonInt(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func jsonField(b []byte, name string, v []byte) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '"')
	for _, c := range v {
		b = jsonByte(b, c)
	}
	return append(b, '"')
}

func jsonStringField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '"')
	for i := 0; i < len(v); i++ {
		b = jsonByte(b, v[i])
	}
	return append(b, '"')
}

// jsonExtra renders the extra field and closes the object. Its bytes are
// 'H'..'z', which include the backslash.
func jsonExtra(b []byte, x Extra) []byte {
	b = append(b, `,"extra":"`...)
	var tmp [512]byte
	for _, c := range x.AppendTo(tmp[:0]) {
		b = jsonByte(b, c)
	}
	return append(b, '"', '}', '\n')
}

// jsonByte appends c escaped for a JSON string. Generated text is ASCII;
// bytes >= 0x80 pass through unchanged.
func jsonByte(b []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(b, '\\', c)
	case c < 0x20:
		const hex = "0123456789abcdef"
		return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
	}
	return append(b, c)
}
