package operator

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
)

// keyedBenchOp is a keyed operator as the benchmarks drive it.
type keyedBenchOp interface {
	Input[benchRec]
	Open(*Context) error
}

// benchKeyedVsGoMap runs the keyed-count pipeline's keyed step with
// 50k keys (one subtask's share of 100k) on the operator made by newOp and,
// interleaved batch by batch on the same records, the channel baseline's
// loop (a Go map of counts, updated in place in the batch), and reports
// both per record. Interleaving makes the ratio robust to a noisy machine.
func benchKeyedVsGoMap(b *testing.B, newOp func(KeyFuncs[uint64, benchRec], Input[benchRec]) keyedBenchOp) {
	const keys, batchLen, stream = 50_000, 1024, 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]benchRec, stream)
	for i := range recs {
		recs[i] = benchRec{Seq: uint64(i), Key: rng.Uint64N(keys), Value: 1}
	}
	var sum int64
	sink := NewSink(func(_ context.Context, r benchRec) error { sum += r.Value; return nil })
	kf := KeyFuncs[uint64, benchRec]{Key: func(r benchRec) uint64 { return r.Key }, Hash: keygroups.HashUint64}
	op := newOp(kf, sink)
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
	sink.Ctx = ctx
	if err := op.Open(ctx); err != nil {
		b.Fatal(err)
	}
	counts := make(map[uint64]int64)
	buf := make([]benchRec, batchLen)
	var tEngine, tMap time.Duration
	off := 0
	for b.Loop() {
		in := recs[off : off+batchLen]
		off = (off + batchLen) & (stream - 1)
		t0 := time.Now()
		op.Push(in, nil)
		t1 := time.Now()
		copy(buf, in)
		for i := range buf {
			r := &buf[i]
			n := counts[r.Key] + r.Value
			counts[r.Key] = n
			r.Value = n
		}
		for i := range buf {
			sum += buf[i].Value
		}
		t2 := time.Now()
		tEngine, tMap = tEngine+t1.Sub(t0), tMap+t2.Sub(t1)
	}
	n := float64(b.N * batchLen)
	b.ReportMetric(float64(tEngine.Nanoseconds())/n, "engine-ns/rec")
	b.ReportMetric(float64(tMap.Nanoseconds())/n, "gomap-ns/rec")
	b.ReportMetric(float64(tMap)/float64(tEngine), "speedup")
}

// BenchmarkReduceVsGoMap: the rolling count as a Reduce, which keeps the
// whole 32-byte record per key.
func BenchmarkReduceVsGoMap(b *testing.B) {
	benchKeyedVsGoMap(b, func(kf KeyFuncs[uint64, benchRec], next Input[benchRec]) keyedBenchOp {
		return NewReduce(kf, func(acc, r benchRec) benchRec { r.Value += acc.Value; return r }, next)
	})
}

// BenchmarkMapWithStateVsGoMap: the rolling count as a MapWithState with
// one int64 per key, like the Go map's.
func BenchmarkMapWithStateVsGoMap(b *testing.B) {
	benchKeyedVsGoMap(b, func(kf KeyFuncs[uint64, benchRec], next Input[benchRec]) keyedBenchOp {
		return NewMapWithState(kf, func(n *int64, r benchRec) benchRec { *n += r.Value; r.Value = *n; return r }, next)
	})
}
