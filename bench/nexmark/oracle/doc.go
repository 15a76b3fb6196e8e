// Package oracle evaluates Nexmark queries by brute force over a bounded
// slice of events, for tests to compare the engine's output with. Each
// function is the query's definition from issue 6 written as plainly as
// possible (maps, sorts, no incremental state, no watermarks) and returns
// CSV rows in the --output format (nexmark.Append*Row), without newlines.
//
// Semantics, with times in epoch milliseconds and windows aligned to the
// epoch, a row belonging to window [start, start+size):
//
//	q0   every bid
//	q1   every bid, price in euros (0.908 × price, three decimals)
//	q2   every bid with auction % 123 == 0
//	q3   every (auction, person) pair with auction.seller == person.id,
//	     auction.category == 10 and person.state in {OR, ID, CA}, whichever
//	     of the two arrived first
//	q5   for every 10 s window sliding by 2 s, each auction whose bid count
//	     in the window is >= the largest count of any auction in it
//	q7   for every 10 s tumbling window, each bid in it whose price equals
//	     the window's maximum price (ties all emitted)
//	q8   each (10 s tumbling window, person) such that the person was
//	     created in the window and created an auction in the same window,
//	     once however many auctions
//	q11  one row per bidder session, a session ending where the gap between
//	     consecutive bids of that bidder is 10 s or more; session_start is
//	     its first bid's time, session_end its last bid's time + 10 s
//
// The engine's windows fire on watermarks (event time − 4 s); the oracle
// counts every event. The two agree when no event arrives behind its
// source's watermark, which holds for the generator: each split's event
// times never decrease.
//
// Only the member of each event that its Kind names is read; events of no
// Kind hold nothing and are skipped.
//
// Rows come in a deterministic order, stated per function, which need not
// be the engine's: compare with Diff, which ignores order.
package oracle
