package ring

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("seed", "")

func newRing(t testing.TB, capacity int) *Ring {
	t.Helper()
	r, err := New(Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// watchdog fails the test if it is still running at the deadline, so that a
// lost wake-up shows up as a failure rather than a hung test binary.
const watchdog = 2 * time.Minute

// produceSeq writes records first..first+n-1 (8 bytes each) in batches whose
// sizes rnd picks in [1, maxBatch].
func produceSeq(t testing.TB, w *Writer, first, n uint64, maxBatch int, rnd *rand.Rand) {
	deadline := time.Now().Add(watchdog)
	for next := first; next < first+n; {
		batch := min(uint64(1+rnd.IntN(maxBatch)), first+n-next)
		buf := w.Reserve(int(batch) * 8)
		for buf == nil {
			if err := w.Wait(int(batch)*8, deadline); err != nil {
				t.Errorf("producer waiting for room at record %d: %v", next, err)
				return
			}
			buf = w.Reserve(int(batch) * 8)
		}
		for i := range batch {
			binary.LittleEndian.PutUint64(buf[i*8:], next+i)
		}
		w.Commit(int(batch)*8, int(batch))
		w.Flush()
		next += batch
	}
	for !w.WriteEnd() {
		if err := w.Wait(0, deadline); err != nil {
			t.Errorf("producer waiting to write END: %v", err)
			return
		}
	}
	w.Flush()
}

// consumeSeq reads DATA frames until END and checks that the records are
// exactly first, first+1, ... first+n-1.
func consumeSeq(t testing.TB, rd *Reader, first, n uint64) {
	deadline := time.Now().Add(watchdog)
	next := first
	for {
		f, err := rd.Next()
		if err == ErrEmpty {
			if err := rd.Wait(deadline); err != nil {
				t.Errorf("consumer waiting at record %d: %v", next, err)
				return
			}
			continue
		}
		if err != nil {
			t.Errorf("consumer at record %d: %v", next, err)
			return
		}
		switch f.Type {
		case FrameEnd:
			if next != first+n {
				t.Errorf("END after record %d, want %d records", next, n)
			}
			rd.Release(f)
			return
		case FrameData:
			if f.Count*8 != len(f.Payload) {
				t.Errorf("DATA frame of %d bytes claims %d records", len(f.Payload), f.Count)
				return
			}
			for i := 0; i < f.Count; i++ {
				if v := binary.LittleEndian.Uint64(f.Payload[i*8:]); v != next {
					t.Errorf("record %d: got value %d (lost, duplicated or reordered)", next, v)
					return
				}
				next++
			}
		default:
			t.Errorf("unexpected %s frame", f.Type)
			return
		}
		rd.Release(f)
	}
}

// TestExactlyOnce moves 10^7 sequence-numbered records through a small ring
// (so it wraps thousands of times) in random batch sizes, and checks that
// every value arrives once, in order.
func TestExactlyOnce(t *testing.T) {
	n := uint64(10_000_000) // about 0.1 s, or 2 s under -race
	r := newRing(t, 64<<10)
	seed := seeds.Seed(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		produceSeq(t, r.Writer(), 0, n, 300, rand.New(rand.NewPCG(seed, 1)))
	}()
	consumeSeq(t, r.Reader(), 0, n)
	<-done
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{Capacity: 1000},
		{Capacity: 512},
		{Capacity: 1 << 31},
		{Capacity: 4096, Reserve: 12},
		{Capacity: 4096, Reserve: 8},
		{Capacity: 4096, Reserve: 2048},
	} {
		if r, err := New(o); err == nil {
			r.Close()
			t.Errorf("New(%+v) succeeded, want an error", o)
		}
	}
}

// TestBarrierIntoFullRing fills a ring with data until no DATA frame fits,
// then checks that a barrier still gets in, that peek finds it behind the
// queued data, and that the reader meets it after all of that data.
func TestBarrierIntoFullRing(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	var frames int
	for w.WriteData(make([]byte, 40), 5) {
		frames++
	}
	for w.WriteData(make([]byte, 8), 5) { // fill the last gaps with 16-byte frames
		frames++
	}
	if w.WriteWatermark(7) {
		t.Fatal("WATERMARK used the control reserve")
	}
	want := Barrier{ID: 7, Trigger: time.Unix(0, 1234), Kind: Unaligned}
	if !w.WriteBarrier(want) {
		t.Fatalf("barrier did not fit a ring full of data (free %d, reserve %d)", w.Free(), r.Reserve())
	}
	w.Flush()

	var before int
	var got Barrier
	p := rd.Peek()
	for p.Next() {
		if f := p.Frame(); f.Type == FrameBarrier {
			got = f.Barrier()
			break
		}
		before++
	}
	if p.Err() != nil || got != want || before != frames {
		t.Fatalf("peek: barrier %+v after %d frames (err %v), want %+v after %d", got, before, p.Err(), want, frames)
	}
	for i := 0; i < frames; i++ {
		f, err := rd.Next()
		if err != nil || f.Type != FrameData || f.Count != 5 {
			t.Fatalf("frame %d: %v %v, want DATA", i, f.Type, err)
		}
		rd.Release(f)
	}
	f, err := rd.Next()
	if err != nil || f.Type != FrameBarrier || f.Barrier() != want {
		t.Fatalf("after data: %v %v, want the barrier", f.Type, err)
	}
}

// TestPeekSeesLaterPublishes checks that a peek started before a publish
// reaches frames published while it runs.
func TestPeekSeesLaterPublishes(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	w.WriteData([]byte("12345678"), 1)
	w.Flush()
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	p := rd.Peek()
	if p.Next() {
		t.Fatal("peek found a frame past the only one")
	}
	w.WriteBarrier(Barrier{ID: 3})
	w.Flush()
	if !p.Next() || p.Frame().Type != FrameBarrier || p.Frame().Barrier().ID != 3 {
		t.Fatalf("peek missed a barrier published after it started (err %v)", p.Err())
	}
}

func TestWatermarkAndEnd(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	if !w.WriteWatermark(-42) || !w.WriteEnd() {
		t.Fatal("write failed on an empty ring")
	}
	w.Flush()
	f, err := rd.Next()
	if err != nil || f.Type != FrameWatermark || f.Watermark() != -42 {
		t.Fatalf("got %v %v", f.Type, err)
	}
	f, err = rd.Next()
	if err != nil || f.Type != FrameEnd {
		t.Fatalf("got %v %v, want END", f.Type, err)
	}
	if _, err := rd.Next(); err != ErrEmpty {
		t.Fatalf("after END: %v, want ErrEmpty", err)
	}
}

// TestCorruptFrames writes bad frame headers straight into ring memory and
// checks that the reader reports each one instead of reading out of bounds.
func TestCorruptFrames(t *testing.T) {
	cases := []struct {
		name   string
		header uint64
		want   string
	}{
		{"unknown type", header(8, FrameType(9), 0), "unknown frame type 9"},
		{"zero type", header(8, 0, 0), "unknown frame type 0"},
		{"length past capacity", header(1<<20, FrameData, 1), "exceeds capacity"},
		{"length past data region", header(4080, FrameData, 1), "past the end of the data region"},
		{"length past producer", header(64, FrameData, 1), "past the producer position"},
		{"bad barrier length", header(8, FrameBarrier, 0), "BARRIER frame length 8"},
		{"pad not at wrap", header(8, FramePad, 0), "not at the wrap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRing(t, 4096)
			w, rd := r.Writer(), r.Reader()
			w.Reserve(8)
			w.Commit(8, 1)
			w.WriteData(make([]byte, 16), 2)
			w.Flush()
			*(*uint64)(r.at(16)) = c.header // the second frame's header
			if f, err := rd.Next(); err != nil || f.Count != 1 {
				t.Fatalf("first frame: %v", err)
			}
			_, err := rd.Next()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrCorrupt mentioning %q", err, c.want)
			}
			if _, err2 := rd.Next(); err2 != err {
				t.Fatalf("error not sticky: %v", err2)
			}
			if err := rd.Wait(time.Time{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Wait on a corrupt ring: %v, want ErrCorrupt (not a hang)", err)
			}
		})
	}
}

func TestCorruptProducerPosition(t *testing.T) {
	r := newRing(t, 4096)
	r.prodPos.Store(3 * 4096) // more than a capacity ahead of the consumer
	_, err := r.Reader().Next()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "producer position") {
		t.Fatalf("got %v, want ErrCorrupt about the producer position", err)
	}
}

// TestOpenRejects checks that Open names what is wrong with files that are
// not rings.
func TestOpenRejects(t *testing.T) {
	dir := t.TempDir()
	good := make([]byte, HeaderSize)
	initHeader(good, Options{Capacity: 4096, Reserve: DefaultReserve})
	cases := []struct {
		name   string
		mangle func(b []byte) []byte
		want   string
	}{
		{"too small", func(b []byte) []byte { return b[:100] }, "smaller than the 4096-byte header"},
		{"bad magic", func(b []byte) []byte { b[0] ^= 0xff; return append(b, make([]byte, 4096)...) }, "bad magic"},
		{"unknown version", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offVersion:], 99)
			return append(b, make([]byte, 4096)...)
		}, "unknown layout version 99"},
		{"capacity not power of two", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offCapacity:], 3000)
			return append(b, make([]byte, 3000)...)
		}, "capacity 3000 is not a power of two"},
		{"size disagrees", func(b []byte) []byte { return append(b, make([]byte, 8192)...) }, "header says 8192"},
		{"limit past capacity", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offLimit:], 8192)
			return append(b, make([]byte, 4096)...)
		}, "consumer limit 8192"},
		{"limit below MinLimit", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offLimit:], 16)
			return append(b, make([]byte, 4096)...)
		}, "consumer limit 16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(path, c.mangle(append([]byte(nil), good...)), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path)
			if err == nil {
				r.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrNotRing) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrNotRing mentioning %q", err, c.want)
			}
		})
	}
	// The unmangled header opens.
	path := filepath.Join(dir, "good")
	os.WriteFile(path, append(append([]byte(nil), good...), make([]byte, 4096)...), 0o600)
	r, err := Open(path)
	if err != nil {
		t.Fatalf("a good ring file: %v", err)
	}
	r.Close()
}

// TestSteadyStateAllocs checks that writing and reading frames allocates
// nothing.
func TestSteadyStateAllocs(t *testing.T) {
	r := newRing(t, 1<<16)
	w, rd := r.Writer(), r.Reader()
	allocs := testing.AllocsPerRun(1000, func() {
		buf := w.Reserve(256)
		buf[0] = 1
		w.Commit(256, 16)
		w.WriteBarrier(Barrier{ID: 1})
		w.Flush()
		for {
			f, err := rd.Next()
			if err != nil {
				break
			}
			rd.Release(f)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per write/read round, want 0", allocs)
	}
}

func TestIdleWatermarkAndRoom(t *testing.T) {
	r := newRing(t, 4096)
	w, rd := r.Writer(), r.Reader()
	if !w.Room(1000) || w.Room(r.Capacity()-r.Reserve()) {
		t.Fatalf("Room on an empty ring: 1000 bytes %v, capacity-reserve %v", w.Room(1000), w.Room(r.Capacity()-r.Reserve()))
	}
	w.WriteIdle(5)
	w.WriteWatermark(6)
	w.Flush()
	f, _ := rd.Next()
	if !f.Idle() || f.Watermark() != 5 {
		t.Fatalf("idle frame: idle=%v wm=%d", f.Idle(), f.Watermark())
	}
	f, _ = rd.Next()
	if f.Idle() || f.Watermark() != 6 {
		t.Fatalf("plain watermark: idle=%v wm=%d", f.Idle(), f.Watermark())
	}
}
