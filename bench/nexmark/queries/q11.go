package queries

import (
	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// bidderSession is one bidder's bid count in one session.
type bidderSession = ringflow.WindowResult[int64, int64]

// q11 is "user sessions": each bidder's bids counted per session, a gap of
// 10 s without bids ending a session. The engine's session window of a
// bidder is [first bid, last bid + gap), which is the SQL's session_start
// and session_end.
func q11(events ringflow.Stream[nexmark.Event], out *Output) {
	bidders := ringflow.FlatMapPtr(events, "bidders", func(ev *nexmark.Event, out *ringflow.Collector[int64]) {
		if ev.Kind == nexmark.KindBid {
			out.Emit(ev.Bid.Bidder)
		}
	})
	sessions := ringflow.Window(ringflow.KeyBy(bidders, func(b int64) int64 { return b }), "sessions",
		ringflow.SessionWindows(q11Gap), count[int64]{})
	sink(sessions, out, func(dst []byte, s bidderSession) []byte {
		return nexmark.AppendQ11Row(dst, s.Key, s.Value, s.Start, s.End)
	})
}
