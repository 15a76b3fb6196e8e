package align

import (
	"fmt"
	"testing"
)

// cycle runs one checkpoint through a: a barrier on every channel, in
// order, then (unaligned) nothing else is needed since reads stop the
// recordings.
func cycle(tb testing.TB, a *Aligner, id uint64) {
	for c := 0; c < len(a.chans); c++ {
		in := Input{Type: InputBarrier, Channel: c, Barrier: Barrier{ID: id, TriggerNs: int64(id)}, NowNs: int64(id) + 1}
		if _, err := a.Step(in); err != nil {
			tb.Fatal(err)
		}
	}
	if a.Pending() != 0 {
		tb.Fatalf("checkpoint %d still pending", id)
	}
}

func benchCycle(b *testing.B, cfg Config) {
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	id := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cycle(b, a, id)
		id++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(cfg.Channels), "ns/barrier")
}

// BenchmarkCheckpoint measures one checkpoint at one task: a barrier read on
// each of its input channels, and the actions that follow.
func BenchmarkCheckpoint(b *testing.B) {
	for _, n := range []int{1, 4, 32, 256} {
		b.Run(fmt.Sprintf("aligned/channels=%d", n), func(b *testing.B) {
			benchCycle(b, Config{Channels: n, AlignmentTimeout: AlwaysAligned})
		})
		b.Run(fmt.Sprintf("unaligned/channels=%d", n), func(b *testing.B) {
			benchCycle(b, Config{Channels: n, AlignmentTimeout: 0})
		})
		b.Run(fmt.Sprintf("at-least-once/channels=%d", n), func(b *testing.B) {
			benchCycle(b, Config{Channels: n, Mode: AtLeastOnce, AlignmentTimeout: AlwaysAligned})
		})
	}
}

// BenchmarkBlocked is the question the runtime asks before reading a channel.
func BenchmarkBlocked(b *testing.B) {
	a, err := New(Config{Channels: 64, AlignmentTimeout: AlwaysAligned})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := 0; b.Loop(); i++ {
		if a.Blocked(i & 63) {
			n++
		}
	}
	if n != 0 {
		b.Fatal("blocked without a barrier")
	}
}
