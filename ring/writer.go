package ring

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ringflow/ringflow/internal/invariants"
)

// Writer is the producing side of a ring. Frames it writes become visible to
// the reader only at the next Flush, which publishes them all with one atomic
// store.
type Writer struct {
	r          *Ring
	pos        uint64 // end of the frames written so far (published or not)
	published  uint64 // last producer position stored into the header
	cachedCons uint64 // consumer position as last loaded
	resv       uint64 // start of the open reservation
	resvLen    uint64 // payload bytes reserved; 0 when none is open
	dataKeep   uint64 // bytes DATA frames leave free: capacity less the limit as last loaded
	maxPayload int    // MaxPayload, computed once
}

// MaxPayload returns the largest DATA payload a frame can carry in this
// ring. Under a consumer's limit, a frame that large may fit only into an
// empty ring; see FramePayloadFor.
func (w *Writer) MaxPayload() int { return w.maxPayload }

// keep says what part of the free space a frame must leave free; see
// "Control reserve" and "Limit" in the package doc.
type keep uint8

const (
	keepNone    keep = iota // BARRIER frames may use the control reserve
	keepReserve             // WATERMARK and END frames leave it free
	keepLimit               // DATA frames leave it free and stay within the limit
)

func (w *Writer) keepBytes(k keep) uint64 {
	switch k {
	case keepReserve:
		return w.r.reserve
	case keepLimit:
		return w.dataKeep
	}
	return 0
}

// fits reports whether a frame of size bytes fits outside what k keeps
// free, counting the pad a wrap would need. It reloads the consumer
// position and limit only when the cached ones say no.
func (w *Writer) fits(size uint64, k keep) bool {
	if tail := w.r.capacity - w.pos&w.r.mask; size > tail {
		size += tail
	}
	if w.pos+size+w.keepBytes(k)-w.cachedCons <= w.r.capacity {
		return true
	}
	return w.reload(size, k)
}

// reload is fits once the cached values say no: need more bytes, pad
// included.
func (w *Writer) reload(need uint64, k keep) bool {
	w.cachedCons = w.r.consPos.Load()
	w.loadLimit()
	if invariants.Enabled && (w.cachedCons > w.pos || w.cachedCons%8 != 0) {
		panic(invariants.Failf("ring: consumer position %d beyond producer %d", w.cachedCons, w.pos))
	}
	keep := w.keepBytes(k)
	if k == keepLimit && w.pos == w.cachedCons {
		// NB: an empty ring takes a DATA frame up to MaxPayload whatever the
		// limit, so a producer whose frames outgrow a lowered limit still
		// makes progress, one frame at a time.
		keep = w.r.reserve
	}
	return w.pos+need+keep-w.cachedCons <= w.r.capacity
}

// place makes room for a frame of size bytes outside what k keeps free,
// padding the tail of the data region if the frame would cross the wrap.
// It returns the index the frame starts at, or false.
func (w *Writer) place(size uint64, k keep) (uint64, bool) {
	if !w.fits(size, k) {
		return 0, false
	}
	idx := w.pos & w.r.mask
	if tail := w.r.capacity - idx; size > tail {
		*(*uint64)(w.r.at(idx)) = header(uint32(tail-frameHeaderSize), FramePad, 0)
		w.pos += tail
		idx = 0
	}
	return idx, true
}

// Room reports whether a DATA frame of n payload bytes fits now.
func (w *Writer) Room(n int) bool { return w.fits(frameSize(uint64(n)), keepLimit) }

// Reserve opens a DATA frame with room for n payload bytes and returns that
// room, in ring memory, for the caller to write records into. It returns nil
// if the ring has no room now (see Wait). Commit closes the frame. n must not
// exceed MaxPayload.
func (w *Writer) Reserve(n int) []byte {
	p := w.ReservePointer(n)
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// ReservePointer is Reserve for callers that write records through unsafe
// pointers: it returns the address of the reserved payload, or nil.
func (w *Writer) ReservePointer(n int) unsafe.Pointer {
	r := w.r
	if w.resvLen != 0 || n <= 0 || n > w.maxPayload {
		w.badReserve(n)
	}
	size := frameSize(uint64(n))
	idx := w.pos & r.mask
	// NB: the common case, a frame that needs no pad and fits by the cached
	// consumer position, takes no call; place handles the rest.
	if idx+size > r.capacity || w.pos+size+w.dataKeep-w.cachedCons > r.capacity {
		var ok bool
		if idx, ok = w.place(size, keepLimit); !ok {
			return nil
		}
	}
	w.resv, w.resvLen = w.pos, uint64(n)
	return r.at(idx + frameHeaderSize)
}

//go:noinline
func (w *Writer) badReserve(n int) {
	if w.resvLen != 0 {
		panic("ring: Reserve with a reservation still open")
	}
	panic(fmt.Sprintf("ring: Reserve(%d) outside [1, MaxPayload %d]", n, w.maxPayload))
}

// Commit closes the open reservation as a DATA frame of n payload bytes
// holding count records. n may be less than was reserved.
func (w *Writer) Commit(n, count int) {
	if w.resvLen == 0 || uint64(n) > w.resvLen || n < 0 || uint(count) > MaxCount {
		w.badCommit(n, count)
	}
	*(*uint64)(w.r.at(w.resv & w.r.mask)) = header(uint32(n), FrameData, uint32(count))
	w.pos = w.resv + frameSize(uint64(n))
	w.resvLen = 0
}

//go:noinline
func (w *Writer) badCommit(n, count int) {
	panic(fmt.Sprintf("ring: Commit(%d bytes, %d records) of a %d-byte reservation", n, count, w.resvLen))
}

// Cancel drops the open reservation, if any.
func (w *Writer) Cancel() { w.resvLen = 0 }

// WriteData copies payload into a new DATA frame of count records. It
// returns false if the ring has no room now.
func (w *Writer) WriteData(payload []byte, count int) bool {
	buf := w.Reserve(len(payload))
	if buf == nil {
		return false
	}
	copy(buf, payload)
	w.Commit(len(payload), count)
	return true
}

// WriteBarrier appends a BARRIER frame. Barriers may use the control
// reserve, so this succeeds even when the ring is full of data, unless
// earlier barriers already used the reserve up.
func (w *Writer) WriteBarrier(b Barrier) bool {
	p, ok := w.control(FrameBarrier, barrierPayload, keepNone)
	if ok {
		encodeBarrier(p, b)
	}
	return ok
}

// WriteWatermark appends a WATERMARK frame carrying event time t. Like data,
// it may not use the control reserve; unlike data, it is not bounded by the
// consumer's limit.
func (w *Writer) WriteWatermark(t int64) bool { return w.writeWatermark(t, 0) }

// WriteIdle appends a WATERMARK frame that marks the stream idle: until the
// next plain watermark, the reader should not wait for it. t is the stream's
// watermark so far.
func (w *Writer) WriteIdle(t int64) bool { return w.writeWatermark(t, 1) }

func (w *Writer) writeWatermark(t int64, aux uint32) bool {
	p, ok := w.control(FrameWatermark, watermarkPayload, keepReserve)
	if ok {
		binary.LittleEndian.PutUint64(p, uint64(t))
		*(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p)), -frameHeaderSize)) =
			header(watermarkPayload, FrameWatermark, aux)
	}
	return ok
}

// WriteEnd appends an END frame: the reader will see no frame after it. Like
// data, it may not use the control reserve; unlike data, it is not bounded
// by the consumer's limit.
func (w *Writer) WriteEnd() bool {
	_, ok := w.control(FrameEnd, 0, keepReserve)
	return ok
}

func (w *Writer) control(t FrameType, n uint64, k keep) ([]byte, bool) {
	if w.resvLen != 0 {
		panic("ring: " + t.String() + " written with a reservation open")
	}
	idx, ok := w.place(frameSize(n), k)
	if !ok {
		return nil, false
	}
	*(*uint64)(w.r.at(idx)) = header(uint32(n), t, 0)
	w.pos += frameSize(n)
	return w.r.slice(idx+frameHeaderSize, n), true
}

// Flush publishes every frame written since the last Flush with one atomic
// store of the producer position, and wakes the reader if it sleeps. It
// also reloads the consumer's limit.
func (w *Writer) Flush() {
	w.loadLimit()
	if w.pos == w.published {
		return
	}
	w.published = w.pos
	w.r.prodPos.Store(w.pos)
	// NB: the store above is sequentially consistent, so the load of the
	// parked word cannot be ordered before it; see "Waiting" in the package
	// doc.
	if w.r.consParked.Load() != 0 {
		wakeParked(w.r.consWaker, w.r.consParked)
	}
}

// Unflushed returns the number of bytes written but not yet published.
func (w *Writer) Unflushed() int { return int(w.pos - w.published) }

// Free returns the bytes of free space the writer knows of, control reserve
// included; it reloads the consumer position.
func (w *Writer) Free() int {
	w.cachedCons = w.r.consPos.Load()
	return int(w.r.capacity - (w.pos - w.cachedCons))
}
