package snapshot

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkCommit commits checkpoints of 128 key groups × 64 KiB to a store
// on the real filesystem (fsync included): every key group written (full),
// or 1% of them (2 of 128, rounded up) written and the rest reused from the
// previous checkpoint (incremental). SetBytes is the logical checkpoint
// size, so MB/s compares the two; written-B/op is what the store wrote.
//
//	go test -run - -bench BenchmarkCommit -benchtime 20x ./snapshot/
func BenchmarkCommit(b *testing.B) {
	const kgs, size = 128, 64 << 10
	data := make([][]byte, kgs)
	for kg := range data {
		data[kg] = blob(kg, 1, size)
	}
	for _, tc := range []struct {
		name    string
		changed int
	}{
		{"full", kgs},
		{"incremental-1pct", (kgs + 99) / 100},
	} {
		b.Run(fmt.Sprintf("%s/kgs=%d/size=%d", tc.name, kgs, size), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Logger: newTestLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchCheckpoint(b, s, 1, data, kgs)
			b.SetBytes(kgs * size)
			b.ResetTimer()
			before := s.Stats()
			for i := 0; i < b.N; i++ {
				benchCheckpoint(b, s, uint64(i+2), data, tc.changed)
			}
			b.StopTimer()
			after := s.Stats()
			b.ReportMetric(float64(after.BytesWritten-before.BytesWritten)/float64(b.N), "written-B/op")
			b.ReportMetric(float64(after.BytesReused-before.BytesReused)/float64(b.N), "reused-B/op")
			b.ReportMetric(float64(after.BytesIngested-before.BytesIngested)/float64(b.N), "sst-B/op")
		})
	}
}

// benchCheckpoint commits id, writing the first changed key groups and
// reusing the rest from id-1.
func benchCheckpoint(b *testing.B, s *Store, id uint64, data [][]byte, changed int) {
	p, err := s.Begin(id)
	if err != nil {
		b.Fatal(err)
	}
	for kg := range data {
		if kg < changed {
			err = p.PutKeyGroup("count", kg, data[kg])
		} else {
			err = p.ReuseKeyGroup("count", kg, id-1)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Commit(testMeta()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLatest reads back and verifies a 128 × 64 KiB checkpoint.
//
//	go test -run - -bench BenchmarkLatest ./snapshot/
func BenchmarkLatest(b *testing.B) {
	const kgs, size = 128, 64 << 10
	data := make([][]byte, kgs)
	for kg := range data {
		data[kg] = blob(kg, 1, size)
	}
	s, err := Open("bench", Options{FS: vfs.NewMem(), Logger: newTestLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchCheckpoint(b, s, 1, data, kgs)
	b.SetBytes(kgs * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Latest(); err != nil {
			b.Fatal(err)
		}
	}
}
