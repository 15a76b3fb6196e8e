package operator

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ringflow/ringflow/ring"
)

// Channel is one input ring of a task, with what the task tracks about it.
type Channel struct {
	Reader *ring.Reader
	// Index of the channel among the task's inputs.
	Index int
	// push decodes a DATA frame and pushes its records into the operator.
	push func(f ring.Frame) error
	// dec decodes a DATA frame once and pushes its records in pieces, so
	// that a step can stop part-way through a frame (see Task.stepInputs).
	dec frameDecoder
	// cur is the DATA frame the task holds (Task.held) when a step stopped
	// part-way through it, and done how many of its records were pushed.
	cur  ring.Frame
	done int

	wm      int64 // latest watermark read
	idle    bool  // the upstream declared itself idle
	ended   bool  // END was read
	blocked bool  // alignment holds the channel

	rec  *chanRecord // channel state being recorded (unaligned checkpoint)
	scan uint64      // frames before this ring position were scanned for barriers
	// spare is the buffer of the channel state recorded last, handed back
	// once it is written (SnapshotReport.Release), for the next recording.
	spare atomic.Pointer[[]byte]

	// Edge and Upstream name the channel independently of the layout: the
	// index of its edge among the head operator's inputs, and the upstream
	// subtask it comes from.
	Edge, Upstream int
	// From names the upstream task by its head operator, for statistics.
	From string
	// Replay is restored channel state, pushed before the ring is read.
	Replay []ReplayState
	// pushKept pushes the records of a frame whose key hash keep accepts.
	pushKept func(f ring.Frame, keep func(hash uint64) bool) error
}

// ReplayState is restored channel state for a channel: frames to push
// before the ring is read, only the records whose key hash Keep accepts
// if Keep is set (a rescaled restore of a keyed edge).
type ReplayState struct {
	Data []byte
	Keep func(hash uint64) bool
}

// NewChannel returns a channel that decodes DATA frames of T records and
// pushes them into in. timed says whether frames carry timestamps. keyHash,
// a KeyHasher[T] for keyed edges (else nil), lets a restore replay only
// the records of the key groups the subtask owns.
func NewChannel[T any](rd *ring.Reader, codec Codec[T], timed bool, in Input[T], keyHash any) *Channel {
	c := &Channel{Reader: rd, wm: MinWatermark}
	if size := codec.Size(); size > 0 {
		c.dec = newFixedFrames(size, timed, in)
	} else {
		c.dec = &varFrames[T]{codec: codec, timed: timed, in: in}
	}
	c.push = func(f ring.Frame) error {
		n, err := c.dec.open(f)
		if err == nil && n > 0 {
			c.dec.push(0, n)
			c.dec.close()
		}
		return err
	}
	if kh, ok := keyHash.(KeyHasher[T]); ok && kh.One != nil {
		c.pushKept = func(f ring.Frame, keep func(uint64) bool) error {
			kept := keptInput[T]{in: in, hash: kh.One, keep: keep}
			var d frameDecoder
			if size := codec.Size(); size > 0 {
				d = newFixedFrames[T](size, timed, &kept)
			} else {
				d = &varFrames[T]{codec: codec, timed: timed, in: &kept}
			}
			n, err := d.open(f)
			if err == nil && n > 0 {
				d.push(0, n)
				d.close()
			}
			return err
		}
	}
	return c
}

// keptInput passes on the records whose key hash keep accepts.
type keptInput[T any] struct {
	in   Input[T]
	hash func(*T) uint64
	keep func(uint64) bool
	recs []T
	ts   []int64
}

func (k *keptInput[T]) Push(recs []T, ts []int64) {
	k.recs, k.ts = k.recs[:0], k.ts[:0]
	for i := range recs {
		if k.keep(k.hash(&recs[i])) {
			k.recs = append(k.recs, recs[i])
			if ts != nil {
				k.ts = append(k.ts, ts[i])
			}
		}
	}
	if len(k.recs) == 0 {
		return
	}
	var ts2 []int64
	if ts != nil {
		ts2 = k.ts
	}
	k.in.Push(k.recs, ts2)
}

// frameDecoder decodes one DATA frame at a time and pushes its records
// into the operator in pieces.
type frameDecoder interface {
	// open decodes (or views) f and returns its record count; it checks
	// the frame's layout against that count.
	open(f ring.Frame) (int, error)
	// push pushes records [from, to) of the open frame.
	push(from, to int)
	// tail returns records [from, count) of the open frame as the payload
	// of a frame of their own (for channel state), appended to buf.
	tail(buf []byte, from int) (count int, payload []byte)
	// close lets go of the open frame.
	close()
}

// fixedFrames views frames of fixed-size records in place: the records,
// timestamps and key hashes handed to the operator alias ring memory. A
// frame carries a column of key hashes after the records and timestamps
// when it came over a Hash edge (see outRing); it is told by its length, so
// that channel state recorded with or without hashes replays alike.
type fixedFrames[T any] struct {
	size  int
	timed bool
	in    Input[T]
	hin   HashedInput[T] // in, if it takes carried hashes
	f     ring.Frame
	recs  []T
	ts    []int64
	hs    []uint64
}

func newFixedFrames[T any](size int, timed bool, in Input[T]) *fixedFrames[T] {
	hin, _ := in.(HashedInput[T])
	return &fixedFrames[T]{size: size, timed: timed, in: in, hin: hin}
}

func (d *fixedFrames[T]) open(f ring.Frame) (int, error) {
	n := f.Count
	cols := align8(n * d.size)
	if d.timed {
		cols += n * 8
	}
	hashed := len(f.Payload) == cols+n*8 && n > 0
	if len(f.Payload) != cols && !hashed {
		return 0, fmt.Errorf("%w: DATA frame of %d records of %d bytes has %d payload bytes, want %d (or %d with key hashes)",
			ring.ErrCorrupt, n, d.size, len(f.Payload), cols, cols+n*8)
	}
	if n == 0 {
		return 0, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(f.Payload))
	d.f, d.recs, d.ts, d.hs = f, unsafe.Slice((*T)(p), n), nil, nil
	if d.timed {
		d.ts = unsafe.Slice((*int64)(unsafe.Add(p, align8(n*d.size))), n)
	}
	if hashed {
		d.hs = unsafe.Slice((*uint64)(unsafe.Add(p, cols)), n)
	}
	return n, nil
}

func (d *fixedFrames[T]) push(from, to int) {
	var ts []int64
	if d.timed {
		ts = d.ts[from:to]
	}
	if d.hs != nil && d.hin != nil {
		d.hin.PushHashed(d.recs[from:to], ts, d.hs[from:to])
		return
	}
	d.in.Push(d.recs[from:to], ts)
}

// tail lays out records [from, count) of the open frame as a frame of their
// own: each column cut at from.
func (d *fixedFrames[T]) tail(buf []byte, from int) (int, []byte) {
	n := d.f.Count
	if !d.timed && d.hs == nil && d.size%8 == 0 {
		return n - from, d.f.Payload[from*d.size:]
	}
	recs := d.f.Payload[from*d.size : n*d.size]
	buf = append(buf, recs...)
	buf = append(buf, make([]byte, align8(len(recs))-len(recs))...)
	off := align8(n * d.size)
	if d.timed {
		buf = append(buf, d.f.Payload[off+from*8:off+n*8]...)
		off += n * 8
	}
	if d.hs != nil {
		buf = append(buf, d.f.Payload[off+from*8:off+n*8]...)
	}
	return n - from, buf
}

func (d *fixedFrames[T]) close() { d.f, d.recs, d.ts, d.hs = ring.Frame{}, nil, nil, nil }

// varFrames decodes frames of variable-size records into reused buffers.
type varFrames[T any] struct {
	codec Codec[T]
	timed bool
	in    Input[T]
	f     ring.Frame
	recs  []T
	ts    []int64
	offs  []int // where each record's bytes begin in the payload
}

func (d *varFrames[T]) open(f ring.Frame) (int, error) {
	d.recs, d.ts, d.offs = d.recs[:0], d.ts[:0], d.offs[:0]
	src := f.Payload
	for i := 0; i < f.Count; i++ {
		d.offs = append(d.offs, len(f.Payload)-len(src))
		if d.timed {
			if len(src) < 8 {
				return 0, fmt.Errorf("%w: DATA frame truncated at record %d of %d", ring.ErrCorrupt, i, f.Count)
			}
			d.ts = append(d.ts, int64(binary.LittleEndian.Uint64(src)))
			src = src[8:]
		}
		var v T
		k, err := d.codec.Decode(src, &v)
		if err != nil {
			return 0, fmt.Errorf("%w: DATA frame record %d of %d: %v", ring.ErrCorrupt, i, f.Count, err)
		}
		d.recs = append(d.recs, v)
		src = src[k:]
	}
	if len(src) != 0 {
		return 0, fmt.Errorf("%w: DATA frame has %d bytes after its %d records", ring.ErrCorrupt, len(src), f.Count)
	}
	d.f = f
	return f.Count, nil
}

func (d *varFrames[T]) push(from, to int) {
	var ts []int64
	if d.timed {
		ts = d.ts[from:to]
	}
	d.in.Push(d.recs[from:to], ts)
}

func (d *varFrames[T]) tail(_ []byte, from int) (int, []byte) {
	return d.f.Count - from, d.f.Payload[d.offs[from]:]
}

func (d *varFrames[T]) close() {
	clear(d.recs) // drop references for the collector
	d.f = ring.Frame{}
}
