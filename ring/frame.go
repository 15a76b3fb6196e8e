package ring

import (
	"encoding/binary"
	"fmt"
	"time"
)

// FrameType says what a frame carries.
type FrameType uint8

// Frame types. The zero value is deliberately invalid: zeroed memory is never
// mistaken for a frame.
const (
	FrameData      FrameType = 1 // a batch of records; Frame.Count is the record count
	FrameBarrier   FrameType = 2 // a checkpoint barrier; see Barrier
	FrameWatermark FrameType = 3 // an event-time watermark; aux bit 0 marks the stream idle
	FrameEnd       FrameType = 4 // no more frames follow
	FramePad       FrameType = 5 // fills the tail of the data region before a wrap
)

func (t FrameType) String() string {
	switch t {
	case FrameData:
		return "DATA"
	case FrameBarrier:
		return "BARRIER"
	case FrameWatermark:
		return "WATERMARK"
	case FrameEnd:
		return "END"
	case FramePad:
		return "PAD"
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

const (
	frameHeaderSize  = 8
	barrierPayload   = 24 // id, trigger time, kind + padding
	barrierFrameSize = frameHeaderSize + barrierPayload
	watermarkPayload = 8

	// MaxCount is the largest record count a DATA frame can carry.
	MaxCount = 1<<24 - 1
)

// BarrierKind says how a checkpoint barrier is to be handled.
type BarrierKind uint8

const (
	// Aligned barriers wait for alignment at multi-input tasks.
	Aligned BarrierKind = 0
	// Unaligned barriers were forwarded by a subtask that did not align; the
	// data in front of them is recorded as channel state.
	Unaligned BarrierKind = 1
	// Savepoint barriers are always aligned, whatever the alignment
	// timeout; the final checkpoint at the end of input is one, so that no
	// data is still in flight when it commits the job's last output.
	Savepoint BarrierKind = 2
)

func (k BarrierKind) String() string {
	switch k {
	case Unaligned:
		return "unaligned"
	case Savepoint:
		return "savepoint"
	}
	return "aligned"
}

// Barrier is the content of a BARRIER frame.
type Barrier struct {
	ID      uint64      // checkpoint id
	Trigger time.Time   // when the coordinator triggered the checkpoint
	Kind    BarrierKind // aligned or unaligned
}

// Frame is a view of one frame in ring memory. Payload aliases the ring: it
// is valid only until the frame is released, and must not be written.
type Frame struct {
	Type    FrameType
	Count   int    // DATA: number of records
	Payload []byte // DATA: the records; BARRIER, WATERMARK: the encoded value

	end uint64 // position just past the frame
}

// Barrier decodes a BARRIER frame. It panics if f is not one.
func (f Frame) Barrier() Barrier {
	if f.Type != FrameBarrier {
		panic("ring: Barrier called on a " + f.Type.String() + " frame")
	}
	return decodeBarrier(f.Payload)
}

// Watermark decodes a WATERMARK frame's event time. It panics if f is not one.
func (f Frame) Watermark() int64 {
	if f.Type != FrameWatermark {
		panic("ring: Watermark called on a " + f.Type.String() + " frame")
	}
	return int64(binary.LittleEndian.Uint64(f.Payload))
}

// End returns the ring position just past the frame.
func (f Frame) End() uint64 { return f.end }

// Idle reports whether a WATERMARK frame marks its stream idle.
func (f Frame) Idle() bool { return f.Type == FrameWatermark && f.Count&1 != 0 }

func encodeBarrier(dst []byte, b Barrier) {
	binary.LittleEndian.PutUint64(dst[0:], b.ID)
	var trig int64
	if !b.Trigger.IsZero() {
		trig = b.Trigger.UnixNano()
	}
	binary.LittleEndian.PutUint64(dst[8:], uint64(trig))
	binary.LittleEndian.PutUint64(dst[16:], uint64(b.Kind))
}

func decodeBarrier(p []byte) Barrier {
	b := Barrier{
		ID:   binary.LittleEndian.Uint64(p[0:]),
		Kind: BarrierKind(p[16]),
	}
	if t := int64(binary.LittleEndian.Uint64(p[8:])); t != 0 {
		b.Trigger = time.Unix(0, t)
	}
	return b
}

// frameSize returns the ring bytes a frame with n payload bytes occupies.
func frameSize(n uint64) uint64 { return (frameHeaderSize + n + 7) &^ 7 }

// header packs a frame header word: length, type, aux.
func header(length uint32, t FrameType, aux uint32) uint64 {
	return uint64(length) | uint64(t)<<32 | uint64(aux)<<40
}

func splitHeader(h uint64) (length uint32, t FrameType, aux uint32) {
	return uint32(h), FrameType(h >> 32), uint32(h >> 40)
}
