package nexmark

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("nexmark.seed", "")

func mustGenerator(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func defaultN(n uint64) Config {
	cfg := DefaultConfig()
	cfg.NumEvents = n
	return cfg
}

// TestTypesAndDenseIDs checks that every aligned block of 50 event ids holds
// one person, then three auctions, then 46 bids, and that person and auction
// ids are dense and increasing from 1000.
func TestTypesAndDenseIDs(t *testing.T) {
	g := mustGenerator(t, defaultN(200_000))
	var ev Event
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	var counts [4]int
	for n := uint64(0); g.Next(&ev); n++ {
		want := KindBid
		switch n % 50 {
		case 0:
			want = KindPerson
		case 1, 2, 3:
			want = KindAuction
		}
		if ev.Kind != want {
			t.Fatalf("event %d is a %v, want a %v", n, ev.Kind, want)
		}
		counts[ev.Kind]++
		switch ev.Kind {
		case KindPerson:
			if ev.Person.ID != nextPerson {
				t.Fatalf("event %d: person id %d, want %d", n, ev.Person.ID, nextPerson)
			}
			nextPerson++
		case KindAuction:
			if ev.Auction.ID != nextAuction {
				t.Fatalf("event %d: auction id %d, want %d", n, ev.Auction.ID, nextAuction)
			}
			nextAuction++
		}
	}
	if counts[KindPerson] != 4000 || counts[KindAuction] != 12000 || counts[KindBid] != 184000 {
		t.Fatalf("counts person/auction/bid = %d/%d/%d, want 4000/12000/184000",
			counts[KindPerson], counts[KindAuction], counts[KindBid])
	}
}

// TestReferences checks Beam's reference bounds: a bid's auction lies among
// the 100 latest auctions or up to 10 ids ahead of the latest; a bidder or
// seller among the 1000 latest people or up to 10 ahead.
func TestReferences(t *testing.T) {
	g := mustGenerator(t, defaultN(300_000))
	var ev Event
	lastPerson, lastAuction := int64(-1), int64(-1) // latest ids generated so far
	checkPerson := func(n uint64, what string, id int64) {
		if id > lastPerson+personIDLead || id < max(lastPerson-999, FirstPersonID) {
			t.Fatalf("event %d: %s %d outside [%d, %d]", n, what, id, max(lastPerson-999, FirstPersonID), lastPerson+personIDLead)
		}
	}
	for n := uint64(0); g.Next(&ev); n++ {
		switch ev.Kind {
		case KindPerson:
			lastPerson = ev.Person.ID
		case KindAuction:
			lastAuction = ev.Auction.ID
			checkPerson(n, "seller", ev.Auction.Seller)
		case KindBid:
			a := ev.Bid.Auction
			if a > lastAuction+auctionIDLead || a < max(lastAuction-100, FirstAuctionID) {
				t.Fatalf("event %d: auction %d outside [%d, %d]", n, a, max(lastAuction-100, FirstAuctionID), lastAuction+auctionIDLead)
			}
			checkPerson(n, "bidder", ev.Bid.Bidder)
		}
	}
}

// TestValueRanges checks every field's domain over a long run.
func TestValueRanges(t *testing.T) {
	cfg := defaultN(200_000)
	g := mustGenerator(t, cfg)
	var ev Event
	prevTime := int64(0)
	for n := uint64(0); g.Next(&ev); n++ {
		ts := ev.DateTime()
		if ts < prevTime {
			t.Fatalf("event %d: time %d before previous %d", n, ts, prevTime)
		}
		if want := BaseTime + int64(n)*100/1000; ts != want {
			t.Fatalf("event %d: time %d, want %d (10,000 events/s)", n, ts, want)
		}
		prevTime = ts
		var err string
		switch ev.Kind {
		case KindPerson:
			err = checkPerson(&ev.Person)
		case KindAuction:
			err = checkAuction(&ev.Auction)
		case KindBid:
			err = checkBid(&ev.Bid)
		}
		if err != "" {
			t.Fatalf("event %d: %s", n, err)
		}
	}
}

func checkPrice(p int64) bool { return p >= 100 && p <= 100_000_000 }

func checkPerson(p *Person) string {
	name := p.Name.String()
	first, last, ok := strings.Cut(name, " ")
	if !ok || !contains(firstNames[:], first) || !contains(lastNames[:], last) {
		return "bad name " + name
	}
	if !contains(usCities[:], p.City.String()) || !contains(usStates[:], p.State.String()) {
		return "bad city/state " + p.City.String() + "/" + p.State.String()
	}
	cc := p.CreditCard.Bytes()
	for i, c := range cc {
		if (i%5 == 4) != (c == ' ') || (c != ' ' && (c < '0' || c > '9')) {
			return "bad credit card " + string(cc)
		}
	}
	email := p.EmailAddress.String()
	if !strings.HasSuffix(email, ".com") || strings.Count(email, "@") != 1 {
		return "bad email " + email
	}
	d := 200 - (8 + len(name) + len(email) + len(cc) + len(p.City.Bytes()) + len(p.State.Bytes()))
	delta := int(javaRound(float64(d) * 0.2))
	if n := p.Extra.Len(); n < d-delta || n >= d+delta {
		return "extra length out of range"
	}
	return ""
}

func checkAuction(a *Auction) string {
	switch {
	case a.Category < 10 || a.Category > 14:
		return "category out of [10, 14]"
	case !checkPrice(a.InitialBid):
		return "initial bid out of [100, 1e8]"
	case a.Reserve-a.InitialBid < 100 || a.Reserve-a.InitialBid > 100_000_000:
		return "reserve - initial bid out of [100, 1e8]"
	case a.Expires <= a.DateTime:
		return "expires not after date_time"
	case len(a.ItemName.Bytes()) > 19 || len(a.Description.Bytes()) > 99:
		return "item name or description too long"
	}
	for _, b := range [][]byte{a.ItemName.Bytes(), a.Description.Bytes()} {
		if bytes.HasPrefix(b, []byte(" ")) || bytes.HasSuffix(b, []byte(" ")) {
			return "untrimmed text " + string(b)
		}
	}
	return ""
}

func checkBid(b *Bid) string {
	switch {
	case !checkPrice(b.Price):
		return "price out of [100, 1e8]"
	case b.Extra.Len() < 54 || b.Extra.Len() > 81: // 100-32 = 68 bytes, +-14
		return "extra length out of [54, 81]"
	case b.Channel() == "" || !strings.HasPrefix(b.URL(), "https://www.nexmark.com/"):
		return "bad channel " + b.Channel() + " " + b.URL()
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestHotKeyShares checks Beam's hot-key ratios: about 1/2 of bids go to the
// hot auction (plus the random ones that hit it anyway), 3/4 come from the
// hot bidder, 3/4 of auctions from the hot seller, and half the bids carry a
// hot channel. Tolerances are loose because java.util.Randoms with
// consecutive seeds make correlated first draws (runs of a few thousand
// events decide alike), which is Beam's behaviour too.
func TestHotKeyShares(t *testing.T) {
	g := mustGenerator(t, defaultN(200_000))
	var ev Event
	var bids, auctions, hotAuction, hotBidder, hotSeller, hotChannel float64
	for g.Next(&ev) {
		id := int64(g.Position() - 1)
		switch ev.Kind {
		case KindBid:
			bids++
			if ev.Bid.Auction == lastBase0AuctionID(id)/hotBlock*hotBlock+FirstAuctionID {
				hotAuction++
			}
			if ev.Bid.Bidder == lastBase0PersonID(id)/hotBlock*hotBlock+1+FirstPersonID {
				hotBidder++
			}
			if ev.Bid.ChannelID >= NumChannels {
				hotChannel++
			}
		case KindAuction:
			auctions++
			if ev.Auction.Seller == lastBase0PersonID(id)/hotBlock*hotBlock+FirstPersonID {
				hotSeller++
			}
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"hot auction", hotAuction / bids, 0.5},
		{"hot bidder", hotBidder / bids, 0.75},
		{"hot seller", hotSeller / auctions, 0.75},
		{"hot channel", hotChannel / bids, 0.5},
	} {
		if c.got < c.want-0.03 || c.got > c.want+0.03 {
			t.Errorf("%s share %.4f, want %.2f +- 0.03", c.name, c.got, c.want)
		} else {
			t.Logf("%s share %.4f (want %.2f)", c.name, c.got, c.want)
		}
	}
}

// collect returns the events of cfg in order, with their numbers.
func collect(t *testing.T, cfg Config) ([]uint64, []Event) {
	t.Helper()
	g := mustGenerator(t, cfg)
	var nums []uint64
	var evs []Event
	var ev Event
	for {
		pos := g.Position()
		if !g.Next(&ev) {
			return nums, evs
		}
		nums = append(nums, pos)
		evs = append(evs, ev)
	}
}

// TestSplitUnion splits a stream into 1, 2, 3 and 7 parts (and a part again
// into 3) and checks that the parts are disjoint and that their union, put
// in event-number order, equals the unsplit stream event for event.
func TestSplitUnion(t *testing.T) {
	const n = 10_007
	whole := defaultN(n)
	_, want := collect(t, whole)
	if len(want) != n {
		t.Fatalf("unsplit stream has %d events, want %d", len(want), n)
	}
	check := func(name string, parts []Config) {
		got := make([]Event, n)
		seen := make([]bool, n)
		for _, p := range parts {
			nums, evs := collect(t, p)
			for i, num := range nums {
				if seen[num] {
					t.Fatalf("%s: event %d generated twice", name, num)
				}
				seen[num] = true
				got[num] = evs[i]
			}
		}
		for i := range got {
			if !seen[i] {
				t.Fatalf("%s: event %d generated by no part", name, i)
			}
			if !sameEvent(&got[i], &want[i]) {
				t.Fatalf("%s: event %d differs from the unsplit stream", name, i)
			}
		}
	}
	for _, k := range []int{1, 2, 3, 7} {
		parts, err := whole.Split(k)
		if err != nil {
			t.Fatal(err)
		}
		check("split "+string(rune('0'+k)), parts)
	}
	halves, _ := whole.Split(2)
	thirds, err := halves[1].Split(3)
	if err != nil {
		t.Fatal(err)
	}
	check("split 2 then 3", append(thirds, halves[0]))
}

// sameEvent compares the valid member only: Next leaves the others stale.
func sameEvent(a, b *Event) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindPerson:
		return a.Person == b.Person
	case KindAuction:
		return a.Auction == b.Auction
	case KindBid:
		return a.Bid == b.Bid
	}
	return true
}

// TestSeekEqualsReplay checks that a generator sought to a position yields
// exactly what a fresh one yields from that position on, for random
// positions of random splits.
func TestSeekEqualsReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	for range 50 {
		parts, err := defaultN(1 + rng.Uint64N(5_000)).Split(1 + rng.IntN(4))
		if err != nil {
			t.Fatal(err)
		}
		p := parts[rng.IntN(len(parts))]
		nums, want := collect(t, p)
		g := mustGenerator(t, p)
		var ev Event
		for range rng.IntN(20) { // move it somewhere first
			g.Next(&ev)
		}
		k := rng.IntN(len(nums) + 1)
		pos := p.Start + uint64(k)*p.Stride
		if err := g.Seek(pos); err != nil {
			t.Fatal(err)
		}
		for i := k; i < len(nums); i++ {
			if g.Position() != nums[i] {
				t.Fatalf("after Seek(%d): position %d, want %d", pos, g.Position(), nums[i])
			}
			if !g.Next(&ev) || !sameEvent(&ev, &want[i]) {
				t.Fatalf("after Seek(%d): event %d differs from replay", pos, nums[i])
			}
		}
		if g.Next(&ev) {
			t.Fatalf("after Seek(%d): generated past the end", pos)
		}
	}
}

func TestSeekRejectsForeignPosition(t *testing.T) {
	parts, _ := defaultN(100).Split(3)
	g := mustGenerator(t, parts[1]) // events 1, 4, 7, ...
	for _, pos := range []uint64{0, 2, 3, 5} {
		if err := g.Seek(pos); err == nil || !strings.Contains(err.Error(), "not an event of this generator") {
			t.Errorf("Seek(%d) on part 1 of 3: err = %v, want a rejection", pos, err)
		}
	}
	if err := g.Seek(1000); err != nil { // past the end is allowed: exhausted
		t.Fatal(err)
	}
	var ev Event
	if g.Next(&ev) {
		t.Fatal("Next after Seek past the end yielded an event")
	}
}

// TestConfigErrors checks that each invalid field is named in the error.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"EventsPerSecond", func(c *Config) { c.EventsPerSecond = 0 }},
		{"EventsPerSecond", func(c *Config) { c.EventsPerSecond = 2_000_000 }},
		{"HotAuctionRatio", func(c *Config) { c.HotAuctionRatio = 0 }},
		{"HotSellersRatio", func(c *Config) { c.HotSellersRatio = -1 }},
		{"HotBiddersRatio", func(c *Config) { c.HotBiddersRatio = 0 }},
		{"NumInFlightAuctions", func(c *Config) { c.NumInFlightAuctions = 0 }},
		{"NumActivePeople", func(c *Config) { c.NumActivePeople = 0 }},
		{"AvgBidBytes", func(c *Config) { c.AvgBidBytes = -1 }},
		{"AvgAuctionBytes", func(c *Config) { c.AvgAuctionBytes = 1 << 30 }},
		{"Stride", func(c *Config) { c.Stride = 0 }},
		{"NumEvents", func(c *Config) { c.NumEvents = 1 << 60 }},
		{"Config", func(c *Config) { *c = Config{} }},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.edit(&cfg)
		_, err := NewGenerator(cfg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: NewGenerator error %v, want one naming %s", c.field, err, c.field)
		}
	}
	if _, err := DefaultConfig().Split(0); err == nil {
		t.Error("Split(0) succeeded")
	}
	g := mustGenerator(t, defaultN(10))
	var ev Event
	if err := g.EventAt(10, &ev); err == nil {
		t.Error("EventAt past the end succeeded")
	}
}

// TestNoAllocation checks that Next allocates nothing, for every event kind.
func TestNoAllocation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g := mustGenerator(t, cfg)
	var ev Event
	allocs := testing.AllocsPerRun(10_000, func() { g.Next(&ev) })
	if allocs != 0 {
		t.Fatalf("Next allocates %.2f times per event", allocs)
	}
	buf := make([]byte, 0, 1<<12)
	allocs = testing.AllocsPerRun(1_000, func() {
		g.Next(&ev)
		buf = AppendQ0Row(buf[:0], &ev.Bid)
		buf = AppendQ1Row(buf[:0], &ev.Bid)
		buf = ev.Bid.Extra.AppendTo(buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("row formatting allocates %.2f times per event", allocs)
	}
}

// BenchmarkGenerator measures generator-only throughput: Next into one
// reused Event, extra not rendered (as a query that never reads it sees it).
func BenchmarkGenerator(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g := mustGenerator(b, cfg)
	var ev Event
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.Next(&ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkGeneratorWithExtra also renders each event's extra string, the
// cost Flink's generator always pays.
func BenchmarkGeneratorWithExtra(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g := mustGenerator(b, cfg)
	var ev Event
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.Next(&ev)
		switch ev.Kind {
		case KindPerson:
			buf = ev.Person.Extra.AppendTo(buf[:0])
		case KindAuction:
			buf = ev.Auction.Extra.AppendTo(buf[:0])
		case KindBid:
			buf = ev.Bid.Extra.AppendTo(buf[:0])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkWriteJSON measures the --dump format.
func BenchmarkWriteJSON(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g := mustGenerator(b, cfg)
	var ev Event
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.Next(&ev)
		buf, _ = AppendJSON(buf[:0], &ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
