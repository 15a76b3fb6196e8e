package pipelines

import (
	"context"
	"testing"

	"github.com/ringflow/ringflow"
)

// BenchmarkGen measures generating one record.
func BenchmarkGen(b *testing.B) {
	g := gen{keys: DefaultKeys, seed: seedMain}
	var sink uint64
	for i := range b.N {
		sink += g.record(uint64(i)).Key
	}
	_ = sink
}

// BenchmarkFill measures this package's generator, per record, filling
// batches of 1024 as the sources do.
func BenchmarkFill(b *testing.B) {
	g := gen{keys: DefaultKeys, seed: seedMain}
	buf := make([]Record, 1024)
	seq := uint64(0)
	for b.Loop() {
		g.fill(buf, seq, 1)
		seq += 1024
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(buf)), "ns/record")
}

// BenchmarkGenerateRead measures ringflow.Generate's Read of a batch of
// 1024 records from this package's generator, per record: ringflow's
// generator calls its function once per record, which is why the pipelines
// use their own source (compare BenchmarkFill).
func BenchmarkGenerateRead(b *testing.B) {
	src := ringflow.Generate(gen{keys: DefaultKeys, seed: seedMain}.record, ringflow.GenOptions{})()
	if err := src.Open(0, 1, nil); err != nil {
		b.Fatal(err)
	}
	buf := make([]Record, 1024)
	b.SetBytes(40)
	for b.Loop() {
		src.Read(buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(buf)), "ns/record")
}

// BenchmarkPipelines runs each pipeline on each engine with 1M records,
// parallelism 1: records per second is the figure to read.
func BenchmarkPipelines(b *testing.B) {
	for _, name := range Names {
		for _, eng := range []struct {
			name string
			run  func(context.Context, Config) (Result, error)
		}{{"ringflow", Run}, {"chan", RunBaseline}} {
			b.Run(name+"/"+eng.name, func(b *testing.B) {
				c := Config{Pipeline: name, Records: 1 << 20, Parallelism: 1, Keys: 100_000}
				var recs float64
				for b.Loop() {
					res, err := eng.run(context.Background(), c)
					if err != nil {
						b.Fatal(err)
					}
					recs += float64(res.Records)
				}
				b.ReportMetric(recs/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
