package pipelines

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramSmallExact(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 60; v++ {
		h.Record(v)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.5, 30}, {0.99, 60}, {1, 60}} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if h.Count() != 60 || h.Max() != 60 {
		t.Errorf("Count %d Max %d, want 60 60", h.Count(), h.Max())
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 {
		t.Errorf("empty histogram: Quantile = %d, want 0", h.Quantile(0.5))
	}
	h.Record(-5) // a clock step back: counted as 0
	h.Record(1 << 62)
	if h.Count() != 2 || h.Quantile(0) != 0 || h.Max() != histMax || h.Quantile(1) > histMax {
		t.Errorf("count %d, min %d, max %d, q1 %d", h.Count(), h.Quantile(0), h.Max(), h.Quantile(1))
	}
}

// TestHistogramBuckets checks that buckets tile the values: every value
// lands in the bucket whose bounds hold it, and bucket widths are at most
// 1/32 of their values.
func TestHistogramBuckets(t *testing.T) {
	prevEnd := uint64(0)
	for i := range histBuckets {
		lo, w := histBounds(i)
		if lo != prevEnd {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevEnd)
		}
		if w > 1 && w*histSub > lo {
			t.Fatalf("bucket %d [%d, +%d) wider than 1/%d of its values", i, lo, w, histSub)
		}
		for _, v := range []uint64{lo, lo + w/2, lo + w - 1} {
			if got := histIndex(v); got != i {
				t.Fatalf("value %d in bucket %d, want %d", v, got, i)
			}
		}
		prevEnd = lo + w
	}
	if prevEnd != histMax+1 {
		t.Fatalf("buckets end at %d, want %d", prevEnd, uint64(histMax+1))
	}
}

// TestHistogramRandom compares quantiles with the exact ones of a sorted
// sample, over several merged histograms.
func TestHistogramRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	var parts [4]Histogram
	var all []int64
	for range 100_000 {
		v := int64(rng.ExpFloat64() * 20_000) // latencies around 20 µs
		if rng.IntN(1000) == 0 {
			v *= 1000 // a tail
		}
		all = append(all, v)
		parts[rng.IntN(len(parts))].Record(v)
	}
	var h Histogram
	for i := range parts {
		h.Merge(&parts[i])
	}
	slices.Sort(all)
	if h.Count() != uint64(len(all)) || h.Max() != all[len(all)-1] {
		t.Fatalf("count %d max %d, want %d %d", h.Count(), h.Max(), len(all), all[len(all)-1])
	}
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		rank := int(q*float64(len(all)) + 0.999999)
		exact := all[max(rank, 1)-1]
		got := h.Quantile(q)
		if diff := got - exact; diff*64 > exact || -diff*64 > exact {
			t.Errorf("Quantile(%v) = %d, exact %d: off by more than 1/64", q, got, exact)
		}
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(12345) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}
