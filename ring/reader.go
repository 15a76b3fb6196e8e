package ring

import (
	"errors"
	"fmt"
)

// ErrEmpty is returned by Reader.Next when no frame has been published past
// the read position.
var ErrEmpty = errors.New("ring: empty")

// Reader is the consuming side of a ring. Next returns frames as views into
// ring memory; Release hands their space back to the writer.
type Reader struct {
	r          *Ring
	pos        uint64 // start of the next frame Next returns
	released   uint64 // frames below this are released
	published  uint64 // last consumer position stored into the header
	cachedProd uint64 // producer position as last loaded
	err        error  // sticky: set once the ring is found corrupt

	limit        uint64 // the limit as last set (see SetLimit); 0: none
	publishEvery uint64 // released bytes that Release publishes at once
}

// Next returns the next frame. It returns ErrEmpty if there is none yet, and
// an error wrapping ErrCorrupt, for this and every later call, if the ring
// memory breaks the frame format. The frame stays valid until it is released.
func (rd *Reader) Next() (Frame, error) {
	// The common case, a DATA frame already known to be published, is
	// checked here without a call: its header must lie inside the data
	// region and inside what was published (which also bounds its length).
	if rd.err == nil && rd.pos != rd.cachedProd {
		r := rd.r
		idx := rd.pos & r.mask
		length, t, aux := splitHeader(*(*uint64)(r.at(idx)))
		size := frameSize(uint64(length))
		if t == FrameData && idx+size <= r.capacity && size <= rd.cachedProd-rd.pos {
			rd.pos += size
			return Frame{Type: FrameData, Count: int(aux), Payload: r.slice(idx+frameHeaderSize, uint64(length)), end: rd.pos}, nil
		}
	}
	return rd.next()
}

// next is Next for every frame the fast path does not take.
func (rd *Reader) next() (Frame, error) {
	if rd.err != nil {
		return Frame{}, rd.err
	}
	for {
		if rd.pos == rd.cachedProd && !rd.refresh() {
			if rd.err != nil {
				return Frame{}, rd.err
			}
			return Frame{}, ErrEmpty
		}
		// NB: rd.err is nil here; refresh sets it only when it returns false.
		start := rd.pos
		f, err := rd.r.decode(start, rd.cachedProd)
		if err != nil {
			rd.err = err
			return Frame{}, err
		}
		rd.pos = f.end
		if f.Type != FramePad {
			return f, nil
		}
		// A pad is released as soon as it is read, if everything before it is.
		if rd.released == start {
			rd.released = f.end
		}
	}
}

// refresh reloads the producer position and reports whether a frame lies
// past the read position. Before reporting an empty ring it publishes the
// released space, so a writer waiting for room is never kept waiting by a
// reader that has nothing left to read.
func (rd *Reader) refresh() bool {
	if rd.err != nil {
		return false
	}
	prod := rd.r.prodPos.Load()
	if prod < rd.pos || prod-rd.released > rd.r.capacity || prod%8 != 0 {
		rd.err = fmt.Errorf("%w: producer position %d, read position %d, capacity %d",
			ErrCorrupt, prod, rd.pos, rd.r.capacity)
		return false
	}
	rd.cachedProd = prod
	if prod != rd.pos {
		return true
	}
	rd.publish()
	return false
}

// Release hands back the space of f and of every frame returned before it.
// Frames must be released in the order Next returned them.
func (rd *Reader) Release(f Frame) {
	if f.end <= rd.released {
		return
	}
	rd.released = f.end
	if rd.released-rd.published >= rd.publishEvery {
		rd.publish()
	}
}

// publish stores the consumer position and wakes the writer if it sleeps.
func (rd *Reader) publish() {
	if rd.released == rd.published {
		return
	}
	rd.published = rd.released
	rd.r.consPos.Store(rd.released)
	if rd.r.prodParked.Load() != 0 {
		wakeParked(rd.r.prodWaker, rd.r.prodParked)
	}
}

// Flush publishes the released space now rather than lazily.
func (rd *Reader) Flush() { rd.publish() }

// Ready reports whether a frame (or a broken ring) waits past the read
// position. Unlike Next it changes nothing: it is one load of the producer
// position, for a scheduler that wants to know whether to come back sooner.
func (rd *Reader) Ready() bool {
	return rd.pos != rd.cachedProd || rd.err != nil || rd.r.prodPos.Load() != rd.pos
}

// Buffered returns the bytes published past the read position, as of the
// last load of the producer position.
func (rd *Reader) Buffered() int { return int(rd.cachedProd - rd.pos) }

// Err returns the error that broke the reader, if any.
func (rd *Reader) Err() error { return rd.err }

// decode checks and returns the frame at position pos, given that the
// producer has published up to limit. Its checks are what keeps a corrupt
// ring from causing an out-of-bounds read.
func (r *Ring) decode(pos, limit uint64) (Frame, error) {
	idx := pos & r.mask
	if limit-pos < frameHeaderSize {
		return Frame{}, r.corrupt(pos, "only %d bytes published before the producer position %d", limit-pos, limit)
	}
	length, t, aux := splitHeader(*(*uint64)(r.at(idx)))
	size := frameSize(uint64(length))
	switch {
	case uint64(length) > r.capacity:
		return Frame{}, r.corrupt(pos, "%s frame length %d exceeds capacity %d", t, length, r.capacity)
	case idx+size > r.capacity:
		return Frame{}, r.corrupt(pos, "%s frame of %d bytes runs past the end of the data region", t, size)
	case pos+size > limit:
		return Frame{}, r.corrupt(pos, "%s frame of %d bytes runs past the producer position %d", t, size, limit)
	}
	if err := r.checkType(pos, idx, size, length, t); err != nil {
		return Frame{}, err
	}
	return Frame{
		Type:    t,
		Count:   int(aux),
		Payload: r.slice(idx+frameHeaderSize, uint64(length)),
		end:     pos + size,
	}, nil
}

func (r *Ring) checkType(pos, idx, size uint64, length uint32, t FrameType) error {
	switch t {
	case FrameData:
		return nil
	case FrameBarrier:
		if length != barrierPayload {
			return r.corrupt(pos, "BARRIER frame length %d, want %d", length, barrierPayload)
		}
	case FrameWatermark:
		if length != watermarkPayload {
			return r.corrupt(pos, "WATERMARK frame length %d, want %d", length, watermarkPayload)
		}
	case FrameEnd:
		if length != 0 {
			return r.corrupt(pos, "END frame length %d, want 0", length)
		}
	case FramePad:
		if idx+size != r.capacity {
			return r.corrupt(pos, "PAD frame ends at index %d, not at the wrap", idx+size)
		}
	default:
		return r.corrupt(pos, "unknown frame type %d", uint8(t))
	}
	return nil
}

func (r *Ring) corrupt(pos uint64, format string, args ...any) error {
	return fmt.Errorf("%w: at position %d: %s", ErrCorrupt, pos, fmt.Sprintf(format, args...))
}

// Peek iterates over the frames between a reader's read position and the
// producer position without consuming them. PAD frames are skipped.
//
//	p := rd.Peek()
//	for p.Next() {
//		f := p.Frame()
//		...
//	}
//	if err := p.Err(); err != nil { ... }
type Peek struct {
	r     *Ring
	pos   uint64
	limit uint64
	f     Frame
	err   error
}

// Peek starts a scan at the frame Next would return next. The scan sees
// frames published up to the moment it reaches the end of what it knew of;
// it then reloads the producer position once more.
func (rd *Reader) Peek() Peek {
	return Peek{r: rd.r, pos: rd.pos, limit: rd.cachedProd, err: rd.err}
}

// PeekFrom starts a scan at position pos, a frame boundary a Peek or Next
// reached earlier (Frame.End), or at the read position if that is further.
func (rd *Reader) PeekFrom(pos uint64) Peek {
	p := rd.Peek()
	if pos > p.limit {
		p.limit = rd.r.prodPos.Load()
	}
	if pos > p.pos && pos <= p.limit {
		p.pos = pos
	}
	return p
}

// Pos returns the read position: where the frame Next returns next starts.
func (rd *Reader) Pos() uint64 { return rd.pos }

// Next advances to the next frame and reports whether there is one.
func (p *Peek) Next() bool {
	for p.err == nil {
		if p.pos == p.limit {
			prod := p.r.prodPos.Load()
			if prod == p.limit {
				return false
			}
			if prod < p.limit || prod%8 != 0 {
				p.err = fmt.Errorf("%w: producer position went from %d to %d", ErrCorrupt, p.limit, prod)
				return false
			}
			p.limit = prod
		}
		f, err := p.r.decode(p.pos, p.limit)
		if err != nil {
			p.err = err
			return false
		}
		p.pos = f.end
		if f.Type != FramePad {
			p.f = f
			return true
		}
	}
	return false
}

// Frame returns the current frame.
func (p *Peek) Frame() Frame { return p.f }

// Err returns the error that ended the scan, if any.
func (p *Peek) Err() error { return p.err }
