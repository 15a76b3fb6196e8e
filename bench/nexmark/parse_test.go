package nexmark

import (
	"strings"
	"testing"
)

// TestParseJSONRoundTrip dumps generated events and parses them back: every
// field but extra's bytes must survive (extra keeps its length).
func TestParseJSONRoundTrip(t *testing.T) {
	g := mustGenerator(t, defaultN(5_000))
	var ev, back Event
	for g.Next(&ev) {
		line, err := AppendJSON(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := ParseJSON(line, &back); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		want := ev
		switch ev.Kind { // the one documented loss: extra's recipe
		case KindPerson:
			want.Person.Extra = makeExtra(0, ev.Person.Extra.Len())
		case KindAuction:
			want.Auction.Extra = makeExtra(0, ev.Auction.Extra.Len())
		case KindBid:
			want.Bid.Extra = makeExtra(0, ev.Bid.Extra.Len())
		}
		if !sameEvent(&back, &want) {
			t.Fatalf("round trip changed %s", line)
		}
	}
}

// TestParseJSONErrors checks that bad lines are rejected with the reason.
func TestParseJSONErrors(t *testing.T) {
	bid := `{"type":"bid","auction":1,"bidder":2,"price":3,"channel":"channel-7","url":"%s","date_time":4,"extra":"x"}`
	for _, c := range []struct{ line, want string }{
		{`not json`, "invalid character"},
		{`{"type":"sale"}`, `type "sale"`},
		{`{"type":"bid","auction":1}`, "missing field bidder"},
		{`{"type":"bid","auction":1,"colour":"red"}`, "unknown field"},
		{strings.Replace(bid, "channel-7", "channel-10000", 1), "unknown channel"},
		{strings.Replace(bid, "channel-7", "channel-07", 1), "unknown channel"},
		{bid, "is not channel channel-7's url"},
		{`{"type":"person","id":1,"name":"A name much too long for it","email_address":"","credit_card":"","city":"","state":"","date_time":1,"extra":""}`, "field name"},
	} {
		var ev Event
		err := ParseJSON([]byte(c.line), &ev)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseJSON(%s) = %v, want an error containing %q", c.line, err, c.want)
		}
	}
}

// FuzzParseJSON checks that no input makes ParseJSON panic, and that what
// it accepts dumps and parses back to the same event.
func FuzzParseJSON(f *testing.F) {
	g := mustGenerator(f, defaultN(60))
	var ev Event
	for g.Next(&ev) {
		line, _ := AppendJSON(nil, &ev)
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var a, b Event
		if ParseJSON(line, &a) != nil {
			return
		}
		again, err := AppendJSON(nil, &a)
		if err != nil {
			t.Fatal(err)
		}
		if err := ParseJSON(again, &b); err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		if !sameEvent(&a, &b) {
			t.Fatalf("re-parse of %s differs", again)
		}
	})
}
