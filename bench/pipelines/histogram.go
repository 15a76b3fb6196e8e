package pipelines

import (
	"math/bits"
	"sync/atomic"
)

// Histogram counts non-negative values (latencies in nanoseconds) in
// log-linear buckets: values below 64 each have their own bucket; above,
// each power of two is split into 32 buckets, so a bucket is at most 1/32
// of its values wide and the midpoint Quantile reports is within 1/64
// (1.6%) of every value in it. Values are clamped to [0, 2⁴⁰) ns (about 18
// minutes). The zero value is empty and ready to use; Record does not
// allocate.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

const (
	histSubBits = 5 // 2^5 buckets per power of two
	histSub     = 1 << histSubBits
	histMaxBits = 40
	histMax     = 1<<histMaxBits - 1
	// Index of the bucket of histMax, plus one.
	histBuckets = (histMaxBits-histSubBits-1)*histSub + 2*histSub
)

// histIndex returns v's bucket: v itself below 2·histSub; else, with shift
// the number of low bits dropped to keep histSubBits+1 significant bits,
// shift·histSub + (v >> shift).
func histIndex(v uint64) int {
	shift := bits.Len64(v) - histSubBits - 1
	if shift <= 0 {
		return int(v)
	}
	return shift*histSub + int(v>>shift)
}

// histBounds returns the smallest value of bucket i and the bucket's width.
func histBounds(i int) (lo, width uint64) {
	if i < 2*histSub {
		return uint64(i), 1
	}
	shift := i/histSub - 1
	top := uint64(i - shift*histSub)
	return top << shift, 1 << shift
}

// Record adds one value.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if v > histMax {
		v = histMax
	}
	h.counts[histIndex(uint64(v))]++
	h.n++
	h.max = max(h.max, v)
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest value recorded (after clamping), or 0.
func (h *Histogram) Max() int64 { return h.max }

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Quantile returns an estimate of the q-quantile (q in [0, 1]): the
// midpoint of the bucket holding the value of rank ⌈q·n⌉, capped at Max.
// It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) {
		rank++
	}
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, width := histBounds(i)
			return min(int64(lo+(width-1)/2), h.max)
		}
	}
	return h.max
}

// LiveHistogram is a Histogram that any number of goroutines record into
// while one other drains it: each bucket is an atomic counter. It is for
// sparse values, such as latency samples: a Record is an atomic add on a
// line that every recorder shares. The zero value is empty and ready to
// use.
type LiveHistogram struct {
	counts [histBuckets]atomic.Uint64
	max    atomic.Int64
}

// Record adds one value, clamped as Histogram.Record clamps it.
func (h *LiveHistogram) Record(v int64) {
	v = min(max(v, 0), histMax)
	h.counts[histIndex(uint64(v))].Add(1)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}

// Drain moves every value recorded since the previous Drain into into. A
// value recorded while Drain runs lands in this Drain or the next, never
// both, never neither. NB: the maximum moves separately from the counts,
// so a value recorded during a Drain can raise this Drain's maximum while
// it counts in the next one.
func (h *LiveHistogram) Drain(into *Histogram) {
	for i := range h.counts {
		if h.counts[i].Load() == 0 {
			continue
		}
		n := h.counts[i].Swap(0)
		into.counts[i] += n
		into.n += n
	}
	into.max = max(into.max, h.max.Swap(0))
}
