package snapshot

import (
	"fmt"
	"testing"
)

// BenchmarkSteadyFull commits checkpoints shaped like keyed-count at 1M
// uniform keys: 128 key groups of ~312 KiB, every one rewritten each time,
// on the real filesystem. It reports what the Go heap and Pebble's
// compactions paid per checkpoint: the costs that a job's workers share
// the machine with.
//
//	go test -run - -bench BenchmarkSteadyFull -benchtime 30x -benchmem ./snapshot/
func BenchmarkSteadyFull(b *testing.B) {
	const kgs, size = 128, 312 << 10
	data := make([][]byte, kgs)
	for kg := range data {
		data[kg] = blob(kg, 1, size)
	}
	b.Run(fmt.Sprintf("kgs=%d/size=%d", kgs, size), func(b *testing.B) {
		s, err := Open(b.TempDir(), Options{Logger: newTestLogger(b).slog()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCheckpoint(b, s, 1, data, kgs, nil)
		b.SetBytes(kgs * size)
		m0 := s.db.Metrics()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			benchCheckpoint(b, s, uint64(i+2), data, kgs, nil)
		}
		b.StopTimer()
		m1 := s.db.Metrics()
		var cw0, cw1 uint64
		for l := range m0.Levels {
			cw0 += m0.Levels[l].TableBytesCompacted
			cw1 += m1.Levels[l].TableBytesCompacted
		}
		b.ReportMetric(float64(cw1-cw0)/float64(b.N), "compacted-B/op")
		b.ReportMetric(float64(m1.Compact.Count-m0.Compact.Count)/float64(b.N), "compactions/op")
		b.ReportMetric(float64(m1.Compact.DeleteOnlyCount-m0.Compact.DeleteOnlyCount)/float64(b.N), "delete-only/op")
	})
}
