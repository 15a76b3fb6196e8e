package oracle

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/ringflow/ringflow/bench/nexmark"
)

// Window sizes of the queries, in milliseconds.
const (
	Q5SizeMs  = 10_000
	Q5SlideMs = 2_000
	Q7SizeMs  = 10_000
	Q8SizeMs  = 10_000
	Q11GapMs  = 10_000
)

// Queries lists the query names Query accepts.
var Queries = []string{"q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11"}

// Query evaluates the named query ("q0" ... "q11", as in Queries).
func Query(name string, events []nexmark.Event) ([]string, error) {
	fns := map[string]func([]nexmark.Event) []string{
		"q0": Q0, "q1": Q1, "q2": Q2, "q3": Q3, "q5": Q5, "q7": Q7, "q8": Q8, "q11": Q11,
	}
	fn, ok := fns[name]
	if !ok {
		return nil, fmt.Errorf("oracle: unknown query %q (have %s)", name, strings.Join(Queries, ", "))
	}
	return fn(events), nil
}

// Generate materialises the events of a bounded Config, for a test to feed
// both the engine's source and the oracle.
func Generate(cfg nexmark.Config) ([]nexmark.Event, error) {
	if cfg.NumEvents == nexmark.Unbounded {
		return nil, fmt.Errorf("oracle: Generate needs a bounded Config (NumEvents is Unbounded)")
	}
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	var events []nexmark.Event
	var ev nexmark.Event
	for g.Next(&ev) {
		events = append(events, ev)
	}
	return events, nil
}

// ReadDump reads a --dump file (nexmark.WriteJSON lines) into events;
// blank lines are skipped. Extra strings keep only their length (see
// nexmark.ParseJSON); no query reads them.
func ReadDump(r io.Reader) ([]nexmark.Event, error) {
	var events []nexmark.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev nexmark.Event
		if err := nexmark.ParseJSON(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("oracle: dump line %d: %w", line, err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("oracle: read dump: %w", err)
	}
	return events, nil
}

// Q0 is the pass-through of bids, in input order.
func Q0(events []nexmark.Event) []string {
	var rows []string
	for i := range events {
		if b := &events[i]; b.Kind == nexmark.KindBid {
			rows = append(rows, string(nexmark.AppendQ0Row(nil, &b.Bid)))
		}
	}
	return rows
}

// Q1 converts every bid's price to euros, in input order.
func Q1(events []nexmark.Event) []string {
	var rows []string
	for i := range events {
		if b := &events[i]; b.Kind == nexmark.KindBid {
			rows = append(rows, string(nexmark.AppendQ1Row(nil, &b.Bid)))
		}
	}
	return rows
}

// Q2 selects the bids on auctions whose id is a multiple of 123, in input
// order.
func Q2(events []nexmark.Event) []string {
	var rows []string
	for i := range events {
		if b := &events[i]; b.Kind == nexmark.KindBid && b.Bid.Auction%123 == 0 {
			rows = append(rows, string(nexmark.AppendQ2Row(nil, b.Bid.Auction, b.Bid.Price)))
		}
	}
	return rows
}

// Q3 joins category-10 auctions with their sellers from OR, ID or CA. Rows
// follow the auctions' input order (then the persons' for duplicate ids).
func Q3(events []nexmark.Event) []string {
	sellers := map[int64][]*nexmark.Person{}
	for i := range events {
		if p := &events[i].Person; events[i].Kind == nexmark.KindPerson {
			switch string(p.State.Bytes()) {
			case "OR", "ID", "CA":
				sellers[p.ID] = append(sellers[p.ID], p)
			}
		}
	}
	var rows []string
	for i := range events {
		a := &events[i].Auction
		if events[i].Kind != nexmark.KindAuction || a.Category != 10 {
			continue
		}
		for _, p := range sellers[a.Seller] {
			rows = append(rows, string(nexmark.AppendQ3Row(nil, p.Name.Bytes(), p.City.Bytes(), p.State.Bytes(), a.ID)))
		}
	}
	return rows
}

// Q5 finds each sliding window's hottest auctions. Rows are ordered by
// window start, then auction.
func Q5(events []nexmark.Event) []string {
	type key struct{ window, auction int64 }
	counts := map[key]int64{}
	for i := range events {
		if events[i].Kind != nexmark.KindBid {
			continue
		}
		b := &events[i].Bid
		// Every window [s, s+10 s) with s a multiple of 2 s and s <= t < s+10 s.
		for s := floorDiv(b.DateTime, Q5SlideMs) * Q5SlideMs; s > b.DateTime-Q5SizeMs; s -= Q5SlideMs {
			counts[key{s, b.Auction}]++
		}
	}
	maxCount := map[int64]int64{}
	for k, n := range counts {
		maxCount[k.window] = max(maxCount[k.window], n)
	}
	var hot []key
	for k, n := range counts {
		if n >= maxCount[k.window] {
			hot = append(hot, k)
		}
	}
	slices.SortFunc(hot, func(x, y key) int {
		if x.window != y.window {
			return cmp.Compare(x.window, y.window)
		}
		return cmp.Compare(x.auction, y.auction)
	})
	rows := make([]string, len(hot))
	for i, k := range hot {
		rows[i] = string(nexmark.AppendQ5Row(nil, k.window, k.auction, counts[k]))
	}
	return rows
}

// Q7 finds each tumbling window's highest bids. Rows are ordered by window
// start, then input order.
func Q7(events []nexmark.Event) []string {
	maxPrice := map[int64]int64{}
	for i := range events {
		if b := &events[i].Bid; events[i].Kind == nexmark.KindBid {
			w := floorDiv(b.DateTime, Q7SizeMs) * Q7SizeMs
			if p, ok := maxPrice[w]; !ok || b.Price > p {
				maxPrice[w] = b.Price
			}
		}
	}
	type row struct {
		window int64
		bid    *nexmark.Bid
	}
	var top []row
	for i := range events {
		if b := &events[i].Bid; events[i].Kind == nexmark.KindBid {
			if w := floorDiv(b.DateTime, Q7SizeMs) * Q7SizeMs; b.Price == maxPrice[w] {
				top = append(top, row{w, b})
			}
		}
	}
	sort.SliceStable(top, func(i, j int) bool { return top[i].window < top[j].window })
	rows := make([]string, len(top))
	for i, r := range top {
		rows[i] = string(nexmark.AppendQ7Row(nil, r.window, r.bid))
	}
	return rows
}

// Q8 finds the people who created an auction in the 10 s window they
// joined in. Rows are ordered by window start, person id, then name; a
// person is identified by (id, name), as Flink's GROUP BY id, name does.
func Q8(events []nexmark.Event) []string {
	type seller struct{ window, id int64 }
	type person struct {
		window, id int64
		name       string
	}
	sellers := map[seller]bool{}
	people := map[person]bool{}
	for i := range events {
		switch ev := &events[i]; ev.Kind {
		case nexmark.KindAuction:
			sellers[seller{floorDiv(ev.Auction.DateTime, Q8SizeMs) * Q8SizeMs, ev.Auction.Seller}] = true
		case nexmark.KindPerson:
			w := floorDiv(ev.Person.DateTime, Q8SizeMs) * Q8SizeMs
			people[person{w, ev.Person.ID, ev.Person.Name.String()}] = true
		}
	}
	var joined []person
	for p := range people {
		if sellers[seller{p.window, p.id}] {
			joined = append(joined, p)
		}
	}
	slices.SortFunc(joined, func(x, y person) int {
		if x.window != y.window {
			return cmp.Compare(x.window, y.window)
		}
		if x.id != y.id {
			return cmp.Compare(x.id, y.id)
		}
		return strings.Compare(x.name, y.name)
	})
	rows := make([]string, len(joined))
	for i, p := range joined {
		rows[i] = string(nexmark.AppendQ8Row(nil, p.window, p.id, []byte(p.name)))
	}
	return rows
}

// Q11 counts each bidder's bids per session. Rows are ordered by bidder,
// then session start.
func Q11(events []nexmark.Event) []string {
	times := map[int64][]int64{}
	for i := range events {
		if b := &events[i].Bid; events[i].Kind == nexmark.KindBid {
			times[b.Bidder] = append(times[b.Bidder], b.DateTime)
		}
	}
	bidders := make([]int64, 0, len(times))
	for b := range times {
		bidders = append(bidders, b)
	}
	slices.Sort(bidders)
	var rows []string
	for _, bidder := range bidders {
		ts := times[bidder]
		slices.Sort(ts)
		start := 0
		for i := 1; i <= len(ts); i++ {
			if i == len(ts) || ts[i]-ts[i-1] >= Q11GapMs {
				row := nexmark.AppendQ11Row(nil, bidder, int64(i-start), ts[start], ts[i-1]+Q11GapMs)
				rows = append(rows, string(row))
				start = i
			}
		}
	}
	return rows
}

// Diff compares two sets of rows as multisets. It returns "" when they hold
// the same rows the same number of times, and otherwise a report of the
// counts and of the first rows missing from got or unexpected in it.
func Diff(got, want []string) string {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	var missing, extra []string
	i, j := 0, 0
	for i < len(g) || j < len(w) {
		switch {
		case j == len(w) || (i < len(g) && g[i] < w[j]):
			extra = append(extra, g[i])
			i++
		case i == len(g) || w[j] < g[i]:
			missing = append(missing, w[j])
			j++
		default:
			i++
			j++
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "got %d rows, want %d: %d missing, %d unexpected", len(got), len(want), len(missing), len(extra))
	const show = 10
	for _, r := range missing[:min(show, len(missing))] {
		fmt.Fprintf(&sb, "\n  missing    %s", r)
	}
	for _, r := range extra[:min(show, len(extra))] {
		fmt.Fprintf(&sb, "\n  unexpected %s", r)
	}
	return sb.String()
}

// floorDiv is a / b rounded toward negative infinity, so windows stay
// aligned for times before the epoch too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
