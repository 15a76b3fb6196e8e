package nexmark

import (
	"fmt"
	"math"
)

// BaseTime is Beam's NexmarkUtils.BASE_TIME, 2015-07-15T00:00:00Z, in epoch
// milliseconds: the event time of event number 0.
const BaseTime int64 = 1436918400000

// Unbounded as Config.NumEvents makes the stream endless.
const Unbounded uint64 = math.MaxUint64

// Id bases and the type proportions of Beam's GeneratorConfig: of every 50
// consecutive event ids, 1 is a person, 3 are auctions and 46 are bids.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10

	personProportion  = 1
	auctionProportion = 3
	bidProportion     = 46
	proportionDenom   = personProportion + auctionProportion + bidProportion
)

// Constants of Beam's model generators that are not configurable there.
const (
	personIDLead  = 10  // person ids a reference may run ahead of the last created
	auctionIDLead = 10  // likewise for auction ids
	hotBlock      = 100 // HOT_SELLER/AUCTION/BIDDER_RATIO: size of the block whose first (or second) id is hot
	numCategories = 5
	minStringLen  = 3
)

// Config says which events a Generator yields and what they look like. Start
// from DefaultConfig; a zero Config is invalid.
//
// The events of a stream are numbered 0, 1, 2, ...; event number n has event
// id n (Beam's firstEventId is 0), its type follows from n % 50, and its event
// time is BaseTimeMs + n*interEventDelayUs/1000. A Config generates the event
// numbers Start, Start+Stride, Start+2*Stride, ... below NumEvents; Split
// divides that set between several generators.
type Config struct {
	// NumEvents is the length of the whole stream (all splits together);
	// Unbounded for an endless one.
	NumEvents uint64
	// EventsPerSecond is the event-time rate (Beam's firstEventRate). The
	// inter-event delay is whole microseconds, (1e6 + rate/2) / rate as in
	// Beam's RateUnit.rateToPeriodUs, so the rate must be at most 1,000,000.
	EventsPerSecond int
	// BaseTimeMs is the event time of event number 0, epoch milliseconds.
	BaseTimeMs int64

	// Average byte sizes that the `extra` field pads each event type to.
	AvgPersonBytes, AvgAuctionBytes, AvgBidBytes int
	// Hot-key ratios: with probability 1 - 1/ratio a bid goes to the hot
	// auction, an auction to the hot seller, a bid from the hot bidder.
	HotAuctionRatio, HotSellersRatio, HotBiddersRatio int
	// NumInFlightAuctions bounds how far back a random auction reference
	// reaches; it also sets the average auction length.
	NumInFlightAuctions int
	// NumActivePeople bounds how far back a random person reference reaches.
	NumActivePeople int

	// Start is the first event number this Config generates, Stride the
	// distance between consecutive ones: 0 and 1 for a whole stream; Split
	// sets them.
	Start, Stride uint64
}

// DefaultConfig is Beam's NexmarkConfiguration defaults for a single event
// timeline (numEventGenerators = 1, constant rate): 10,000 events per second
// of event time, 100,000 events.
func DefaultConfig() Config {
	return Config{
		NumEvents:           100_000,
		EventsPerSecond:     10_000,
		BaseTimeMs:          BaseTime,
		AvgPersonBytes:      200,
		AvgAuctionBytes:     500,
		AvgBidBytes:         100,
		HotAuctionRatio:     2,
		HotSellersRatio:     4,
		HotBiddersRatio:     4,
		NumInFlightAuctions: 100,
		NumActivePeople:     1000,
		Start:               0,
		Stride:              1,
	}
}

// maxRate keeps the integer inter-event delay at one microsecond or more.
const maxRate = 1_000_000

// Validate reports the first field that a Generator cannot work with.
func (c *Config) Validate() error {
	positive := []struct {
		name string
		v    int
		max  int
	}{
		{"EventsPerSecond", c.EventsPerSecond, maxRate},
		{"HotAuctionRatio", c.HotAuctionRatio, math.MaxInt32},
		{"HotSellersRatio", c.HotSellersRatio, math.MaxInt32},
		{"HotBiddersRatio", c.HotBiddersRatio, math.MaxInt32},
		{"NumInFlightAuctions", c.NumInFlightAuctions, math.MaxInt32},
		{"NumActivePeople", c.NumActivePeople, math.MaxInt32 - personIDLead},
	}
	for _, f := range positive {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("nexmark: Config.%s = %d, want 1..%d", f.name, f.v, f.max)
		}
	}
	sizes := []struct {
		name string
		v    int
	}{
		{"AvgPersonBytes", c.AvgPersonBytes},
		{"AvgAuctionBytes", c.AvgAuctionBytes},
		{"AvgBidBytes", c.AvgBidBytes},
	}
	for _, f := range sizes {
		if f.v < 0 || f.v > maxAvgBytes {
			return fmt.Errorf("nexmark: Config.%s = %d, want 0..%d", f.name, f.v, maxAvgBytes)
		}
	}
	if c.Stride == 0 || c.Stride > maxEvents {
		return fmt.Errorf("nexmark: Config.Stride = %d, want 1..%d (DefaultConfig has 1)", c.Stride, uint64(maxEvents))
	}
	if c.Start > maxEvents {
		return fmt.Errorf("nexmark: Config.Start = %d, want <= %d", c.Start, uint64(maxEvents))
	}
	if c.NumEvents != Unbounded && c.NumEvents > maxEvents {
		return fmt.Errorf("nexmark: Config.NumEvents = %d, want <= %d or Unbounded", c.NumEvents, uint64(maxEvents))
	}
	return nil
}

// maxAvgBytes keeps every extra string (at most 1.2 times the average)
// shorter than 2^16 bytes, the most an Extra records.
const maxAvgBytes = 50_000

// maxEvents keeps event numbers, ids and n*interEventDelayUs (at most
// 1,000,000 µs) inside an int64.
const maxEvents = 1 << 43

// end is the exclusive upper bound on event numbers.
func (c *Config) end() uint64 {
	if c.NumEvents == Unbounded {
		return maxEvents
	}
	return c.NumEvents
}

// interEventDelayUs is Beam's RateUnit.PER_SECOND.rateToPeriodUs(rate).
func (c *Config) interEventDelayUs() int64 {
	r := int64(c.EventsPerSecond)
	return (1_000_000 + r/2) / r
}

// Timestamp is the event time, in epoch milliseconds, of event number n:
// Beam's timestampAndInterEventDelayUsForEvent for a constant rate.
func (c *Config) Timestamp(n uint64) int64 {
	return c.BaseTimeMs + int64(n)*c.interEventDelayUs()/1000
}

// Split divides the events of c between n generators: part i generates
// every n-th event of c starting with its i-th one. The parts are disjoint,
// their union is exactly c's events, and, unlike Beam's split (which gives
// each part its own timeline), all parts share c's timeline, so a bounded run
// of n parallel sources sees the same events with the same times as one
// source. Interleaving rather than cutting c into n contiguous ranges keeps
// the parts' event times close together, so the minimum of their watermarks
// (what a downstream window waits for) never lags far behind.
func (c Config) Split(n int) ([]Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("nexmark: Split(%d): want at least 1 part", n)
	}
	if uint64(n) > maxEvents/c.Stride {
		return nil, fmt.Errorf("nexmark: Split(%d): stride %d * %d parts overflows", n, c.Stride, n)
	}
	parts := make([]Config, n)
	for i := range parts {
		parts[i] = c
		parts[i].Start = c.Start + uint64(i)*c.Stride
		parts[i].Stride = c.Stride * uint64(n)
	}
	return parts, nil
}
