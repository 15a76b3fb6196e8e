package ringflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
)

// The records of a repartition topic. Each value starts with a header:
//
//	+------+------------+----------+--------+----------------------+
//	| kind | generation | producer | time   | record (data only)   |
//	| byte | uvarint    | uvarint  | varint | the stream's codec   |
//	+------+------------+----------+--------+----------------------+
//
// kind is data (time: the record's event time, 0 without), watermark
// (time: the producer's watermark), idle (the producer's input went idle;
// it is active again with its next record or watermark) or end (the
// producer's input ended); in lower case, with no generation, for layout
// generation 0, and in upper case, followed by the generation, for a
// later one. The generation numbers the job's layouts: 0 when it first
// starts, one more at each rescaled start (Cluster.RestoreFrom). producer
// is the writing subtask's number among the writer's subtasks in every
// process of its generation. A producer sends each watermark, idleness
// and its end to every partition, in its transaction, behind the records
// before them.
const (
	cutData      = 'd'
	cutWatermark = 'w'
	cutIdle      = 'i'
	cutEnd       = 'e'

	cutUpper = 'a' - 'A' // a kind in upper case: a generation follows
)

var errCutRecord = errors.New("ringflow: bad repartition record")

// cutHeader is a repartition record's header.
type cutHeader struct {
	kind     byte // in lower case
	gen      uint64
	producer int
	t        int64
}

func appendCutHeader(b []byte, kind byte, gen uint64, producer int, t int64) []byte {
	if gen == 0 {
		b = append(b, kind)
	} else {
		b = append(b, kind-cutUpper)
		b = binary.AppendUvarint(b, gen)
	}
	b = binary.AppendUvarint(b, uint64(producer))
	return binary.AppendVarint(b, t)
}

func parseCutHeader(b []byte) (h cutHeader, body []byte, err error) {
	if len(b) < 3 {
		return h, nil, fmt.Errorf("%w: %d bytes", errCutRecord, len(b))
	}
	h.kind, b = b[0], b[1:]
	if h.kind >= 'A' && h.kind <= 'Z' {
		h.kind += cutUpper
		g, k := binary.Uvarint(b)
		if k <= 0 || g == 0 {
			return h, nil, fmt.Errorf("%w: bad generation", errCutRecord)
		}
		h.gen, b = g, b[k:]
	}
	p, k := binary.Uvarint(b)
	if k <= 0 || p > 1<<30 {
		return h, nil, fmt.Errorf("%w: bad producer", errCutRecord)
	}
	h.producer = int(p)
	t, k2 := binary.Varint(b[k:])
	if k2 <= 0 {
		return h, nil, fmt.Errorf("%w: bad time", errCutRecord)
	}
	h.t = t
	return h, b[k+k2:], nil
}

// cutWriter is the sink a cut edge's upstream operator feeds: it writes
// each record to the partition of its key group, and each watermark and
// the end of input to every partition, through the exchange's
// transactional sink, which it runs as TxnSink does (it is one, with
// records, watermarks and the end encoded first).
type cutWriter[T any] struct {
	*operator.TxnSink[ExchangeRecord]
	spec     *cutSpec
	codec    operator.Codec[T]
	hash     operator.KeyHasher[T]
	parts    *keygroups.Partitioner // key group → partition
	producer int
	gen      uint64    // the layout generation it writes in
	wm       int64     // the last watermark written
	pending  int64     // the newest watermark given, written when due
	sentAt   time.Time // when wm was written
	now      func() time.Time
	ended    bool // the end marker is written
	batch    []ExchangeRecord
	hashes   []uint64
	buf      []byte // the batch's values, end to end
	ends     []int  // where each value ends in buf
}

func newCutWriter[T any](s *cutSpec, codec operator.Codec[T], sink TwoPhaseSink[ExchangeRecord]) *cutWriter[T] {
	return &cutWriter[T]{TxnSink: operator.NewTxnSink[ExchangeRecord](sink), spec: s, codec: codec,
		hash: s.keyHash.(operator.KeyHasher[T]), wm: MinWatermark, pending: MinWatermark, now: time.Now}
}

// Open implements operator.Operator.
func (w *cutWriter[T]) Open(ctx *operator.Context) error {
	p, err := keygroups.NewPartitioner(w.spec.plan.Partitions, w.spec.plan.MaxParallelism)
	if err != nil {
		return fmt.Errorf("repartition topic %s: %w", w.spec.topic, err)
	}
	w.parts = p
	w.producer = w.spec.process*ctx.Parallelism + ctx.Subtask
	w.gen = w.spec.generation()
	return w.TxnSink.Open(ctx)
}

// Push implements operator.Input.
func (w *cutWriter[T]) Push(recs []T, ts []int64) {
	if cap(w.hashes) < len(recs) {
		w.hashes = make([]uint64, len(recs))
	}
	hashes := w.hashes[:len(recs)]
	w.hash.All(recs, hashes)
	// NB: the values share one buffer, reused batch after batch: the
	// exchange's sink copies a value before its Write returns (see
	// Exchange.Sink).
	buf, ends := w.buf[:0], w.ends[:0]
	for i := range recs {
		var t int64
		if ts != nil {
			t = ts[i]
		}
		buf = appendCutHeader(buf, cutData, w.gen, w.producer, t)
		buf = w.codec.Append(buf, &recs[i])
		ends = append(ends, len(buf))
	}
	w.batch = w.batch[:0]
	start := 0
	for i, end := range ends {
		w.batch = append(w.batch, ExchangeRecord{Partition: int32(w.parts.Subtask(hashes[i])), Value: buf[start:end:end]})
		start = end
	}
	w.buf, w.ends = buf, ends
	w.TxnSink.Push(w.batch, nil)
	clear(w.batch)
}

// cutMarkerEvery is the least time between two watermarks a writer sends:
// each is a record in every partition, and a source advances its
// watermark with every batch it reads. Readers see a watermark at most
// this much later (a later watermark is always safe); idleness and the
// end go at once.
const cutMarkerEvery = 5 * time.Millisecond

// Watermark implements operator.Operator. The watermark at the end of
// input ends the topic for this producer too: with checkpoints, End comes
// only after the job's final checkpoint, which waits for every reader of
// the topic to end, in every process; so the end marker goes out with the
// last watermark, in a transaction the next checkpoint commits.
func (w *cutWriter[T]) Watermark(wm int64) {
	if wm == MaxWatermark {
		w.end()
		return
	}
	if !w.spec.timed || wm <= w.pending {
		return
	}
	w.pending = wm
	w.Tick(w.now())
}

// Tick implements operator.Ticker: it sends the pending watermark when
// it is due.
func (w *cutWriter[T]) Tick(now time.Time) {
	if w.pending > w.wm && now.Sub(w.sentAt) >= cutMarkerEvery {
		w.sendWatermark(now)
	}
}

// Deadline implements operator.Ticker.
func (w *cutWriter[T]) Deadline() time.Time {
	if w.pending > w.wm {
		return w.sentAt.Add(cutMarkerEvery)
	}
	return time.Time{}
}

func (w *cutWriter[T]) sendWatermark(now time.Time) {
	w.wm, w.sentAt = w.pending, now
	w.toEvery(cutWatermark, w.wm)
}

// Idle implements operator.IdleListener: without it, a producer whose
// input is idle (a Kafka source's subtask that owns no partition) would
// hold back the watermark of every reader of the topic.
func (w *cutWriter[T]) Idle(int64) {
	if !w.spec.timed || w.ended {
		return
	}
	if w.pending > w.wm {
		w.sendWatermark(w.now()) // NB: before the idleness, which it would end
	}
	w.toEvery(cutIdle, 0)
}

// End implements operator.Operator.
func (w *cutWriter[T]) End() {
	w.end()
	w.TxnSink.End()
}

func (w *cutWriter[T]) end() {
	if w.ended {
		return
	}
	w.ended = true
	w.toEvery(cutEnd, 0)
}

func (w *cutWriter[T]) toEvery(kind byte, t int64) {
	w.batch = w.batch[:0]
	v := appendCutHeader(w.buf[:0], kind, w.gen, w.producer, t)
	w.buf = v
	for p := range w.spec.plan.Partitions {
		w.batch = append(w.batch, ExchangeRecord{Partition: int32(p), Value: v[:len(v):len(v)]})
	}
	w.TxnSink.Push(w.batch, nil)
	clear(w.batch)
}
