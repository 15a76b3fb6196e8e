package nexmark_test

import (
	"fmt"

	"github.com/ringflow/ringflow/bench/nexmark"
)

// Two parallel sources split one stream; each checkpoints its position and
// rewinds to it exactly.
func Example() {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = 10
	parts, err := cfg.Split(2)
	if err != nil {
		panic(err)
	}
	src, err := nexmark.NewGenerator(parts[1]) // events 1, 3, 5, 7, 9
	if err != nil {
		panic(err)
	}
	var ev nexmark.Event
	src.Next(&ev)
	checkpoint := src.Position()
	src.Next(&ev)
	first := ev.Auction // event 3, the third auction
	if err := src.Seek(checkpoint); err != nil {
		panic(err)
	}
	src.Next(&ev)
	fmt.Println(checkpoint, ev.Kind, ev.Auction.ID, ev.Auction == first)
	for src.Next(&ev) {
		fmt.Printf("%v at %d: %s\n", ev.Kind, ev.DateTime(), nexmark.AppendQ1Row(nil, &ev.Bid))
	}
	// Output:
	// 3 auction 1002 true
	// bid at 1436918400000: 1000,1009,425593.220,1436918400000
	// bid at 1436918400000: 1000,1001,2838595.048,1436918400000
	// bid at 1436918400000: 1000,1001,3603311.740,1436918400000
}
