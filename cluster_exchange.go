package ringflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
)

// The records of a repartition topic. Each value starts with a header:
//
//	+------+---------------------+---------------+----------------------+
//	| kind | producer            | time          | record (data only)   |
//	| byte | uvarint             | varint        | the stream's codec   |
//	+------+---------------------+---------------+----------------------+
//
// kind is data (time: the record's event time, 0 without), watermark
// (time: the producer's watermark), idle (the producer's input went idle;
// it is active again with its next record or watermark) or end (the
// producer's input ended). producer is the writing subtask's number among
// the writer's subtasks in every process. A producer sends each
// watermark, idleness and its end to every partition, in its transaction,
// behind the records before them.
const (
	cutData      = 'd'
	cutWatermark = 'w'
	cutIdle      = 'i'
	cutEnd       = 'e'
)

var errCutRecord = errors.New("ringflow: bad repartition record")

func appendCutHeader(b []byte, kind byte, producer int, t int64) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(producer))
	return binary.AppendVarint(b, t)
}

func parseCutHeader(b []byte) (kind byte, producer int, t int64, body []byte, err error) {
	if len(b) < 3 {
		return 0, 0, 0, nil, fmt.Errorf("%w: %d bytes", errCutRecord, len(b))
	}
	kind = b[0]
	p, k := binary.Uvarint(b[1:])
	if k <= 0 || p > 1<<30 {
		return 0, 0, 0, nil, fmt.Errorf("%w: bad producer", errCutRecord)
	}
	t, k2 := binary.Varint(b[1+k:])
	if k2 <= 0 {
		return 0, 0, 0, nil, fmt.Errorf("%w: bad time", errCutRecord)
	}
	return kind, int(p), t, b[1+k+k2:], nil
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
	wm       int64     // the last watermark written
	pending  int64     // the newest watermark given, written when due
	sentAt   time.Time // when wm was written
	now      func() time.Time
	ended    bool // the end marker is written
	batch    []ExchangeRecord
	hashes   []uint64
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
	return w.TxnSink.Open(ctx)
}

// Push implements operator.Input.
func (w *cutWriter[T]) Push(recs []T, ts []int64) {
	if cap(w.hashes) < len(recs) {
		w.hashes = make([]uint64, len(recs))
	}
	hashes := w.hashes[:len(recs)]
	w.hash.All(recs, hashes)
	w.batch = w.batch[:0]
	for i := range recs {
		var t int64
		if ts != nil {
			t = ts[i]
		}
		// NB: a value of its own per record: the exchange's sink keeps it
		// until the broker has it.
		v := appendCutHeader(make([]byte, 0, 16+w.codec.Size()), cutData, w.producer, t)
		v = w.codec.Append(v, &recs[i])
		part := w.parts.Subtask(hashes[i])
		w.batch = append(w.batch, ExchangeRecord{Partition: int32(part), Value: v})
	}
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
	for p := range w.spec.plan.Partitions {
		w.batch = append(w.batch, ExchangeRecord{Partition: int32(p), Value: appendCutHeader(nil, kind, w.producer, t)})
	}
	w.TxnSink.Push(w.batch, nil)
	clear(w.batch)
}

// cutReader is the source of a cut edge's downstream operator in one
// process: it reads its share of the process's partitions, decodes the
// records and keeps, per partition and producer (a channel), the latest
// watermark and whether the producer ended. Its watermark is the lowest
// of its channels'; it ends when every channel has. Its position is the
// exchange source's with the channels', so that a restored reader needs
// no marker twice.
type cutReader[T any] struct {
	spec  *cutSpec
	codec operator.Codec[T]
	inner SourceFunc[ExchangeRecord]

	parts  []int32 // this subtask's partitions, ascending
	wms    []int64 // by channel: partition index * producers + producer
	ended  []bool
	idle   []bool
	nEnded int

	raw []ExchangeRecord
	ts  []int64
}

var (
	_ SourceFunc[int] = (*cutReader[int])(nil)
	_ EventTimeSource = (*cutReader[int])(nil)
)

// Open implements SourceFunc.
func (r *cutReader[T]) Open(subtask, parallelism int, pos []byte) error {
	r.parts = nil
	for k, p := range r.spec.mine {
		if k%parallelism == subtask {
			r.parts = append(r.parts, p)
		}
	}
	n := len(r.parts) * r.spec.producers
	r.wms, r.ended, r.idle, r.nEnded = make([]int64, n), make([]bool, n), make([]bool, n), 0
	for i := range r.wms {
		r.wms[i] = MinWatermark
	}
	var innerPos []byte
	if pos != nil {
		var err error
		if innerPos, err = r.restore(pos); err != nil {
			return fmt.Errorf("repartition topic %s: %w", r.spec.topic, err)
		}
	}
	return r.inner.Open(subtask, parallelism, innerPos)
}

// Read implements SourceFunc.
func (r *cutReader[T]) Read(buf []T) (int, error) {
	if r.nEnded == len(r.ended) {
		return 0, io.EOF // every producer ended, or the subtask owns no partition
	}
	if cap(r.raw) < len(buf) {
		r.raw, r.ts = make([]ExchangeRecord, len(buf)), make([]int64, len(buf))
	}
	n, err := r.inner.Read(r.raw[:len(buf)])
	out := 0
	for _, x := range r.raw[:n] {
		kind, producer, t, body, perr := parseCutHeader(x.Value)
		c, cerr := r.channel(x.Partition, producer)
		if perr = errors.Join(perr, cerr); perr != nil {
			return out, fmt.Errorf("repartition topic %s partition %d: %w", r.spec.topic, x.Partition, perr)
		}
		switch kind {
		case cutData:
			if _, derr := r.codec.Decode(body, &buf[out]); derr != nil {
				return out, fmt.Errorf("repartition topic %s partition %d: decode: %w", r.spec.topic, x.Partition, derr)
			}
			r.ts[out] = t
			r.idle[c] = false
			out++
		case cutWatermark:
			r.wms[c] = max(r.wms[c], t)
			r.idle[c] = false
		case cutIdle:
			r.idle[c] = true
		case cutEnd:
			if !r.ended[c] {
				r.ended[c] = true
				r.nEnded++
			}
			r.wms[c] = MaxWatermark
		default:
			return out, fmt.Errorf("repartition topic %s partition %d: %w: kind %q", r.spec.topic, x.Partition, errCutRecord, kind)
		}
	}
	clear(r.raw[:n])
	if err == nil && r.nEnded == len(r.ended) {
		err = io.EOF
	}
	return out, err
}

func (r *cutReader[T]) channel(part int32, producer int) (int, error) {
	i, ok := slices.BinarySearch(r.parts, part)
	switch {
	case !ok:
		return 0, fmt.Errorf("a record of partition %d, which is not this subtask's", part)
	case producer >= r.spec.producers:
		return 0, fmt.Errorf("a record of producer %d of %d", producer, r.spec.producers)
	}
	return i*r.spec.producers + producer, nil
}

// Timestamps implements EventTimeSource.
func (r *cutReader[T]) Timestamps(ts []int64) { copy(ts, r.ts) }

// Watermark implements EventTimeSource: the lowest watermark of the
// channels that are not idle; idle if all are (or there are none).
func (r *cutReader[T]) Watermark(time.Time) (int64, bool) {
	wm, active := int64(MaxWatermark), false
	for c, w := range r.wms {
		if !r.idle[c] {
			wm, active = min(wm, w), true
		}
	}
	if !active {
		return MinWatermark, true
	}
	return wm, false
}

// Position implements SourceFunc:
//
//	version byte (1), uvarint len(inner), inner, uvarint channels,
//	channels × { varint watermark, byte flags (1 ended, 2 idle) }
func (r *cutReader[T]) Position() []byte {
	inner := r.inner.Position()
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(inner)))
	b = append(b, inner...)
	b = binary.AppendUvarint(b, uint64(len(r.wms)))
	for c, wm := range r.wms {
		b = binary.AppendVarint(b, wm)
		flags := byte(0)
		if r.ended[c] {
			flags |= 1
		}
		if r.idle[c] {
			flags |= 2
		}
		b = append(b, flags)
	}
	return b
}

// restore reads a position into the channels and returns the inner one.
func (r *cutReader[T]) restore(b []byte) ([]byte, error) {
	bad := fmt.Errorf("%w: corrupt position", errCutRecord)
	if len(b) == 0 || b[0] != 1 {
		return nil, bad
	}
	b = b[1:]
	l, k := binary.Uvarint(b)
	if k <= 0 || l > uint64(len(b)-k) {
		return nil, bad
	}
	inner := slices.Clone(b[k : k+int(l)])
	b = b[k+int(l):]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, bad
	}
	if n != uint64(len(r.wms)) {
		return nil, fmt.Errorf("%w: the position has %d channels, the plan %d (partitions × producers): "+
			"a distributed job restores only with its processes, partitions and parallelism", ErrCluster, n, len(r.wms))
	}
	b = b[k:]
	for c := range r.wms {
		wm, k := binary.Varint(b)
		if k <= 0 || len(b) < k+1 {
			return nil, bad
		}
		r.wms[c], r.ended[c], r.idle[c] = wm, b[k]&1 != 0, b[k]&2 != 0
		if r.ended[c] {
			r.nEnded++
		}
		b = b[k+1:]
	}
	return inner, nil
}

// Close implements SourceFunc.
func (r *cutReader[T]) Close() error { return r.inner.Close() }
