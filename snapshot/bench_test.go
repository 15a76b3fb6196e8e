package snapshot

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkCommit commits checkpoints of 128 key groups × 64 KiB to a store
// on the real filesystem (fsync included): every key group written (full);
// 1% of them (2 of 128, rounded up) written and the rest reused from the
// previous checkpoint (incremental-1pct); or every key group reused with a
// delta of 1% of its size appended (delta-1pct: 1% of the keys changed,
// spread over every key group). SetBytes is the logical checkpoint size, so
// MB/s compares them; written-B/op is what the store wrote.
//
//	go test -run - -bench BenchmarkCommit -benchtime 20x ./snapshot/
func BenchmarkCommit(b *testing.B) {
	const kgs, size = 128, 64 << 10
	data := make([][]byte, kgs)
	for kg := range data {
		data[kg] = blob(kg, 1, size)
	}
	deltas := make([][]byte, kgs)
	for kg := range deltas {
		deltas[kg] = blob(kgs+kg, 1, size/100)
	}
	for _, tc := range []struct {
		name    string
		changed int
		deltas  [][]byte
	}{
		{"full", kgs, nil},
		{"incremental-1pct", (kgs + 99) / 100, nil},
		{"delta-1pct", 0, deltas},
	} {
		b.Run(fmt.Sprintf("%s/kgs=%d/size=%d", tc.name, kgs, size), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Logger: newTestLogger(b).slog()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchCheckpoint(b, s, 1, data, kgs, nil)
			b.SetBytes(kgs * size)
			b.ResetTimer()
			before := s.Stats()
			for i := 0; i < b.N; i++ {
				benchCheckpoint(b, s, uint64(i+2), data, tc.changed, tc.deltas)
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
// reusing the rest from id-1, each extended by its delta if deltas is not
// nil. (A
// real writer would write a fresh base once a chain grows long; here chains
// grow by one per iteration, to measure a delta checkpoint alone.)
func benchCheckpoint(b *testing.B, s *Store, id uint64, data [][]byte, changed int, deltas [][]byte) {
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
		if err == nil && deltas != nil {
			err = p.AppendKeyGroupDelta("count", kg, deltas[kg])
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
	s, err := Open("bench", Options{FS: vfs.NewMem(), Logger: newTestLogger(b).slog()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchCheckpoint(b, s, 1, data, kgs, nil)
	b.SetBytes(kgs * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Latest(); err != nil {
			b.Fatal(err)
		}
	}
}
