package operator

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/internal/prefetch"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/ring"
)

// Partitioning says how an edge spreads records over the downstream
// subtasks.
type Partitioning int

const (
	// Forward sends subtask i's records to downstream subtask i.
	Forward Partitioning = iota
	// Rebalance sends whole batches to the downstream subtasks in turn.
	Rebalance
	// Hash sends each record to the subtask owning its key's key group.
	Hash
)

func (p Partitioning) String() string {
	switch p {
	case Forward:
		return "forward"
	case Rebalance:
		return "rebalance"
	case Hash:
		return "hash"
	}
	return fmt.Sprintf("Partitioning(%d)", int(p))
}

// EdgeOut describes one outgoing edge of a gate: its partitioning and one
// ring writer per downstream subtask it reaches (one for Forward).
type EdgeOut struct {
	Partitioning Partitioning
	Writers      []*ring.Writer
	// Hash edges: the key hash of a record (a KeyHasher[T]) and the
	// partitioner of the downstream operator.
	KeyHash     any
	Partitioner *keygroups.Partitioner
}

// Gate is the last operator of a chain whose output crosses rings: it
// encodes records into DATA frames and writes control frames (watermarks,
// END) into every ring.
type Gate[T any] struct {
	Base
	edges []gateEdge[T]
	all   []*outRing[T]
	codec Codec[T]
	timed bool
}

type gateEdge[T any] struct {
	part   Partitioning
	rings  []*outRing[T]
	hash   KeyHasher[T]
	hashes []uint64 // scratch: the key hashes of a batch
	keys   *keygroups.Partitioner
	next   int // Rebalance: ring for the next batch
}

// GateOptions configure how a gate frames records.
type GateOptions struct {
	Timed      bool // records carry event timestamps
	FrameBytes int  // target DATA frame payload
}

// NewGate returns a gate writing to the given edges.
func NewGate[T any](codec Codec[T], opts GateOptions, edges []EdgeOut) (*Gate[T], error) {
	g := &Gate[T]{codec: codec, timed: opts.Timed}
	for _, e := range edges {
		ge := gateEdge[T]{part: e.Partitioning, keys: e.Partitioner}
		if e.Partitioning == Hash {
			h, ok := e.KeyHash.(KeyHasher[T])
			if !ok || h.One == nil || h.All == nil || e.Partitioner == nil {
				return nil, fmt.Errorf("hash edge needs a KeyHasher[%T] and a partitioner", *new(T))
			}
			ge.hash = h
		}
		for ti, w := range e.Writers {
			o, err := newOutRing(w, codec, opts, e.Partitioning == Hash)
			if err != nil {
				return nil, err
			}
			o.edge, o.target = len(g.edges), ti
			ge.rings = append(ge.rings, o)
			g.all = append(g.all, o)
		}
		g.edges = append(g.edges, ge)
	}
	return g, nil
}

// Push implements Input.
func (g *Gate[T]) Push(recs []T, ts []int64) {
	for i := range g.edges {
		e := &g.edges[i]
		switch e.part {
		case Forward:
			e.rings[0].appendBatch(recs, ts)
		case Rebalance:
			e.rings[e.next].appendBatch(recs, ts)
			if e.next++; e.next == len(e.rings) {
				e.next = 0
			}
		case Hash:
			if cap(e.hashes) < len(recs) {
				e.hashes = make([]uint64, len(recs))
			}
			hs := e.hashes[:len(recs)]
			e.hash.All(recs, hs)
			var t int64
			for j := range recs {
				o := e.rings[e.keys.Subtask(hs[j])]
				if ts != nil {
					t = ts[j]
				}
				if o.n < o.capN {
					// NB: append's common case, written out: append is
					// too big to inline, and this is a call per record.
					*(*T)(unsafe.Add(o.base, o.n*o.size)) = recs[j]
					if o.timed {
						*(*int64)(unsafe.Add(o.base, o.tsOff+o.n*8)) = t
					}
					if o.hashed {
						*(*uint64)(unsafe.Add(o.base, o.hashOff+o.n*8)) = hs[j]
					}
					o.n++
					o.dirty = true
					if o.n&(writeAhead-1) == 0 {
						o.fetchAhead()
					}
					continue
				}
				o.append(&recs[j], t, hs[j])
			}
		}
	}
}

// Watermark implements Operator: it writes a WATERMARK frame into every ring.
func (g *Gate[T]) Watermark(wm int64) {
	for _, o := range g.all {
		o.control(pending{typ: ring.FrameWatermark, wm: wm})
	}
}

// Idle marks every output stream idle.
func (g *Gate[T]) Idle(wm int64) {
	for _, o := range g.all {
		o.control(pending{typ: ring.FrameWatermark, wm: wm, idle: true})
	}
}

// End implements Operator: it writes an END frame into every ring.
func (g *Gate[T]) End() {
	for _, o := range g.all {
		o.control(pending{typ: ring.FrameEnd})
	}
}

// Barrier writes a BARRIER frame into every ring.
func (g *Gate[T]) Barrier(b ring.Barrier) {
	for _, o := range g.all {
		o.control(pending{typ: ring.FrameBarrier, barrier: b})
	}
}

// SnapshotOutputs closes every open frame and returns the DATA frames that
// wait in Go memory for room (encoded as channel state), keyed by
// OutputKey(edge, target); nil if none. An unaligned barrier overtakes
// them, so they become part of the checkpoint: records this task emitted
// before its snapshot that no downstream task has seen.
func (g *Gate[T]) SnapshotOutputs() map[int][]byte {
	var out map[int][]byte
	for _, o := range g.all {
		o.closeAny()
		for _, p := range o.pend {
			if p.typ == ring.FrameData {
				if out == nil {
					out = map[int][]byte{}
				}
				k := OutputKey(o.edge, o.target)
				out[k] = AppendChannelFrame(out[k], p.count, p.data)
			}
		}
	}
	return out
}

// OutputKey numbers the output channel state of a gate's edge and target.
func OutputKey(edge, target int) int { return edge<<16 | target }

// BarrierFirst writes an unaligned barrier into every ring ahead of the
// frames waiting in Go memory, through the control reserve.
func (g *Gate[T]) BarrierFirst(b ring.Barrier) {
	for _, o := range g.all {
		o.closeAny()
		o.dirty = true
		if len(o.pend) == 0 && o.write(pending{typ: ring.FrameBarrier, barrier: b}) {
			continue
		}
		o.pend = append([]pending{{typ: ring.FrameBarrier, barrier: b}}, o.pend...)
	}
}

// Replay re-emits recorded output frames (see SnapshotOutputs) of edge
// edge, which went to downstream subtask target when they were recorded, ahead
// of anything the gate writes; a restore calls it before the task runs. The
// records are partitioned afresh, so the downstream parallelism may have
// changed: keyed records go to the subtask that owns their key now.
func (g *Gate[T]) Replay(edge, target int, state []byte) error {
	if edge >= len(g.edges) {
		return fmt.Errorf("output state for edge %d, but the gate has %d edges", edge, len(g.edges))
	}
	in := replayEdge[T]{g: g, e: &g.edges[edge], target: target}
	ch := NewChannel[T](nil, g.codec, g.timed, in, nil)
	return ReadChannelFrames(state, func(count int, data []byte) error {
		return ch.push(ring.Frame{Type: ring.FrameData, Count: count, Payload: data})
	})
}

// replayEdge pushes records into one edge of a gate.
type replayEdge[T any] struct {
	g      *Gate[T]
	e      *gateEdge[T]
	target int
}

func (r replayEdge[T]) Push(recs []T, ts []int64) {
	e := r.e
	if e.part != Hash {
		e.rings[r.target%len(e.rings)].appendBatch(recs, ts)
		return
	}
	var t int64
	for j := range recs {
		if ts != nil {
			t = ts[j]
		}
		h := e.hash.One(&recs[j])
		e.rings[e.keys.Subtask(h)].append(&recs[j], t, h)
	}
}

// edgeCount returns the number of the gate's edges (see Gates).
func (g *Gate[T]) edgeCount() int { return len(g.edges) }

// Ports returns the gate's rings as the task drives them.
func (g *Gate[T]) Ports() []Port {
	ports := make([]Port, len(g.all))
	for i, o := range g.all {
		ports[i] = o
	}
	return ports
}

// Port is one output ring as a task sees it.
type Port interface {
	// Drain writes frames that did not fit earlier and reports whether none
	// is left.
	Drain() bool
	// Flush closes the open frame and publishes every written frame.
	Flush()
	// Publish publishes the frames closed so far, leaving the open one open.
	Publish()
	// Room reports whether a full frame fits in the ring now.
	Room() bool
	// PrepareToPark announces a wait for room; false: there is room.
	PrepareToPark() bool
	Unpark()
	// Dirty reports whether records were written since the last Flush.
	Dirty() bool
	// Fits returns how many records the ring holds within the limit its
	// consumer set (ring.Reader.SetLimit), at least 1: the most a producer
	// should emit into it at once; 0 if it cannot tell (records of
	// variable size).
	Fits() int
}

// pending is a frame that waits in Go memory for room in the ring.
type pending struct {
	typ     ring.FrameType
	data    []byte
	count   int
	wm      int64
	idle    bool
	barrier ring.Barrier
}

// outRing frames records of type T for one ring. Fixed-size records are
// written straight into a reserved frame in ring memory, as a column of
// records followed, for timed streams, by a column of timestamps, and, on
// Hash edges, by a column of the records' key hashes:
//
//	+------------------------------+------------------------+-----------------------+
//	| count × record (padded to 8) | count × int64 (timed)  | count × uint64 (hash) |
//	+------------------------------+------------------------+-----------------------+
//
// The receiving side tells a frame with hashes from one without by its
// length (channel state and replays may hold either; see fixedFrames).
// Variable-size records are encoded one after another into a Go buffer,
// each preceded by its 8-byte timestamp on timed streams, and the buffer is
// copied into a frame when full. When the ring has no room, frames wait in
// Go memory (pend) and later frames queue behind them, so the order of
// frames on the ring never changes.
type outRing[T any] struct {
	w     *ring.Writer
	codec Codec[T]
	size  int // record size for fixed codecs; 0 for variable ones
	timed bool

	// The open fixed-size frame: base points into the ring (inRing) or into
	// stage; it holds n of capN records. n == capN means no frame is open.
	base    unsafe.Pointer
	n       int
	capN    int
	tsOff   int
	hashOff int
	inRing  bool
	stage   []byte
	// hashed: the frames carry each record's key hash (a Hash edge's
	// rings, for fixed-size records), so the keyed operator downstream
	// does not hash the key again.
	hashed bool

	// Variable-size records: the open frame's bytes and record count.
	buf      []byte
	bufCount int

	// frameBytes is GateOptions.FrameBytes (at most the ring's largest
	// frame); frame is the payload frames have now: less while the
	// consumer limits the ring to less than two frameBytes frames (buffer
	// debloating), as of the writer's limit lim.
	frameBytes int
	frame      int
	lim        int
	per        int // bytes a fixed-size record takes in a frame
	pend       []pending
	dirty      bool

	edge, target int // which edge of the gate, and which downstream subtask
}

func newOutRing[T any](w *ring.Writer, codec Codec[T], opts GateOptions, hashed bool) (*outRing[T], error) {
	frameBytes := min(opts.FrameBytes, w.MaxPayload())
	o := &outRing[T]{w: w, codec: codec, size: codec.Size(), timed: opts.Timed, frameBytes: frameBytes}
	if o.size > 0 {
		o.hashed = hashed
		o.per = o.size
		if o.timed {
			o.per += 8
		}
		if o.hashed {
			o.per += 8
		}
		if frameBytes < o.per {
			return nil, fmt.Errorf("a %d-byte record does not fit a %d-byte frame", o.size, frameBytes)
		}
	}
	o.fit()
	o.n = o.capN
	return o, nil
}

// fit sizes the frames to come to the writer's limit: at most half of it,
// so that a frame and the pad a wrap may need fit beside each other, and
// at least one record (the ring takes a frame over its limit when it
// holds nothing else).
func (o *outRing[T]) fit() {
	o.lim = o.w.Limit()
	o.frame = max(min(o.frameBytes, ring.FramePayloadFor(o.lim)), 1)
	if o.size > 0 {
		o.capN = max(min(o.frame/o.per, ring.MaxCount), 1)
		o.tsOff = align8(o.capN * o.size)
		o.hashOff = o.tsOff
		if o.timed {
			o.hashOff += o.capN * 8
		}
	}
}

func align8(n int) int { return (n + 7) &^ 7 }

// writeAhead is how far ahead of the record being written, in records, the
// partitioning loop has a frame's memory fetched for writing, and how many
// records' worth it asks for at a time. Ring memory a record is written to
// was last read by the consumer, often on the other core, or has left the
// caches; without it each store waits for its line.
const writeAhead = 128

// fetchAhead fetches for writing the frame memory of the writeAhead
// records after the next writeAhead (see writeAhead): their records, and
// their entries in the timestamp and hash columns, each a stream of stores
// of its own.
func (o *outRing[T]) fetchAhead() {
	from := o.n + writeAhead
	if from >= o.capN {
		return
	}
	n := min(writeAhead, o.capN-from)
	prefetch.ForWrite(unsafe.Add(o.base, from*o.size), uintptr(n*o.size))
	if o.timed {
		prefetch.ForWrite(unsafe.Add(o.base, o.tsOff+from*8), uintptr(n*8))
	}
	if o.hashed {
		prefetch.ForWrite(unsafe.Add(o.base, o.hashOff+from*8), uintptr(n*8))
	}
}

// append adds one record, of key hash h on a hashed ring.
func (o *outRing[T]) append(rec *T, ts int64, h uint64) {
	o.dirty = true
	if o.size == 0 {
		o.appendVar(rec, ts)
		return
	}
	if o.n == o.capN {
		o.open()
	}
	*(*T)(unsafe.Add(o.base, o.n*o.size)) = *rec
	if o.timed {
		*(*int64)(unsafe.Add(o.base, o.tsOff+o.n*8)) = ts
	}
	if o.hashed {
		*(*uint64)(unsafe.Add(o.base, o.hashOff+o.n*8)) = h
	}
	o.n++
}

// appendBatch adds a batch of records, copying fixed-size ones in runs.
// The ring is not hashed (Forward and Rebalance edges).
func (o *outRing[T]) appendBatch(recs []T, ts []int64) {
	if len(recs) == 0 {
		return
	}
	if invariants.Enabled && o.hashed {
		panic("ringflow: appendBatch on a hashed ring")
	}
	o.dirty = true
	if o.size == 0 {
		for i := range recs {
			var t int64
			if ts != nil {
				t = ts[i]
			}
			o.appendVar(&recs[i], t)
		}
		return
	}
	for len(recs) > 0 {
		if o.n == o.capN {
			o.open()
		}
		k := min(o.capN-o.n, len(recs))
		copy(unsafe.Slice((*T)(unsafe.Add(o.base, o.n*o.size)), k), recs[:k])
		if o.timed {
			copy(unsafe.Slice((*int64)(unsafe.Add(o.base, o.tsOff+o.n*8)), k), ts[:k])
			ts = ts[k:]
		}
		o.n += k
		recs = recs[k:]
	}
}

// open closes the open frame, if any, and opens a new one: in the ring if
// it has room and nothing waits, else in Go memory.
func (o *outRing[T]) open() {
	o.closeFrame()
	if o.w.Limit() != o.lim {
		o.fit()
	}
	bytes := o.hashOff
	if o.hashed {
		bytes += o.capN * 8
	}
	o.n = 0
	if len(o.pend) == 0 {
		if p := o.w.ReservePointer(bytes); p != nil {
			o.base, o.inRing = p, true
			prefetch.ForWrite(p, uintptr(min(writeAhead, o.capN)*o.size))
			o.fetchAhead()
			return
		}
	}
	if len(o.stage) < bytes {
		o.stage = make([]byte, bytes)
	}
	o.base, o.inRing = unsafe.Pointer(unsafe.SliceData(o.stage)), false
}

// closeFrame finishes the open fixed-size frame, compacting the timestamp
// and hash columns behind the records when the frame is not full.
func (o *outRing[T]) closeFrame() {
	if o.base == nil {
		return
	}
	if o.n == 0 {
		if o.inRing {
			o.w.Cancel()
		}
		o.n, o.base = o.capN, nil
		return
	}
	n := o.n
	length := align8(n * o.size)
	// NB: each column moves to a lower address, and the timestamps' new
	// place ends before the hashes' old one begins.
	if o.timed {
		if length != o.tsOff {
			src := unsafe.Slice((*int64)(unsafe.Add(o.base, o.tsOff)), n)
			copy(unsafe.Slice((*int64)(unsafe.Add(o.base, length)), n), src)
		}
		length += n * 8
	}
	if o.hashed {
		if length != o.hashOff {
			src := unsafe.Slice((*uint64)(unsafe.Add(o.base, o.hashOff)), n)
			copy(unsafe.Slice((*uint64)(unsafe.Add(o.base, length)), n), src)
		}
		length += n * 8
	}
	if o.inRing {
		o.w.Commit(length, n)
	} else {
		data := append([]byte(nil), unsafe.Slice((*byte)(o.base), length)...)
		o.pend = append(o.pend, pending{typ: ring.FrameData, data: data, count: n})
	}
	o.n, o.base = o.capN, nil
}

func (o *outRing[T]) appendVar(rec *T, ts int64) {
	if o.timed {
		o.buf = binary.LittleEndian.AppendUint64(o.buf, uint64(ts))
	}
	o.buf = o.codec.Append(o.buf, rec)
	o.bufCount++
	if len(o.buf) >= o.frame || o.bufCount == ring.MaxCount {
		o.closeVar()
	}
}

// closeVar moves the open variable-size frame into the ring, or into pend.
func (o *outRing[T]) closeVar() {
	if o.bufCount == 0 {
		return
	}
	if len(o.buf) > o.w.MaxPayload() {
		panic(fmt.Errorf("ringflow: a frame of %d bytes (%d records) exceeds the ring's largest frame, %d bytes; "+
			"a single record may be too large", len(o.buf), o.bufCount, o.w.MaxPayload()))
	}
	if len(o.pend) > 0 || !o.w.WriteData(o.buf, o.bufCount) {
		o.pend = append(o.pend, pending{typ: ring.FrameData, data: append([]byte(nil), o.buf...), count: o.bufCount})
	}
	o.buf, o.bufCount = o.buf[:0], 0
	if o.w.Limit() != o.lim {
		o.fit()
	}
}

func (o *outRing[T]) closeAny() {
	if o.size == 0 {
		o.closeVar()
	} else {
		o.closeFrame()
	}
}

// control writes a control frame behind everything written so far.
func (o *outRing[T]) control(p pending) {
	o.closeAny()
	o.dirty = true
	if len(o.pend) > 0 || !o.write(p) {
		o.pend = append(o.pend, p)
	}
}

func (o *outRing[T]) write(p pending) bool {
	switch p.typ {
	case ring.FrameData:
		return o.w.WriteData(p.data, p.count)
	case ring.FrameWatermark:
		if p.idle {
			return o.w.WriteIdle(p.wm)
		}
		return o.w.WriteWatermark(p.wm)
	case ring.FrameBarrier:
		return o.w.WriteBarrier(p.barrier)
	case ring.FrameEnd:
		return o.w.WriteEnd()
	}
	panic("ringflow: pending frame of type " + p.typ.String())
}

// Drain implements Port.
func (o *outRing[T]) Drain() bool {
	for len(o.pend) > 0 {
		if !o.write(o.pend[0]) {
			o.w.Flush()
			return false
		}
		o.pend[0] = pending{}
		o.pend = o.pend[1:]
	}
	return true
}

// Flush implements Port.
func (o *outRing[T]) Flush() {
	o.closeAny()
	o.Drain()
	o.w.Flush()
	o.dirty = false
}

// Publish implements Port.
func (o *outRing[T]) Publish() { o.w.Flush() }

// Room implements Port.
func (o *outRing[T]) Room() bool { return len(o.pend) == 0 && o.w.Room(o.frame) }

// PrepareToPark implements Port.
func (o *outRing[T]) PrepareToPark() bool { return o.w.PrepareToPark(o.frame) }

// Unpark implements Port.
func (o *outRing[T]) Unpark() { o.w.Unpark() }

// Fits implements Port.
func (o *outRing[T]) Fits() int {
	if o.size == 0 {
		return 0
	}
	return max(o.w.Limit()/o.per, 1)
}

// Dirty implements Port.
func (o *outRing[T]) Dirty() bool { return o.dirty }
