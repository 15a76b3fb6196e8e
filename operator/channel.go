package operator

import (
	"encoding/binary"
	"fmt"
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

	wm      int64 // latest watermark read
	idle    bool  // the upstream declared itself idle
	ended   bool  // END was read
	blocked bool  // alignment holds the channel

	rec  *chanRecord // channel state being recorded (unaligned checkpoint)
	scan uint64      // frames before this ring position were scanned for barriers

	// Edge and Upstream name the channel independently of the layout: the
	// index of its edge among the head operator's inputs, and the upstream
	// subtask it comes from.
	Edge, Upstream int
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
		c.push = fixedDecoder(size, timed, in)
	} else {
		c.push = varDecoder(codec, timed, in)
	}
	if kh, ok := keyHash.(KeyHasher[T]); ok && kh.One != nil {
		c.pushKept = func(f ring.Frame, keep func(uint64) bool) error {
			kept := keptInput[T]{in: in, hash: kh.One, keep: keep}
			var push func(ring.Frame) error
			if size := codec.Size(); size > 0 {
				push = fixedDecoder(size, timed, Input[T](&kept))
			} else {
				push = varDecoder(codec, timed, Input[T](&kept))
			}
			return push(f)
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

// fixedDecoder views a frame of fixed-size records in place: the records
// and timestamps handed to the operator alias ring memory.
func fixedDecoder[T any](size int, timed bool, in Input[T]) func(ring.Frame) error {
	return func(f ring.Frame) error {
		n := f.Count
		want := n * size
		if timed {
			want = align8(want) + n*8
		}
		if len(f.Payload) != want {
			return fmt.Errorf("%w: DATA frame of %d records of %d bytes has %d payload bytes, want %d",
				ring.ErrCorrupt, n, size, len(f.Payload), want)
		}
		if n == 0 {
			return nil
		}
		p := unsafe.Pointer(unsafe.SliceData(f.Payload))
		recs := unsafe.Slice((*T)(p), n)
		var ts []int64
		if timed {
			ts = unsafe.Slice((*int64)(unsafe.Add(p, align8(n*size))), n)
		}
		in.Push(recs, ts)
		return nil
	}
}

// varDecoder decodes a frame of variable-size records into reused buffers.
func varDecoder[T any](codec Codec[T], timed bool, in Input[T]) func(ring.Frame) error {
	var recs []T
	var tss []int64
	return func(f ring.Frame) error {
		recs, tss = recs[:0], tss[:0]
		src := f.Payload
		for i := 0; i < f.Count; i++ {
			if timed {
				if len(src) < 8 {
					return fmt.Errorf("%w: DATA frame truncated at record %d of %d", ring.ErrCorrupt, i, f.Count)
				}
				tss = append(tss, int64(binary.LittleEndian.Uint64(src)))
				src = src[8:]
			}
			var v T
			k, err := codec.Decode(src, &v)
			if err != nil {
				return fmt.Errorf("%w: DATA frame record %d of %d: %v", ring.ErrCorrupt, i, f.Count, err)
			}
			recs = append(recs, v)
			src = src[k:]
		}
		if len(src) != 0 {
			return fmt.Errorf("%w: DATA frame has %d bytes after its %d records", ring.ErrCorrupt, len(src), f.Count)
		}
		var ts []int64
		if timed {
			ts = tss
		}
		in.Push(recs, ts)
		clear(recs) // drop references for the collector
		return nil
	}
}
