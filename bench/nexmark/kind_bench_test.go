package nexmark

import "testing"

// BenchmarkKind measures the cost of each event kind alone: EventAt on one
// id of that kind in every block of 50.
func BenchmarkKind(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g := mustGenerator(b, cfg)
	for _, k := range []struct {
		name   string
		offset uint64
	}{{"person", 0}, {"auction", 1}, {"bid", 4}} {
		b.Run(k.name, func(b *testing.B) {
			var ev Event
			i := uint64(0)
			for b.Loop() {
				g.EventAt(i*50+k.offset, &ev)
				i++
			}
		})
	}
}
