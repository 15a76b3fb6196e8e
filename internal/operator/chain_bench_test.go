package operator

import (
	"context"
	"testing"
)

type benchRec struct {
	Seq, Key uint64
	Value    int64
	Src      int64
}

type countSink struct {
	n, sum uint64
}

// BenchmarkChainMapFilterSink measures a chained map → filter → sink over
// batches of 1024 records, per record.
func BenchmarkChainMapFilterSink(b *testing.B) {
	var cs countSink
	sink := NewSink(func(_ context.Context, r benchRec) error { cs.n++; cs.sum += r.Seq; return nil })
	filter := NewFilter(func(r benchRec) bool { return r.Value&1 == 1 }, Input[benchRec](sink))
	m := NewMap(func(r benchRec) benchRec { r.Value += int64(r.Key); return r }, Input[benchRec](filter))
	ctx := &Context{Operator: "x"}
	sink.Ctx, filter.Ctx, m.Ctx = ctx, ctx, ctx
	batch := make([]benchRec, 1024)
	for i := range batch {
		batch[i] = benchRec{Seq: uint64(i), Key: uint64(i * 7), Value: 1}
	}
	b.ResetTimer()
	for b.Loop() {
		m.Push(batch, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
}

type nopInput[T any] struct{}

func (nopInput[T]) Push([]T, []int64) {}

func benchBatch() []benchRec {
	batch := make([]benchRec, 1024)
	for i := range batch {
		batch[i] = benchRec{Seq: uint64(i), Key: uint64(i * 7), Value: 1}
	}
	return batch
}

func BenchmarkMapOnly(b *testing.B) {
	m := NewMap(func(r benchRec) benchRec { r.Value += int64(r.Key); return r }, Input[benchRec](nopInput[benchRec]{}))
	m.Ctx = &Context{}
	batch := benchBatch()
	for b.Loop() {
		m.Push(batch, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
}

func BenchmarkFilterOnly(b *testing.B) {
	m := NewFilter(func(r benchRec) bool { return r.Value&1 == 1 }, Input[benchRec](nopInput[benchRec]{}))
	m.Ctx = &Context{}
	batch := benchBatch()
	for b.Loop() {
		m.Push(batch, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
}

func BenchmarkSinkOnly(b *testing.B) {
	var cs countSink
	m := NewSink(func(_ context.Context, r benchRec) error { cs.n++; cs.sum += r.Seq; return nil })
	m.Ctx = &Context{}
	batch := benchBatch()
	for b.Loop() {
		m.Push(batch, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
}
