package align_test

import (
	"fmt"
	"time"

	"github.com/ringflow/ringflow/align"
)

// A task with two inputs and a 10ms alignment timeout: channel 0 delivers
// barrier 1, channel 1 is backpressured, and the deadline passes.
func Example() {
	a, err := align.New(align.Config{Channels: 2, AlignmentTimeout: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	ms := int64(time.Millisecond)
	run := func(in align.Input) {
		acts, err := a.Step(in)
		if err != nil {
			panic(err)
		}
		for _, act := range acts {
			fmt.Println(act) // the runtime would execute it here
		}
	}
	b := align.Barrier{ID: 1, TriggerNs: 0}
	run(align.Input{Type: align.InputBarrier, Channel: 0, Barrier: b, NowNs: 2 * ms})
	fmt.Println("may read channel 0:", !a.Blocked(0))
	if d, ok := a.Deadline(); ok {
		run(align.Input{Type: align.InputTick, NowNs: d})
	}
	// The runtime's copy of channel 1 meets barrier 1.
	run(align.Input{Type: align.InputPeekedBarrier, Channel: 1, Barrier: b, NowNs: 12 * ms})
	// Output:
	// block ch=0
	// may read channel 0: false
	// snapshot id=1 unaligned
	// forward id=1 kind=unaligned trigger=0s
	// unblock ch=0
	// record ch=1 id=1
	// stop-record ch=1 id=1
	// complete id=1 unaligned start-delay=2ms alignment=8ms capture=2ms recorded=1 waited-on=ch1
}
