package oracle

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/bench/nexmark"
)

// t0 is the Nexmark base time, a multiple of every window size.
const t0 = nexmark.BaseTime

func bid(auction, bidder, price, at int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindBid, Bid: nexmark.Bid{Auction: auction, Bidder: bidder, Price: price, DateTime: at}}
}

func auction(id, seller, category, at int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindAuction, Auction: nexmark.Auction{ID: id, Seller: seller, Category: category, DateTime: at}}
}

func person(t *testing.T, id int64, name, city, state string, at int64) nexmark.Event {
	t.Helper()
	ev := nexmark.Event{Kind: nexmark.KindPerson, Person: nexmark.Person{ID: id, DateTime: at}}
	for _, err := range []error{ev.Person.Name.Set(name), ev.Person.City.Set(city), ev.Person.State.Set(state)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

// ms renders t0+d as a row field.
func ms(d int64) string { return strconv.FormatInt(t0+d, 10) }

func expect(t *testing.T, query string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", query, got, want)
	}
}

func TestStatelessQueries(t *testing.T) {
	events := []nexmark.Event{
		bid(1000, 1001, 100, t0),
		auction(1107, 1000, 10, t0+1), // not a bid: no row
		bid(1107, 1002, 1001, t0+2),   // 1107 = 9*123
		bid(1230, 1003, 7, t0+3),      // 1230 = 10*123
	}
	expect(t, "q0", Q0(events), "1000,1001,100,"+ms(0), "1107,1002,1001,"+ms(2), "1230,1003,7,"+ms(3))
	expect(t, "q1", Q1(events), "1000,1001,90.800,"+ms(0), "1107,1002,908.908,"+ms(2), "1230,1003,6.356,"+ms(3))
	expect(t, "q2", Q2(events), "1107,1001", "1230,7")
}

// TestQ3 covers the join's filters and both arrival orders.
func TestQ3(t *testing.T) {
	events := []nexmark.Event{
		auction(1, 2000, 10, t0),                                 // seller arrives later: still joined
		person(t, 2000, "Paul Abrams", "Boise", "ID", t0+1),      //
		person(t, 2001, "Kate Smith", "Kent", "WA", t0+2),        // state not wanted
		auction(2, 2001, 10, t0+3),                               //
		person(t, 2002, "Luke White", "Los Angeles", "CA", t0+4), //
		auction(3, 2002, 11, t0+5),                               // category not wanted
		auction(4, 2002, 10, t0+6),                               //
		auction(5, 2002, 10, t0+7),                               // a second auction: a second row
		auction(6, 2999, 10, t0+8),                               // seller never seen
		person(t, 2003, "Saul Noris", "Bend", "OR", t0+9),        // sells nothing
	}
	expect(t, "q3", Q3(events),
		"Paul Abrams,Boise,ID,1",
		"Luke White,Los Angeles,CA,4",
		"Luke White,Los Angeles,CA,5")
}

// TestQ5 checks window assignment at the edges and the >= max rule.
func TestQ5(t *testing.T) {
	events := []nexmark.Event{
		bid(7, 1, 1, t0+1000),
		bid(7, 1, 1, t0+1500),
		bid(8, 1, 1, t0+2500),
		bid(9, 1, 1, t0+10_000), // windows from t0+2000 to t0+10000, not t0
	}
	expect(t, "q5", Q5(events),
		ms(-8000)+",7,2",
		ms(-6000)+",7,2",
		ms(-4000)+",7,2",
		ms(-2000)+",7,2",
		ms(0)+",7,2",
		ms(2000)+",8,1", // a tie: 8 and 9 both have the most bids
		ms(2000)+",9,1",
		ms(4000)+",9,1",
		ms(6000)+",9,1",
		ms(8000)+",9,1",
		ms(10_000)+",9,1")
}

// TestQ7 checks that ties are all emitted and a bid at a window's end
// belongs to the next window.
func TestQ7(t *testing.T) {
	events := []nexmark.Event{
		bid(1, 11, 5, t0),
		bid(2, 12, 9, t0+100),
		bid(3, 13, 9, t0+9999),
		bid(4, 14, 100, t0+10_000),
		bid(5, 15, 3, t0-1), // the previous window, alone in it
	}
	expect(t, "q7", Q7(events),
		ms(-10_000)+",5,15,3,"+ms(-1),
		ms(0)+",2,12,9,"+ms(100),
		ms(0)+",3,13,9,"+ms(9999),
		ms(10_000)+",4,14,100,"+ms(10_000))
}

// TestQ8 checks same-window joins, either order, and one row per person.
func TestQ8(t *testing.T) {
	events := []nexmark.Event{
		person(t, 1000, "Peter Jones", "Kent", "WA", t0+1000),
		auction(1, 1000, 10, t0+9999), // same window
		person(t, 1001, "Vicky Walton", "Bend", "OR", t0+9000),
		auction(2, 1001, 10, t0+10_000), // next window: no row
		person(t, 1002, "Julie Smith", "Boise", "ID", t0+2000),
		auction(3, 1002, 12, t0+3000),
		auction(4, 1002, 13, t0+4000), // a second auction: still one row
		auction(5, 1003, 10, t0+4000), // before its seller joined, same window
		person(t, 1003, "Sarah Noris", "Kent", "CA", t0+5000),
	}
	expect(t, "q8", Q8(events),
		ms(0)+",1000,Peter Jones",
		ms(0)+",1002,Julie Smith",
		ms(0)+",1003,Sarah Noris")
}

// TestQ11 checks session gaps: below 10 s continues a session, exactly 10 s
// ends it, and input order does not matter.
func TestQ11(t *testing.T) {
	events := []nexmark.Event{
		bid(1, 1, 1, t0+19_998),
		bid(1, 1, 1, t0),
		bid(1, 1, 1, t0+9999),
		bid(1, 2, 1, t0+10_000),
		bid(1, 2, 1, t0),
		bid(1, 3, 1, t0+5),
	}
	expect(t, "q11", Q11(events),
		"1,3,"+ms(0)+","+ms(29_998),
		"2,1,"+ms(0)+","+ms(10_000),
		"2,1,"+ms(10_000)+","+ms(20_000),
		"3,1,"+ms(5)+","+ms(10_005))
}

func TestDiff(t *testing.T) {
	if d := Diff([]string{"b", "a", "a"}, []string{"a", "b", "a"}); d != "" {
		t.Errorf("same multiset in another order: %s", d)
	}
	d := Diff([]string{"a", "c", "c"}, []string{"a", "b", "c"})
	for _, want := range []string{"1 missing, 1 unexpected", "missing    b", "unexpected c"} {
		if !strings.Contains(d, want) {
			t.Errorf("Diff report %q lacks %q", d, want)
		}
	}
	if _, err := Query("q4", nil); err == nil {
		t.Error("Query(q4) succeeded")
	}
	if _, err := Generate(nexmark.Config{NumEvents: nexmark.Unbounded}); err == nil {
		t.Error("Generate of an unbounded stream succeeded")
	}
}

// TestGeneratedInvariants runs every query on a generated stream and checks
// the query-level invariants of the reference notes: row counts of the
// stateless queries, every q5 count the maximum of its window, every q7
// price the maximum of its window, q11 counts summing to the bids.
func TestGeneratedInvariants(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = 200_000
	events, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var bids, q2 int
	for i := range events {
		if events[i].Kind == nexmark.KindBid {
			bids++
			if events[i].Bid.Auction%123 == 0 {
				q2++
			}
		}
	}
	out := map[string][]string{}
	for _, q := range Queries {
		if out[q], err = Query(q, events); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d rows", q, len(out[q]))
	}
	if len(out["q0"]) != bids || len(out["q1"]) != bids || len(out["q2"]) != q2 {
		t.Fatalf("q0/q1/q2 rows %d/%d/%d, want %d/%d/%d", len(out["q0"]), len(out["q1"]), len(out["q2"]), bids, bids, q2)
	}
	for _, q := range []string{"q3", "q5", "q7", "q8", "q11"} {
		if len(out[q]) == 0 {
			t.Errorf("%s: no rows from %d events", q, len(events))
		}
	}
	checkWindowMax(t, "q5", out["q5"], 2, windowCounts(events))
	checkWindowMax(t, "q7", out["q7"], 3, windowPrices(events))
	total := 0
	for _, r := range out["q11"] {
		n, _ := strconv.Atoi(strings.Split(r, ",")[1])
		total += n
	}
	if total != bids {
		t.Errorf("q11 sessions hold %d bids, want %d", total, bids)
	}
}

// windowCounts is, per q5 window start, the largest bid count of an
// auction, computed independently of Q5 by scanning each window's bids.
func windowCounts(events []nexmark.Event) map[int64]int64 {
	byWindow := map[int64]map[int64]int64{}
	for i := range events {
		if events[i].Kind != nexmark.KindBid {
			continue
		}
		b := events[i].Bid
		first := (b.DateTime - Q5SizeMs + Q5SlideMs) / Q5SlideMs * Q5SlideMs
		for s := first; s <= b.DateTime; s += Q5SlideMs {
			if s > b.DateTime-Q5SizeMs {
				if byWindow[s] == nil {
					byWindow[s] = map[int64]int64{}
				}
				byWindow[s][b.Auction]++
			}
		}
	}
	best := map[int64]int64{}
	for s, m := range byWindow {
		for _, n := range m {
			best[s] = max(best[s], n)
		}
	}
	return best
}

func windowPrices(events []nexmark.Event) map[int64]int64 {
	best := map[int64]int64{}
	for i := range events {
		if b := events[i].Bid; events[i].Kind == nexmark.KindBid {
			w := b.DateTime / Q7SizeMs * Q7SizeMs
			best[w] = max(best[w], b.Price)
		}
	}
	return best
}

// checkWindowMax checks that column col of every row equals its window's
// maximum and that every window has a row.
func checkWindowMax(t *testing.T, q string, rows []string, col int, best map[int64]int64) {
	t.Helper()
	seen := map[int64]bool{}
	for _, r := range rows {
		f := strings.Split(r, ",")
		w, _ := strconv.ParseInt(f[0], 10, 64)
		v, _ := strconv.ParseInt(f[col], 10, 64)
		if v != best[w] {
			t.Fatalf("%s row %s: %d is not the window's maximum %d", q, r, v, best[w])
		}
		seen[w] = true
	}
	if len(seen) != len(best) {
		t.Fatalf("%s: rows for %d windows, want %d", q, len(seen), len(best))
	}
}

// TestSplitSourcesSameResult feeds every query the events of three split
// generators, concatenated part after part as parallel sources might
// deliver them, and checks the rows equal those of the unsplit stream.
func TestSplitSourcesSameResult(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = 50_000
	whole, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := cfg.Split(3)
	if err != nil {
		t.Fatal(err)
	}
	var mixed []nexmark.Event
	for _, p := range parts {
		evs, err := Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		mixed = append(mixed, evs...)
	}
	for _, q := range Queries {
		want, _ := Query(q, whole)
		got, _ := Query(q, mixed)
		if d := Diff(got, want); d != "" {
			t.Errorf("%s over split sources: %s", q, d)
		}
	}
}

// TestReadDump writes a stream in the --dump format, reads it back and
// checks that every query gives the same rows over the dump as over the
// generated events; a corrupt line is reported with its number.
func TestReadDump(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = 30_000
	events, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range events {
		if err := nexmark.WriteJSON(&buf, &events[i]); err != nil {
			t.Fatal(err)
		}
	}
	dumped, err := ReadDump(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Queries {
		want, _ := Query(q, events)
		got, _ := Query(q, dumped)
		if d := Diff(got, want); d != "" {
			t.Errorf("%s over the dump: %s", q, d)
		}
	}
	_, err = ReadDump(strings.NewReader("\n" + `{"type":"bid"}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("corrupt dump: err = %v, want one naming line 2", err)
	}
}
