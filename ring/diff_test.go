package ring

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// modelFrame is one frame as the oracle queue holds it.
type modelFrame struct {
	typ     FrameType
	count   int
	payload []byte
}

func (m modelFrame) String() string {
	return fmt.Sprintf("%s(count=%d, %d bytes)", m.typ, m.count, len(m.payload))
}

// sliceQueue is the oracle: a mutex-protected slice of frames.
type sliceQueue struct {
	mu struct {
		sync.Mutex
		frames []modelFrame
	}
}

func (q *sliceQueue) push(f modelFrame) {
	q.mu.Lock()
	q.mu.frames = append(q.mu.frames, f)
	q.mu.Unlock()
}

func (q *sliceQueue) pop() (modelFrame, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.mu.frames) == 0 {
		return modelFrame{}, false
	}
	f := q.mu.frames[0]
	q.mu.frames = q.mu.frames[1:]
	return f, true
}

func (q *sliceQueue) snapshot() []modelFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]modelFrame(nil), q.mu.frames...)
}

func sameFrame(f Frame, m modelFrame) bool {
	if f.Type != m.typ || f.Count != m.count {
		return false
	}
	return bytes.Equal(f.Payload, m.payload)
}

// writeModel writes m into the ring, reporting whether it fitted.
func writeModel(w *Writer, m modelFrame) bool {
	switch m.typ {
	case FrameData:
		return w.WriteData(m.payload, m.count)
	case FrameBarrier:
		return w.WriteBarrier(decodeBarrier(m.payload))
	case FrameWatermark:
		var p [8]byte
		copy(p[:], m.payload)
		return w.WriteWatermark(int64(p[0]) | int64(p[1])<<8 | int64(p[2])<<16 | int64(p[3])<<24 |
			int64(p[4])<<32 | int64(p[5])<<40 | int64(p[6])<<48 | int64(p[7])<<56)
	}
	return w.WriteEnd()
}

// makeFrame builds a frame of kind k (0..9) whose DATA payload has n bytes.
func makeFrame(k byte, n int, fill byte) modelFrame {
	switch k % 10 {
	case 7:
		p := make([]byte, barrierPayload)
		encodeBarrier(p, Barrier{ID: uint64(n), Trigger: time.Unix(0, int64(fill)+1), Kind: BarrierKind(n & 1)})
		return modelFrame{typ: FrameBarrier, payload: p}
	case 8:
		p := make([]byte, 8)
		p[0], p[7] = fill, byte(n)
		return modelFrame{typ: FrameWatermark, payload: p}
	case 9:
		return modelFrame{typ: FrameEnd, payload: []byte{}}
	}
	p := bytes.Repeat([]byte{fill}, n)
	return modelFrame{typ: FrameData, count: n / 3, payload: p}
}

// runOps drives a ring and the oracle through the same operations, decoded
// from ops, and checks after each read and peek that they agree. The ring is
// small so that the operations wrap it many times.
func runOps(t *testing.T, ops []byte) {
	r, err := New(Options{Capacity: MinCapacity})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, rd := r.Writer(), r.Reader()
	var pending []modelFrame // written, not flushed
	var q sliceQueue         // flushed, not read
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i], ops[i+1]
		switch op % 4 {
		case 0, 1: // write a frame
			m := makeFrame(op/4, 1+int(arg)%(w.MaxPayload()/3), byte(i))
			if writeModel(w, m) {
				pending = append(pending, m)
			} else if len(pending) == 0 && len(q.snapshot()) == 0 && rd.Buffered() == 0 {
				t.Fatalf("op %d: %v did not fit an empty ring", i, m)
			}
		case 2: // flush
			w.Flush()
			for _, m := range pending {
				q.push(m)
			}
			pending = pending[:0]
		case 3:
			if arg%2 == 0 {
				readOne(t, i, rd, &q)
			} else {
				peekAll(t, i, rd, &q)
			}
		}
	}
}

func readOne(t *testing.T, i int, rd *Reader, q *sliceQueue) {
	f, err := rd.Next()
	m, ok := q.pop()
	switch {
	case err == ErrEmpty && !ok:
	case err != nil:
		t.Fatalf("op %d: Next: %v, oracle has %v (ok=%v)", i, err, m, ok)
	case !ok:
		t.Fatalf("op %d: ring returned %s, oracle is empty", i, f.Type)
	case !sameFrame(f, m):
		t.Fatalf("op %d: ring returned %s count=%d len=%d, oracle %v", i, f.Type, f.Count, len(f.Payload), m)
	default:
		rd.Release(f)
	}
}

func peekAll(t *testing.T, i int, rd *Reader, q *sliceQueue) {
	want := q.snapshot()
	p := rd.Peek()
	n := 0
	for p.Next() {
		if n >= len(want) || !sameFrame(p.Frame(), want[n]) {
			t.Fatalf("op %d: peek frame %d is %s, oracle has %d frames", i, n, p.Frame().Type, len(want))
		}
		n++
	}
	if p.Err() != nil || n != len(want) {
		t.Fatalf("op %d: peek saw %d frames (err %v), oracle has %d", i, n, p.Err(), len(want))
	}
}

// TestDifferential runs random operation sequences against the oracle.
func TestDifferential(t *testing.T) {
	seed := seeds.Seed(t)
	rnd := rand.New(rand.NewPCG(seed, 2))
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for round := range rounds {
		ops := make([]byte, 2000)
		for i := range ops {
			ops[i] = byte(rnd.UintN(256))
		}
		t.Run(fmt.Sprint(round), func(t *testing.T) { runOps(t, ops) })
	}
}

// FuzzFrames is the fuzz target for random frame sizes across many wraps:
// go test -fuzz FuzzFrames ./ring/
func FuzzFrames(f *testing.F) {
	f.Add([]byte{0, 200, 2, 0, 3, 0})
	f.Add(bytes.Repeat([]byte{1, 255, 0, 255, 2, 0, 3, 2, 3, 0}, 40))
	f.Fuzz(runOps)
}

// TestConcurrentDifferential has a producer goroutine write random frames to
// the ring and, before each flush, to the oracle; the consumer checks every
// ring frame against the oracle's next one.
func TestConcurrentDifferential(t *testing.T) {
	seed := seeds.Seed(t)
	r := newRing(t, 8<<10)
	var q sliceQueue
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		rnd := rand.New(rand.NewPCG(seed, 3))
		w := r.Writer()
		deadline := time.Now().Add(watchdog)
		for i := range n {
			m := makeFrame(byte(rnd.UintN(9)), 1+rnd.IntN(700), byte(i))
			if i == n-1 {
				m = makeFrame(9, 0, 0)
			}
			q.push(m)
			for !writeModel(w, m) {
				if err := w.Wait(len(m.payload), deadline); err != nil {
					t.Errorf("producer: %v", err)
					return
				}
			}
			if rnd.IntN(4) == 0 || i == n-1 {
				w.Flush()
			}
		}
	}()
	rd := r.Reader()
	deadline := time.Now().Add(watchdog)
	for got := 0; got < n; {
		f, err := rd.Next()
		if err == ErrEmpty {
			if err := rd.Wait(deadline); err != nil {
				t.Fatalf("consumer after %d frames: %v", got, err)
			}
			continue
		}
		m, ok := q.pop()
		if err != nil || !ok || !sameFrame(f, m) {
			t.Fatalf("frame %d: ring %s (err %v), oracle %v (ok %v)", got, f.Type, err, m, ok)
		}
		rd.Release(f)
		got++
	}
}
