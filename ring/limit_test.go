package ring

import (
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// held returns the bytes the ring holds as the writer has written them,
// flushed or not, against the consumer's published position.
func held(r *Ring) int { return int(r.w.pos - r.consPos.Load()) }

// fill writes DATA frames of payload bytes until one does not fit and
// returns how many did.
func fill(w *Writer, payload int) int {
	n := 0
	for w.WriteData(make([]byte, payload), 1) {
		n++
	}
	return n
}

// drain reads and releases every published frame and returns how many
// there were.
func drain(t *testing.T, rd *Reader) int {
	t.Helper()
	n := 0
	for {
		f, err := rd.Next()
		if err == ErrEmpty {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		rd.Release(f)
		n++
	}
}

// TestLimitBoundsData limits a 64 KiB ring to 8 KiB and fills it with DATA
// frames: they stop within a frame of the limit, far below the capacity.
// Control frames are not bounded by the limit: a watermark, a barrier and
// an END still get in, and the reader meets them after the data.
func TestLimitBoundsData(t *testing.T) {
	r := newRing(t, 64<<10)
	w, rd := r.Writer(), r.Reader()
	const limit = 8 << 10
	rd.SetLimit(limit)
	w.Flush()
	if rd.Limit() != limit || w.Limit() != limit {
		t.Fatalf("limit: reader %d, writer %d, want %d", rd.Limit(), w.Limit(), limit)
	}
	n := fill(w, 100)
	if h, f := held(r), int(frameSize(100)); h > limit || h+f <= limit {
		t.Fatalf("%d frames hold %d bytes; want within one %d-byte frame of the limit %d", n, h, f, limit)
	}
	if w.Room(100) {
		t.Fatal("Room says a frame fits a ring at its limit")
	}
	want := Barrier{ID: 3, Kind: Aligned}
	if !w.WriteWatermark(9) || !w.WriteBarrier(want) || !w.WriteEnd() {
		t.Fatal("a control frame did not fit a ring whose data is at the limit")
	}
	w.Flush()
	for i := range n {
		if f, err := rd.Next(); err != nil || f.Type != FrameData {
			t.Fatalf("frame %d: %v %v, want DATA", i, f.Type, err)
		}
	}
	for _, typ := range []FrameType{FrameWatermark, FrameBarrier, FrameEnd} {
		if f, err := rd.Next(); err != nil || f.Type != typ {
			t.Fatalf("after the data: %v %v, want %v", f.Type, err, typ)
		}
	}
}

// TestLimitLowerAndRaise follows limit changes to the writer. A lowered
// limit reaches it when it finds the ring full by the old one (the ring
// fills to the old limit first), or at its next Flush; a raised one as soon
// as it finds the ring full by the old one.
func TestLimitLowerAndRaise(t *testing.T) {
	r := newRing(t, 64<<10)
	w, rd := r.Writer(), r.Reader()
	const payload = 56 // 64-byte frames, so every limit here is a whole number of them
	rd.SetLimit(16 << 10)
	w.Flush()
	for range 64 {
		w.WriteData(make([]byte, payload), 1)
	}
	rd.SetLimit(8 << 10)
	if w.Limit() != 16<<10 {
		t.Fatalf("writer limit %d before it looked again, want the old 16384", w.Limit())
	}
	fill(w, payload)
	if held(r) != 16<<10 || w.Limit() != 8<<10 {
		t.Fatalf("lowered without a Flush: ring holds %d (want the old limit, 16384); writer limit %d (want 8192)",
			held(r), w.Limit())
	}
	w.Flush()
	drain(t, rd)
	if fill(w, payload); held(r) != 8<<10 {
		t.Fatalf("ring holds %d, want the new limit 8192", held(r))
	}

	w.Flush()
	drain(t, rd)
	rd.SetLimit(4 << 10)
	w.Flush()
	if w.Limit() != 4<<10 {
		t.Fatalf("writer limit %d after a Flush, want 4096", w.Limit())
	}
	if fill(w, payload); held(r) != 4<<10 {
		t.Fatalf("lowered with a Flush: ring holds %d, want 4096", held(r))
	}

	rd.SetLimit(12 << 10)
	if fill(w, payload); held(r) != 12<<10 || w.Limit() != 12<<10 {
		t.Fatalf("raised: ring holds %d, writer limit %d; want both 12288", held(r), w.Limit())
	}
}

// TestSetLimitClamps checks what SetLimit makes of its argument, and that
// no limit is stored as 0 in the header.
func TestSetLimitClamps(t *testing.T) {
	r := newRing(t, 4096)
	rd := r.Reader()
	usable := r.Capacity() - r.Reserve()
	for _, c := range []struct{ n, want int }{
		{0, usable},
		{-1, usable},
		{1, MinLimit},
		{MinLimit - 1, MinLimit},
		{1001, 1000},
		{usable - 1, usable - 8},
		{usable, usable},
		{r.Capacity(), usable},
		{1 << 40, usable},
	} {
		rd.SetLimit(c.n)
		if rd.Limit() != c.want {
			t.Errorf("SetLimit(%d): Limit %d, want %d", c.n, rd.Limit(), c.want)
		}
		word := r.limit.Load()
		if (c.want == usable) != (word == 0) || word != 0 && int(word) != c.want {
			t.Errorf("SetLimit(%d): header word %d, want %d (0 for none)", c.n, word, c.want)
		}
	}
}

// countWaker counts its wake-ups.
type countWaker struct{ n atomic.Int64 }

func (c *countWaker) Wake() { c.n.Add(1) }

// TestSetLimitWakesOnRaise parks the writer of a full limited ring through
// PrepareToPark (as a scheduler does) and checks that a raised limit wakes
// it, and that a lowered or unchanged one does not.
func TestSetLimitWakesOnRaise(t *testing.T) {
	r := newRing(t, 64<<10)
	var waker countWaker
	r.SetWakers(nil, &waker)
	w, rd := r.Writer(), r.Reader()
	rd.SetLimit(4 << 10)
	w.Flush()
	fill(w, 56)
	if !w.PrepareToPark(56) {
		t.Fatal("PrepareToPark on a full ring found room")
	}
	rd.SetLimit(2 << 10)
	rd.SetLimit(2 << 10)
	if waker.n.Load() != 0 || r.prodParked.Load() != 1 {
		t.Fatalf("lowering the limit woke the writer (%d wake-ups, parked word %d)", waker.n.Load(), r.prodParked.Load())
	}
	rd.SetLimit(4<<10 + 8)
	if waker.n.Load() != 1 || r.prodParked.Load() != 0 {
		t.Fatalf("raising the limit: %d wake-ups, parked word %d; want 1 and 0", waker.n.Load(), r.prodParked.Load())
	}
	if !w.PrepareToPark(56) {
		t.Fatal("8 more bytes made room for a 64-byte frame")
	}
	rd.SetLimit(0)
	if waker.n.Load() != 2 || !w.Room(56) {
		t.Fatalf("removing the limit: %d wake-ups (want 2), room %v", waker.n.Load(), w.Room(56))
	}
}

// TestLimitPublishesAQuarter checks that the reader publishes its position
// after releasing a quarter of a limit smaller than the ring, not a quarter
// of the ring: the writer, parked through PrepareToPark (as a scheduler
// does), is woken and sees room come back before the ring is empty.
func TestLimitPublishesAQuarter(t *testing.T) {
	r := newRing(t, 64<<10)
	var waker countWaker
	r.SetWakers(nil, &waker)
	w, rd := r.Writer(), r.Reader()
	const limit = 4 << 10
	rd.SetLimit(limit)
	w.Flush()
	fill(w, 56)
	if !w.PrepareToPark(56) {
		t.Fatal("PrepareToPark on a full ring found room")
	}
	for i := range limit / 4 / 64 {
		if r.consPos.Load() != 0 || waker.n.Load() != 0 {
			t.Fatalf("published or woke after releasing %d bytes, before a quarter of the limit", i*64)
		}
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		rd.Release(f)
	}
	if got := r.consPos.Load(); got != limit/4 || waker.n.Load() != 1 {
		t.Fatalf("after releasing a quarter of the limit: consumer position %d (want %d), %d wake-ups (want 1)",
			got, limit/4, waker.n.Load())
	}
	if !w.Room(56) || rd.Buffered() == 0 {
		t.Fatalf("room %v with %d bytes still to read; want room before the ring is empty", w.Room(56), rd.Buffered())
	}
}

// TestLimitRaiseWakesParkedWriter raises the limit of a full ring while
// its writer is about to sleep in Wait (the window between its last look
// and its futex wait). Sleeps are as long as the watchdog, so a lost
// wake-up fails the test at the deadline.
func TestLimitRaiseWakesParkedWriter(t *testing.T) {
	defer setLadder(0, 0)()
	defer setParkSlice(watchdog)()
	r := newRing(t, 64<<10)
	w, rd := r.Writer(), r.Reader()
	rd.SetLimit(4 << 10)
	w.Flush()
	fill(w, 56)
	sleeps := 0
	parkHook = func() {
		sleeps++
		if sleeps == 1 {
			rd.SetLimit(8 << 10)
		}
	}
	defer func() { parkHook = nil }()
	if err := w.Wait(56, time.Now().Add(watchdog)); err != nil {
		t.Fatalf("writer: %v after %d sleeps (the raise's wake-up was lost)", err, sleeps)
	}
	if sleeps != 1 || !w.WriteData(make([]byte, 56), 1) {
		t.Fatalf("%d sleeps, want 1; and the frame must then fit", sleeps)
	}
}

// TestLimitDrainWakesParkedWriter moves 10^6 sequence-numbered records
// through a ring limited to 4 KiB of its 64 KiB, with the spin and yield
// stages of the waiting ladder off, so the writer parks whenever the limit
// stops it; only the reader's publishes at a quarter of the limit, or when
// it runs dry, wake it. Every record must arrive once, in order, and the
// ring must never hold more than the limit.
func TestLimitDrainWakesParkedWriter(t *testing.T) {
	n := uint64(1_000_000)
	if testing.Short() {
		n = 200_000
	}
	defer setLadder(0, 0)()
	var parks atomic.Int64
	parkHook = func() { parks.Add(1) }
	defer func() { parkHook = nil }()
	r := newRing(t, 64<<10)
	const limit = 4 << 10
	r.Reader().SetLimit(limit)
	seed := seeds.Seed(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		maxBatch := FramePayloadFor(limit) / 8
		produceSeq(t, r.Writer(), 0, n, maxBatch, rand.New(rand.NewPCG(seed, 4)))
	}()
	rd := r.Reader()
	deadline := time.Now().Add(watchdog)
	for want := uint64(0); ; {
		f, err := next(rd, deadline)
		if err != nil {
			t.Fatalf("consumer at record %d: %v (lost wake-up?)", want, err)
		}
		// NB: only this goroutine moves the consumer position, and the
		// producer position only grows: the difference can only be an
		// overestimate. The END frame is a control frame, which the limit
		// does not bound (package doc, Limit): once written it may sit
		// behind a full limit of data, and is not counted.
		p := r.prodPos.Load()
		h := p - r.consPos.Load()
		if _, typ, _ := splitHeader(*(*uint64)(r.at((p - frameHeaderSize) & r.mask))); h >= frameHeaderSize && typ == FrameEnd {
			h -= frameHeaderSize
		}
		if h > limit {
			t.Fatalf("the ring holds %d bytes of data, over the limit %d", h, limit)
		}
		if f.Type == FrameEnd {
			if want != n {
				t.Fatalf("END after %d records, want %d", want, n)
			}
			break
		}
		for i := range f.Count {
			if v := binary.LittleEndian.Uint64(f.Payload[i*8:]); v != want {
				t.Fatalf("record %d: got %d", want, v)
			}
			want++
		}
		rd.Release(f)
	}
	<-done
	if parks.Load() == 0 {
		t.Fatal("the writer never parked: the test did not exercise the wake-up")
	}
	t.Logf("%d records, %d parks", n, parks.Load())
}

// TestLimitChangesConcurrent has the reader change the limit at random
// (none, the minimum, anything between, past the capacity) while a writer
// writes random frames, some larger than the limit allows, and checks
// every frame against the oracle: nothing is lost, reordered or corrupted,
// and no side is left asleep.
func TestLimitChangesConcurrent(t *testing.T) {
	seed := seeds.Seed(t)
	r := newRing(t, 8<<10)
	var q sliceQueue
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		rnd := rand.New(rand.NewPCG(seed, 5))
		w := r.Writer()
		deadline := time.Now().Add(watchdog)
		for i := range n {
			m := makeFrame(byte(rnd.UintN(9)), 1+rnd.IntN(w.MaxPayload()), byte(i))
			if i == n-1 {
				m = makeFrame(9, 0, 0)
			}
			q.push(m)
			for !writeModel(w, m) {
				if err := w.Wait(len(m.payload), deadline); err != nil {
					t.Errorf("producer at frame %d: %v", i, err)
					return
				}
			}
			if rnd.IntN(4) == 0 || i == n-1 {
				w.Flush()
			}
		}
	}()
	rnd := rand.New(rand.NewPCG(seed, 6))
	rd := r.Reader()
	deadline := time.Now().Add(watchdog)
	for got := 0; got < n; got++ {
		if rnd.IntN(64) == 0 {
			rd.SetLimit([]int{0, MinLimit, 1 + rnd.IntN(r.Capacity()), 2 * r.Capacity()}[rnd.IntN(4)])
		}
		f, err := next(rd, deadline)
		m, ok := q.pop()
		if err != nil || !ok || !sameFrame(f, m) {
			t.Fatalf("frame %d: ring %s (err %v), oracle %v (ok %v)", got, f.Type, err, m, ok)
		}
		rd.Release(f)
	}
}

// TestLimitEmptyRingTakesLargeFrame: whatever the limit, an empty ring
// takes a frame of MaxPayload, also where it needs a pad; a ring that
// holds anything takes nothing more past the limit.
func TestLimitEmptyRingTakesLargeFrame(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	rd.SetLimit(MinLimit)
	w.Flush()
	big := make([]byte, w.MaxPayload())
	for round := range 3 { // the second and third need a pad before the wrap
		if !w.WriteData(big, 1) {
			t.Fatalf("round %d: a frame of MaxPayload did not fit an empty ring at index %d", round, w.pos&r.mask)
		}
		if w.WriteData(make([]byte, 8), 1) || w.Room(8) {
			t.Fatalf("round %d: a ring holding %d bytes took more under limit %d", round, held(r), MinLimit)
		}
		w.Flush()
		if drain(t, rd) != 1 {
			t.Fatalf("round %d: want one frame", round)
		}
	}
}

// TestFramePayloadFor checks that a frame of FramePayloadFor(limit) bytes,
// with the largest pad it may need, fits under limit, and that a frame one
// byte larger may not.
func TestFramePayloadFor(t *testing.T) {
	for limit := MinLimit; limit <= 64<<10; limit++ {
		p := FramePayloadFor(limit)
		s := frameSize(uint64(p))
		if worst := 2*s - 8; worst > uint64(limit) {
			t.Fatalf("FramePayloadFor(%d) = %d: frame %d, with its pad %d bytes", limit, p, s, worst)
		}
		if worst := 2*frameSize(uint64(p+1)) - 8; worst <= uint64(limit) {
			t.Fatalf("FramePayloadFor(%d) = %d, but %d bytes fit too", limit, p, p+1)
		}
	}
	if FramePayloadFor(MinLimit) != minUsefulPayload {
		t.Errorf("FramePayloadFor(MinLimit) = %d, want %d", FramePayloadFor(MinLimit), minUsefulPayload)
	}
	if FramePayloadFor(0) != 0 || FramePayloadFor(16) != 0 {
		t.Errorf("FramePayloadFor of a limit no frame fits: %d, %d; want 0", FramePayloadFor(0), FramePayloadFor(16))
	}
	r := newRing(t, defaultCapacity)
	if w := r.Writer(); w.MaxPayload() != FramePayloadFor(r.Capacity()-r.Reserve()) || w.MaxPayload() != (r.Capacity()-r.Reserve())/2-8 {
		t.Errorf("MaxPayload %d, want FramePayloadFor(capacity - reserve) = %d", w.MaxPayload(), FramePayloadFor(r.Capacity()-r.Reserve()))
	}
}

// TestLimitInSharedHeader sets the limit through one mapping of a ring file
// and reads it through another, as a producer in another process would.
func TestLimitInSharedHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	r, err := Create(path, Options{Capacity: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Reader().SetLimit(8 << 10)
	if word := binary.LittleEndian.Uint64(r.mem[offLimit:]); word != 8<<10 {
		t.Fatalf("header word at %d holds %d, want 8192", offLimit, word)
	}
	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.Writer().Limit() != 8<<10 || r2.Reader().Limit() != 8<<10 {
		t.Fatalf("second mapping: writer limit %d, reader limit %d; want 8192", r2.Writer().Limit(), r2.Reader().Limit())
	}
	r2.Reader().SetLimit(2 << 10)
	w := r.Writer()
	w.Flush()
	if w.Limit() != 2<<10 {
		t.Fatalf("first mapping's writer: limit %d, want the 2048 set through the second", w.Limit())
	}
	if fill(w, 56); held(r) != 2<<10 {
		t.Fatalf("ring holds %d, want 2048", held(r))
	}
}
