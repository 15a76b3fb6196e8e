package ringflow

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
)

// splitLog is an exchangeLog that can be rescaled: a rescaled reader of
// the tests reads its log from the start.
type splitLog struct{ *exchangeLog }

func (splitLog) RescalePosition(int, int, [][]byte) ([]byte, error) { return nil, nil }

func exGen(kind byte, gen uint64, part int32, producer int, t int64) ExchangeRecord {
	v := appendCutHeader(nil, kind, gen, producer, t)
	if kind == cutData {
		v = binary.LittleEndian.AppendUint64(v, uint64(t))
	}
	return ExchangeRecord{Partition: part, Value: v}
}

func newGenReader(t *testing.T, recs []ExchangeRecord, gen *uint64, producers int, mine []int32) *cutReader[uint64] {
	t.Helper()
	codec, err := operator.CodecFor[uint64]()
	if err != nil {
		t.Fatal(err)
	}
	return &cutReader[uint64]{spec: &cutSpec{topic: "t", producers: producers, mine: mine, gen: gen}, codec: codec,
		inner: splitLog{&exchangeLog{recs: recs}}}
}

// TestCutReaderRescale follows a reader of a rescaled process: it takes
// partition 4 from one old reader and partition 5 from another, with their
// channels of layout generation 0 (two producers); the first record of
// generation 1 (three producers) in a partition drops that partition's
// old channels, and the reader's watermark is then held by the new
// producers there alone; a record of the old generation after it, or of
// a generation the process does not know, fails the reader; and it ends
// once the new producers ended on both partitions.
func TestCutReaderRescale(t *testing.T) {
	var gen0, gen1 uint64 = 0, 1
	oldA := newGenReader(t, []ExchangeRecord{
		exMark(cutWatermark, 4, 0, 50), exMark(cutWatermark, 4, 1, 40),
	}, &gen0, 2, []int32{4})
	oldB := newGenReader(t, []ExchangeRecord{
		exMark(cutWatermark, 5, 0, 60), exMark(cutEnd, 5, 1, 0),
	}, &gen0, 2, []int32{5})
	buf := make([]uint64, 8)
	var old [][]byte
	for _, r := range []*cutReader[uint64]{oldA, oldB} {
		if err := r.Open(0, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
		old = append(old, r.Position())
	}
	tail := []ExchangeRecord{
		exMark(cutWatermark, 4, 1, 45), // generation 0, still unread in partition 4
		exGen(cutData, 1, 4, 2, 75),    // generation 1 begins in partition 4
		exGen(cutWatermark, 1, 4, 0, 70), exGen(cutWatermark, 1, 4, 1, 80), exGen(cutWatermark, 1, 4, 2, 90),
		exGen(cutEnd, 1, 4, 0, 0), exGen(cutEnd, 1, 4, 1, 0), exGen(cutEnd, 1, 4, 2, 0),
		exGen(cutEnd, 1, 5, 0, 0), exGen(cutEnd, 1, 5, 1, 0), exGen(cutEnd, 1, 5, 2, 0),
	}
	open := func(recs []ExchangeRecord, pos []byte) *cutReader[uint64] {
		t.Helper()
		r := newGenReader(t, recs, &gen1, 3, []int32{4, 5})
		if pos == nil {
			var err error
			if pos, err = r.RescalePosition(0, 1, old); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Open(0, 1, pos); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open(tail, nil)
	step := func(max int, wantN int, wantWm int64, wantEOF bool) {
		t.Helper()
		n, err := r.Read(buf[:max])
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		wm, _ := r.Watermark(time.Time{})
		if n != wantN || wm != wantWm || errors.Is(err, io.EOF) != wantEOF {
			t.Fatalf("read %d (EOF %v), watermark %d; want %d (EOF %v), watermark %d", n, errors.Is(err, io.EOF), wm, wantN, wantEOF, wantWm)
		}
	}
	step(0, 0, 40, false) // the old channels: 50, 40 on 4; 60, ended on 5
	step(1, 0, 45, false)
	step(1, 1, MinWatermark, false) // partition 4's new producers have said nothing
	step(3, 0, 60, false)           // 70, 80, 90 on 4; 5 still held at 60 by old producer 0
	// A restore at the same layout keeps each partition's generation.
	r = open(tail, r.Position())
	step(3, 0, 60, false)
	step(1, 0, MinWatermark, false) // partition 5 moved on to generation 1: its producer 0 ended, not 1 and 2
	step(2, 0, MaxWatermark, true)

	for name, tc := range map[string]struct {
		rec  ExchangeRecord
		want string
	}{
		"old after new": {exMark(cutData, 4, 0, 1), "a record of layout generation 0 after one of generation 1"},
		"unknown":       {exGen(cutData, 2, 4, 0, 1), "a record of layout generation 2, which this process does not know"},
	} {
		r := open([]ExchangeRecord{exGen(cutWatermark, 1, 4, 0, 1), tc.rec}, nil)
		_, err := r.Read(buf)
		if !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrCluster saying %q", name, err, tc.want)
		}
	}
	// Rescaled, every partition needs an old reader that had it.
	r2 := newGenReader(t, nil, &gen1, 3, []int32{4, 5, 6})
	if _, err := r2.RescalePosition(0, 1, old); err == nil || !strings.Contains(err.Error(), "no old reader's position has partitions [6]") {
		t.Errorf("a partition no old reader had: got %v", err)
	}
}

// TestClusterRecord round-trips the layout a checkpoint records.
func TestClusterRecord(t *testing.T) {
	r := clusterRecord{jobID: "job", process: 2, processes: 3, partitions: 12, gen: 4}
	got, ok := decodeClusterRecord(r.encode())
	if !ok || got != r {
		t.Fatalf("decoded %+v, %v; want %+v", got, ok, r)
	}
	for _, b := range [][]byte{nil, []byte("other"), r.encode()[:len(r.encode())-1]} {
		if _, ok := decodeClusterRecord(b); ok {
			t.Errorf("decoded %q", b)
		}
	}
}
