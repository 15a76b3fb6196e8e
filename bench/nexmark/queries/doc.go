// Package queries runs the Nexmark benchmark's queries q0, q1, q2, q3, q5,
// q7, q8 and q11 on ringflow, written as ordinary ringflow jobs, and the
// same queries (q0, q1, q2, q5) as plain Go for comparison. dfbench nexmark
// measures them; the tests check every query against the brute-force
// oracle (package oracle) over the same events.
//
// # Source
//
// Source(cfg) is a ringflow source over the nexmark generator: subtask i
// of p generates part i of cfg.Split(p), which interleaves event numbers so
// that all subtasks advance through event time together. Its position is
// the generator's next event number (8 bytes, little-endian): restored, a
// subtask regenerates exactly the events after it. Event time is the
// event's DateTime and the watermark trails the newest by 4 s, as the
// Flink DDL's WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
// Each part's event times never decrease, so no event is ever late.
//
// # Plans
//
// A nexmark.Event is a 400-byte tagged union. Every query's first operator
// is a FlatMap chained to the source (same subtask, no ring) that keeps the
// events it needs and projects them to small plain structs, so rings carry
// 8 to 72 bytes per record, copied raw. Windows are aligned to the epoch; a
// window result carries the timestamp End-1, so a second stage keyed by
// window sees all of a window's results before the watermark passes it.
//
//	q0   bids ─ sink                          (every bid)
//	q1   bids ─ map price×0.908 ─ sink        (euros as integer thousandths)
//	q2   bids with auction%123==0 ─ sink
//	q3   persons + category-10 auctions ─keyBy(person id / seller)─
//	     process: persons in value state, auctions waiting for their
//	     seller in value state; emits each pair when its second half comes
//	q5   bid auctions ─keyBy(auction)─ window sliding 10 s/2 s count
//	     ─keyBy(window start)─ process: max count and its auctions, emitted
//	     by an event-time timer at the window's end
//	q7   bids ─keyBy(window start)─ window tumbling 10 s keeping the bids
//	     at the running max price ─ flatMap to rows
//	q8   persons + auctions ─┬ filter persons ─keyBy(id)───────────────┐
//	                         └ filter auctions ─keyBy(seller)─ window  │
//	                           tumbling 10 s count ─keyBy(seller)─ window join 10 s
//	q11  bidders ─keyBy(bidder)─ session window, gap 10 s, count
//
// Notes on semantics. q3 keeps every person (a few bytes for those outside
// OR, ID and CA) so that an auction whose seller is known not to qualify is
// dropped at once instead of waiting forever; auctions may name a seller up
// to 10 people ahead, and those wait in state until the person comes. q7's
// aggregate is exact on ties: all bids at the window's maximum are kept. q8
// counts auctions per seller and window before the join so that the join
// meets each seller once per window and emits each (window, person) once.
// q11's session window is [first bid, last bid + gap), which is the SQL's
// session_start and session_end; a gap of exactly 10 s separates sessions,
// as in the oracle.
//
// # Output
//
// Build ends every query with a sink named SinkName that counts rows in an
// Output and, if the Output has a write function, formats each row with the
// nexmark.Append*Row helpers (q1's own formatter is checked against
// AppendQ1Row) and writes it under a mutex: the sink's subtasks share it.
// Without a write function rows are only counted, like the blackhole sink
// of Flink's Nexmark runs.
//
// # Plain-Go baseline
//
// RunChan runs q0, q1, q2 and q5 with goroutines and channels of batches of
// up to 1024 records: one generator goroutine per part, and for q5 counters
// partitioned by auction that fire windows on the least source watermark
// and a merger that keeps each window's hottest auctions. No checkpoints,
// no key groups: the floor an engine's plumbing is measured against.
//
// # Checkpoints and exactly-once output
//
// The source is replayable and all query state is keyed state (value
// state, window and join state, timers), so a job with checkpoints on
// restores a query exactly. NewTxnOutput ends the query with a
// transactional sink (ringflow.TxnSink, e.g. ringflow.FileSink) whose
// committed rows are exactly the result across failures; the tests inject
// a source failure mid-run, after a completed checkpoint, and compare the
// committed rows with the oracle. NewOutput's plain sink may repeat, after
// a restart, rows emitted since the restored checkpoint.
package queries
