package operator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
)

// countInPlace counts records, as countOf, but only through AddPtr: its
// Add fails the test, so an operator that ignores AddPtr is caught.
type countInPlace struct {
	t     *testing.T
	calls *int
}

func (countInPlace) Create() int64 { return 0 }
func (c countInPlace) Add(acc int64, _ uint64) int64 {
	c.t.Errorf("Add called on an aggregate that has AddPtr")
	return acc + 1
}
func (c countInPlace) AddPtr(acc *int64, _ *uint64) { *acc++; *c.calls++ }
func (countInPlace) Result(acc int64) int64         { return acc }
func (countInPlace) Merge(a, b int64) int64         { return a + b }

// TestAddPtr checks that the window operator, for every kind of window,
// and the rolling Aggregate fold records through an aggregate's AddPtr
// when it has one, with the results Add gives.
func TestAddPtr(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	recs := make([]uint64, 2000)
	ts := make([]int64, len(recs))
	for i := range recs {
		recs[i], ts[i] = rng.Uint64N(5000), int64(i/20)+rng.Int64N(5)
	}
	for _, w := range []Windows{
		{Kind: Tumbling, Size: 10 * time.Millisecond},
		{Kind: Sliding, Size: 30 * time.Millisecond, Slide: 10 * time.Millisecond},
		{Kind: Session, Gap: 3 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(w.Kind), func(t *testing.T) {
			var want, got collectInput[countResult]
			calls := 0
			byAdd := newWindows(t, w, 0, countOf{}, &want)
			byPtr := newWindows(t, w, 0, countInPlace{t, &calls}, &got)
			for _, o := range []*WindowAgg[uint64, uint64, int64, int64]{byAdd, byPtr} {
				for i := 0; i < len(recs); i += 500 {
					o.Push(recs[i:i+500], ts[i:i+500])
					o.Watermark(ts[i+499] - 10)
				}
				o.Watermark(MaxWatermark)
			}
			if calls == 0 {
				t.Fatal("AddPtr was never called")
			}
			if len(want.recs) == 0 || !slices.Equal(sortedResults(got.recs), sortedResults(want.recs)) {
				t.Errorf("windows through AddPtr: %d results, through Add: %d, or they differ", len(got.recs), len(want.recs))
			}
		})
	}
	t.Run("Aggregate", func(t *testing.T) {
		keys := KeyFuncs[uint64, uint64]{Key: func(r uint64) uint64 { return r % 1000 }, Hash: keygroups.HashUint64}
		var want, got collectInput[int64]
		calls := 0
		byAdd := NewAggregate[uint64, uint64, int64, int64](keys, countOf{}, Input[int64](&want))
		byPtr := NewAggregate[uint64, uint64, int64, int64](keys, countInPlace{t, &calls}, Input[int64](&got))
		for _, o := range []*Aggregate[uint64, uint64, int64, int64]{byAdd, byPtr} {
			ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128},
				Checkpoints: true, Metrics: &Metrics{}}
			if err := o.Open(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, c := range ctx.closers {
					c()
				}
			})
			o.Push(recs, nil)
		}
		if calls != len(recs) || !slices.Equal(got.recs, want.recs) {
			t.Errorf("Aggregate through AddPtr: %d calls for %d records; outputs equal: %v", calls, len(recs), slices.Equal(got.recs, want.recs))
		}
	})
}
