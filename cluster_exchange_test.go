package ringflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
)

// exchangeLog is a repartition topic's records in the order a reader
// gets them, for a reader without Kafka: its position is how many it has
// handed over, and it never ends by itself (as a topic does not).
type exchangeLog struct {
	recs []ExchangeRecord
	next int
}

func (l *exchangeLog) Open(_, _ int, pos []byte) error {
	l.next = 0
	if pos != nil {
		l.next = int(binary.LittleEndian.Uint64(pos))
	}
	return nil
}

func (l *exchangeLog) Read(buf []ExchangeRecord) (int, error) {
	n := copy(buf, l.recs[l.next:])
	l.next += n
	return n, nil
}

func (l *exchangeLog) Position() []byte { return binary.LittleEndian.AppendUint64(nil, uint64(l.next)) }
func (l *exchangeLog) Close() error     { return nil }

func exData(part int32, producer int, ts int64, v uint64) ExchangeRecord {
	b := appendCutHeader(nil, cutData, 0, producer, ts)
	return ExchangeRecord{Partition: part, Value: binary.LittleEndian.AppendUint64(b, v)}
}

func exMark(kind byte, part int32, producer int, t int64) ExchangeRecord {
	return ExchangeRecord{Partition: part, Value: appendCutHeader(nil, kind, 0, producer, t)}
}

func newTestReader(t *testing.T, log *exchangeLog) *cutReader[uint64] {
	t.Helper()
	codec, err := operator.CodecFor[uint64]()
	if err != nil {
		t.Fatal(err)
	}
	// Two producers; the process owns partitions 4 and 5, and this is
	// subtask 0 of 1.
	return &cutReader[uint64]{spec: &cutSpec{topic: "t", producers: 2, mine: []int32{4, 5}}, codec: codec, inner: log}
}

// TestCutReaderChannels follows a reader through data, watermarks and
// ends from two producers on two partitions, with a restore in the
// middle: its watermark is the lowest of its four channels', a restored
// reader keeps what the markers before its position said, and it ends
// once every channel has ended, not before.
func TestCutReaderChannels(t *testing.T) {
	log := &exchangeLog{recs: []ExchangeRecord{
		exData(4, 0, 10, 100), exMark(cutWatermark, 4, 0, 50), exMark(cutWatermark, 4, 1, 40),
		exMark(cutWatermark, 5, 0, 60), exData(5, 1, 30, 101), exMark(cutWatermark, 5, 1, 45),
		exMark(cutEnd, 4, 0, 0), exMark(cutEnd, 5, 0, 0), exMark(cutEnd, 4, 1, 0),
		exData(5, 1, 70, 102), exMark(cutEnd, 5, 1, 0),
	}}
	r := newTestReader(t, log)
	if err := r.Open(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	buf, ts := make([]uint64, 4), make([]int64, 4)
	step := func(max int, want []uint64, wantTs []int64, wantWm int64, wantEOF bool) {
		t.Helper()
		n, err := r.Read(buf[:max])
		r.Timestamps(ts[:n])
		if !slices.Equal(buf[:n], want) || !slices.Equal(ts[:n], wantTs) || errors.Is(err, io.EOF) != wantEOF {
			t.Fatalf("read %v at %v, %v; want %v at %v, EOF %v", buf[:n], ts[:n], err, want, wantTs, wantEOF)
		}
		if wm, _ := r.Watermark(time.Time{}); wm != wantWm {
			t.Fatalf("watermark %d, want %d", wm, wantWm)
		}
	}
	step(3, []uint64{100}, []int64{10}, MinWatermark, false) // partition 5 has no watermark yet
	step(3, []uint64{101}, []int64{30}, 40, false)           // channels at 50, 40, 60, 45
	pos := r.Position()

	r2 := newTestReader(t, log)
	if err := r2.Open(0, 1, pos); err != nil {
		t.Fatal(err)
	}
	r = r2
	step(3, nil, nil, 45, false)                            // all but producer 1 on partition 5 ended
	step(4, []uint64{102}, []int64{70}, MaxWatermark, true) // it too: the end
}

// TestCutReaderErrors checks that a reader names what is wrong with a
// record or a position instead of reading on.
func TestCutReaderErrors(t *testing.T) {
	for name, rec := range map[string]ExchangeRecord{
		"partition 3, which is not this subtask's": exData(3, 0, 0, 1),
		"producer 2 of 2":                          exData(4, 2, 0, 1),
		"kind 'x'":                                 exMark('x', 4, 0, 0),
		"2 bytes":                                  {Partition: 4, Value: []byte{'d', 0}},
	} {
		r := newTestReader(t, &exchangeLog{recs: []ExchangeRecord{rec}})
		if err := r.Open(0, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(make([]uint64, 4)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	r := newTestReader(t, &exchangeLog{})
	if err := r.Open(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	pos := r.Position()
	other := newTestReader(t, &exchangeLog{})
	other.spec.producers = 3 // the job was restarted with other processes
	if err := other.Open(0, 1, pos); !errors.Is(err, ErrCluster) {
		t.Fatalf("restore at another layout: got %v, want an ErrCluster", err)
	}
}

// TestCutReaderIdle: a producer idle on every partition holds back no
// watermark, and one that writes again counts again, from its own.
func TestCutReaderIdle(t *testing.T) {
	log := &exchangeLog{recs: []ExchangeRecord{
		exMark(cutWatermark, 4, 0, 50), exMark(cutWatermark, 5, 0, 60),
		exMark(cutIdle, 4, 1, 0), exMark(cutIdle, 5, 1, 0),
		exData(4, 1, 30, 7),
	}}
	r := newTestReader(t, log)
	if err := r.Open(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]uint64, 4)
	if n, err := r.Read(buf); n != 0 || err != nil {
		t.Fatalf("read %d, %v; want nothing", n, err)
	}
	if wm, idle := r.Watermark(time.Time{}); wm != 50 || idle {
		t.Fatalf("watermark %d, idle %v; want 50 from producer 0 alone", wm, idle)
	}
	r2 := newTestReader(t, log)
	if err := r2.Open(0, 1, r.Position()); err != nil {
		t.Fatal(err)
	}
	if wm, idle := r2.Watermark(time.Time{}); wm != 50 || idle {
		t.Fatalf("restored: watermark %d, idle %v; want 50: idleness is in the position", wm, idle)
	}
	if n, _ := r2.Read(buf); n != 1 || buf[0] != 7 {
		t.Fatalf("read %v; want the record 7", buf[:n])
	}
	if wm, _ := r2.Watermark(time.Time{}); wm != MinWatermark {
		t.Fatalf("watermark %d; want producer 1's on partition 4, none yet", wm)
	}
}

// memSink keeps what a cut writer writes, in order.
type memSink struct{ recs []ExchangeRecord }

func (m *memSink) Open(context.Context, int, int) error    { return nil }
func (m *memSink) Recover(context.Context, [][]byte) error { return nil }
func (m *memSink) Write(r ExchangeRecord) error {
	// NB: the value is the writer's once Write returns (see
	// Exchange.Sink).
	m.recs = append(m.recs, ExchangeRecord{Partition: r.Partition, Value: slices.Clone(r.Value)})
	return nil
}
func (m *memSink) Commit(context.Context, []byte) error                    { return nil }
func (m *memSink) Close() error                                            { return nil }
func (m *memSink) PreCommit() ([]byte, func(context.Context) error, error) { return nil, nil, nil }

// kinds returns the kinds and times of what was written since the last
// call, one letter and time per partition-wide marker (checked to have
// gone to every partition) or data record.
func (m *memSink) kinds(t *testing.T, partitions int) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(m.recs); {
		h, _, err := parseCutHeader(m.recs[i].Value)
		kind, ts := h.kind, h.t
		if err != nil {
			t.Fatal(err)
		}
		if kind == cutData {
			out = append(out, fmt.Sprintf("d%d", ts))
			i++
			continue
		}
		for p := range partitions {
			if m.recs[i+p].Partition != int32(p) || m.recs[i+p].Value[0] != kind {
				t.Fatalf("marker %q went to partitions %v", kind, m.recs[i:i+partitions])
			}
		}
		out = append(out, fmt.Sprintf("%c%d", kind, ts))
		i += partitions
	}
	m.recs = nil
	return out
}

// TestCutWriterMarkers: a writer sends a watermark at most every
// cutMarkerEvery, the pending one when Tick finds it due or before the
// input goes idle, and its end with the watermark that ends the input.
func TestCutWriterMarkers(t *testing.T) {
	codec, err := operator.CodecFor[uint64]()
	if err != nil {
		t.Fatal(err)
	}
	plan := &ClusterPlan{Processes: 1, Partitions: 3, MaxParallelism: 8}
	hash := operator.KeyHasher[uint64]{One: func(p *uint64) uint64 { return *p }, All: func(rs []uint64, hs []uint64) {
		for i := range rs {
			hs[i] = rs[i]
		}
	}}
	sink := &memSink{}
	w := newCutWriter[uint64](&cutSpec{plan: plan, topic: "t", keyHash: hash, timed: true, producers: 1}, codec, sink)
	clock := time.Unix(1000, 0)
	w.now = func() time.Time { return clock }
	if err := w.Open(&operator.Context{Operator: "w", Parallelism: 1, MaxParallelism: 8, Checkpoints: true}); err != nil {
		t.Fatal(err)
	}
	check := func(want ...string) {
		t.Helper()
		if got := sink.kinds(t, plan.Partitions); !slices.Equal(got, want) {
			t.Fatalf("wrote %v, want %v", got, want)
		}
	}
	w.Push([]uint64{1}, []int64{5})
	w.Watermark(10)
	check("d5", "w10") // the first goes at once
	w.Watermark(20)
	w.Watermark(30)
	check() // too soon
	due := w.Deadline()
	if due != clock.Add(cutMarkerEvery) {
		t.Fatalf("deadline %v, want %v after the last", due, cutMarkerEvery)
	}
	w.Tick(due.Add(-time.Nanosecond))
	check()
	clock = due
	w.Tick(due)
	check("w30")
	w.Watermark(40)
	w.Idle(40)
	check("w40", "i0") // the pending watermark, then the idleness
	w.Watermark(MaxWatermark)
	w.End()
	check("e0") // once
}
