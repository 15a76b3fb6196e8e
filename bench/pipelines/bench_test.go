package pipelines

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// BenchmarkGen measures generating one record.
func BenchmarkGen(b *testing.B) {
	g := gen{keys: DefaultKeys, seed: seedMain, sampleMask: DefaultSampleEvery - 1}
	var sink uint64
	for i := range b.N {
		sink += g.record(uint64(i)).Key
	}
	_ = sink
}

// BenchmarkFill measures this package's generator, per record, filling
// batches of 1024 as the sources do.
func BenchmarkFill(b *testing.B) {
	g := gen{keys: DefaultKeys, seed: seedMain, sampleMask: DefaultSampleEvery - 1}
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
	src := ringflow.Generate(gen{keys: DefaultKeys, seed: seedMain, sampleMask: DefaultSampleEvery - 1}.record, ringflow.GenOptions{})()
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

// BenchmarkPassthroughCeiling measures the most any engine can do on the
// passthrough pipeline here: generate, count and digest into the sink's
// lane, in one loop per source instance, as BenchmarkMapFilterCeiling does
// for map-filter.
func BenchmarkPassthroughCeiling(b *testing.B) {
	benchCeiling(b, "passthrough", func(c Config, ls *lanes) (float64, error) {
		return fusedForward(c, func(sub int) {
			fusedPassthrough(specOf(c, seedMain), sub, c.Parallelism, &ls.l[sub])
		}), nil
	})
}

// BenchmarkMapFilterCeiling measures the most any engine can do on the
// map-filter pipeline here: the same work — generate, map, filter, count
// and digest into the sink's lane — fused into one loop per source
// instance, one goroutine per instance and nothing shared, so no hand-off,
// no copy between stages and no call through a function value. It runs
// the channel baseline in the same iteration and reports both, and the
// ratio: an engine that does the pipeline's work cannot beat the channel
// baseline by more than fused/chan. BenchmarkPassthroughCeiling,
// BenchmarkKeyedCountCeiling, BenchmarkWindowCeiling and
// BenchmarkJoinCeiling do the same for the other pipelines.
func BenchmarkMapFilterCeiling(b *testing.B) {
	benchCeiling(b, "map-filter", func(c Config, ls *lanes) (float64, error) {
		return fusedForward(c, func(sub int) { fusedMapFilter(specOf(c, seedMain), sub, c.Parallelism, ls) }), nil
	})
}

// The ceiling benchmarks' shape: go test -bench Ceiling -cpu 1
// ./bench/pipelines -args -ceiling.parallelism 1 compares a fused loop
// and the baseline on one core, where dfbench run --parallelism 1
// --workers 1 runs the engine.
var (
	ceilingPar  = flag.Int("ceiling.parallelism", 2, "subtasks of the ceiling benchmarks' fused loops and baselines")
	ceilingKeys = flag.Uint64("ceiling.keys", DefaultKeys, "distinct keys of the ceiling benchmarks")
)

// benchCeiling runs a pipeline's fused loop (which returns its seconds)
// and the channel baseline on 2^24 records in each iteration, at the
// parallelism and keys of the flags above, checks that both give the same
// records and checksum, and reports both rates and their ratio.
func benchCeiling(b *testing.B, pipeline string, fused func(Config, *lanes) (float64, error)) {
	const records = 1 << 24
	var fusedSecs, chanSecs float64
	for b.Loop() {
		c := Config{Pipeline: pipeline, Records: records, Parallelism: *ceilingPar, Keys: *ceilingKeys}.withDefaults()
		res, err := RunBaseline(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		chanSecs += res.Seconds
		ls := newLanes(c)
		secs, err := fused(c, ls)
		if err != nil {
			b.Fatal(err)
		}
		fusedSecs += secs
		if n, sum := ls.total(new(Histogram)); n != res.SinkRecords || sum != res.Checksum {
			b.Fatalf("fused loop: %d records, checksum %#x; the baseline: %d, %#x", n, sum, res.SinkRecords, res.Checksum)
		}
	}
	n := float64(b.N) * records
	b.ReportMetric(n/fusedSecs, "fused-records/s")
	b.ReportMetric(n/chanSecs, "chan-records/s")
	b.ReportMetric(chanSecs/fusedSecs, "fused/chan")
}

// fusedForward runs loop for every source instance of a forward pipeline
// on a goroutine of its own and returns the seconds until all have
// returned.
func fusedForward(c Config, loop func(sub int)) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.Parallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(i)
		}()
	}
	wg.Wait()
	return time.Since(start).Seconds()
}

// fusedPassthrough is source instance sub of par of the passthrough
// pipeline with its sink written into the loop over its batches. Its lane
// l is the sink instance's, which sees exactly the records of source
// instance sub (lanes.bySeq).
func fusedPassthrough(spec sourceSpec, sub, par int, l *lane) {
	var s genSource
	s.init(spec, sub, par, 0, new(atomic.Uint64))
	buf := make([]Record, batchLen)
	for !s.exhausted() {
		n := s.next(buf)
		for i := range buf[:n] {
			l.add(digestRecord(&buf[i]), buf[i].SrcNanos)
		}
	}
}

// fusedMapFilter is source instance sub of par of the map-filter pipeline
// with every stage written into one loop over its batches.
func fusedMapFilter(spec sourceSpec, sub, par int, ls *lanes) {
	var s genSource
	s.init(spec, sub, par, 0, new(atomic.Uint64))
	buf := make([]Record, batchLen)
	for !s.exhausted() {
		n := s.next(buf)
		for i := range buf[:n] {
			r := mapValue(buf[i])
			if keepValue(r) {
				ls.bySeq(r.Seq).add(digestRecord(&r), r.SrcNanos)
			}
		}
	}
}

// BenchmarkKeyedCountOutputAddFile measures the exactly-once check of a
// soak, per committed line of keyed-count output over 1M keys: what the
// soak spends beside the job it measures.
func BenchmarkKeyedCountOutputAddFile(b *testing.B) {
	const keys, lines = 1 << 20, 1 << 20
	c := Config{Pipeline: "keyed-count", Keys: keys}
	path := filepath.Join(b.TempDir(), "part-0-0")
	var buf []byte
	g := uniformKeys(keys)
	counts := make([]uint64, keys)
	for range lines {
		k := g()
		counts[k]++
		buf = countLine(buf, Record{Key: k, Value: int64(counts[k])})
		buf = append(buf, '\n')
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	o, err := NewKeyedCountOutput(c)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)) / lines)
	b.ResetTimer()
	for i := 0; i < b.N; i += lines {
		if err := o.AddFile(path); err != nil {
			b.Fatal(err)
		}
	}
}

// uniformKeys returns uniformly random keys below n, from a fixed seed.
func uniformKeys(n uint64) func() uint64 {
	x := uint64(1)
	return func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % n
	}
}
