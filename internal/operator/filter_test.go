package operator

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// collectInput records what reaches it.
type collectInput[T any] struct {
	recs []T
	ts   []int64
	nils int // pushes without timestamps
}

func (c *collectInput[T]) Push(recs []T, ts []int64) {
	c.recs = append(c.recs, recs...)
	if ts == nil {
		c.nils++
		return
	}
	if len(ts) != len(recs) {
		panic("timestamps and records differ in length")
	}
	c.ts = append(c.ts, ts...)
}

// TestFilter checks the filter against a plain loop over batches of
// varying sizes (the filter reuses its buffers), with and without
// timestamps: the kept records, in order, each with its own timestamp,
// and no push for a batch that keeps nothing.
func TestFilter(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, timed := range []bool{false, true} {
		var got collectInput[uint64]
		f := NewFilter(func(v uint64) bool { return v%3 != 0 }, Input[uint64](&got))
		f.Ctx = &Context{Operator: "filter"}
		var want []uint64
		var wantTs []int64
		pushes := 0
		for range 200 {
			n := rnd.IntN(300)
			recs := make([]uint64, n)
			var ts []int64
			if timed {
				ts = make([]int64, n)
			}
			kept := 0
			for i := range recs {
				recs[i] = rnd.Uint64N(1000)
				if timed {
					ts[i] = rnd.Int64()
				}
				if recs[i]%3 != 0 {
					want = append(want, recs[i])
					if timed {
						wantTs = append(wantTs, ts[i])
					}
					kept++
				}
			}
			if kept > 0 {
				pushes++
			}
			f.Push(recs, ts)
		}
		if !slices.Equal(got.recs, want) || !slices.Equal(got.ts, wantTs) {
			t.Fatalf("timed=%v: kept %d records (%d timestamps), want %d (%d)", timed, len(got.recs), len(got.ts), len(want), len(wantTs))
		}
		if wantNils := map[bool]int{false: pushes, true: 0}[timed]; got.nils != wantNils {
			t.Fatalf("timed=%v: %d pushes without timestamps, want %d", timed, got.nils, wantNils)
		}
	}
}
