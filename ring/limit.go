package ring

// The consumer's limit on the DATA bytes in the ring; see "Limit" in the
// package doc.
const (
	// minUsefulPayload is the smallest DATA payload worth a frame: 32
	// records of 8 bytes, the smallest fixed-size record. With fewer, the
	// frame header and the per-frame work at both ends (Reserve and Commit,
	// Next and Release) weigh as much as the records.
	minUsefulPayload = 32 * 8

	// MinLimit is the smallest limit: a frame of minUsefulPayload bytes fits
	// under it wherever the wrap falls, the pad in front of it included
	// (see FramePayloadFor). It is below the capacity less the largest
	// control reserve of the smallest ring, so every ring can be limited.
	MinLimit = 2*(frameHeaderSize+minUsefulPayload) - frameHeaderSize
)

// NB: a compile-time check that MinLimit fits the smallest ring.
const _ = uint(MinCapacity - MinCapacity/4 - MinLimit)

// FramePayloadFor returns the largest DATA payload whose frame fits in a
// ring limited to limit bytes wherever the wrap falls: a frame of s bytes
// may need a pad of up to s-8 bytes in front of it, so 2s-8 <= limit. That
// is limit/2 less the 8-byte frame header, give or take the 8-byte
// alignment; 0 if no payload fits. A producer under a limit should size its
// frames to at most this, so that the ring holds one frame while the
// consumer reads the one before.
func FramePayloadFor(limit int) int {
	s := ((limit&^7 + frameHeaderSize) / 2) &^ 7
	return max(s-frameHeaderSize, 0)
}

// SetLimit bounds the DATA bytes the ring may hold to n, clamped to
// [MinLimit, Capacity-Reserve] and rounded down to a multiple of 8 (frames
// are); n <= 0 or n >= Capacity-Reserve means no limit. Control frames are
// not bounded by it: they still use the control reserve as before.
//
// A raised limit wakes a parked producer. A lowered one takes effect at the
// producer's next Flush, or when its cached view of the ring says full:
// until then the ring may still fill up to the old limit.
func (rd *Reader) SetLimit(n int) {
	var v uint64
	if n > 0 {
		v = rd.r.limitOf(uint64(n))
	}
	if v == rd.limit {
		return
	}
	raised := rd.r.usable(v) > rd.r.usable(rd.limit)
	rd.limit = v
	rd.publishEvery = rd.r.publishEvery(v)
	rd.r.limit.Store(v)
	// NB: the store above is sequentially consistent, and so is the
	// producer's store of its parked word before it reloads the limit: one
	// of the two sees the other's.
	if raised && rd.r.prodParked.Load() != 0 {
		wakeParked(rd.r.prodWaker, rd.r.prodParked)
	}
}

// Limit returns the bound on the DATA bytes in the ring: the last SetLimit,
// or Capacity-Reserve if there is none.
func (rd *Reader) Limit() int { return int(rd.r.usable(rd.limit)) }

// Limit returns the bound on the DATA bytes in the ring as its header holds
// it now (Capacity-Reserve if there is none): unlike the Reader's and the
// Writer's, safe to call from any goroutine, for metrics.
func (r *Ring) Limit() int { return int(r.usable(r.limitOf(r.limit.Load()))) }

// Limit returns the bound on the DATA bytes in the ring as the writer last
// loaded it (see Reader.SetLimit): Capacity-Reserve if there is none.
func (w *Writer) Limit() int { return int(w.r.capacity - w.dataKeep) }

// limitOf returns the limit a header word holding v sets: 0 (none) for 0 or
// anything from the capacity less the reserve up, otherwise v clamped to
// MinLimit and rounded down to a multiple of 8. SetLimit stores only
// values it returns; the writer reads a word from another process through
// it too, so that a bad one bounds it less or more but never breaks it.
func (r *Ring) limitOf(v uint64) uint64 {
	if v == 0 || v >= r.capacity-r.reserve {
		return 0
	}
	return max(v, MinLimit) &^ 7
}

// usable returns the bytes DATA frames may occupy under limit v (0: none).
func (r *Ring) usable(v uint64) uint64 {
	if v == 0 {
		return r.capacity - r.reserve
	}
	return v
}

// publishEvery returns how many released bytes the reader publishes at
// once under limit v: a quarter of the ring, or of the limit if that is
// less, so that a producer bounded by a small limit sees space come back
// well before the ring is empty.
func (r *Ring) publishEvery(v uint64) uint64 {
	if v == 0 {
		return r.capacity / 4
	}
	return min(r.capacity/4, v/4)
}

// loadLimit reloads the consumer's limit into the writer's cache: the bytes
// DATA frames leave free.
func (w *Writer) loadLimit() {
	w.dataKeep = w.r.capacity - w.r.usable(w.r.limitOf(w.r.limit.Load()))
}
