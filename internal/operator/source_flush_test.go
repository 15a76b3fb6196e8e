package operator

import (
	"testing"
	"time"

	"github.com/ringflow/ringflow/ring"
)

// burstSource is a paced source with n records due now and the next one
// due in an hour.
type burstSource struct{ n int }

func (s *burstSource) Open(int, int, []byte) error { return nil }
func (s *burstSource) Read(buf []uint64) (int, error) {
	k := min(s.n, len(buf))
	for i := range k {
		buf[i] = uint64(i)
	}
	s.n -= k
	return k, nil
}
func (s *burstSource) Position() []byte     { return nil }
func (s *burstSource) Close() error         { return nil }
func (s *burstSource) NextReady() time.Time { return time.Now().Add(time.Hour) }

// floodSource is an unpaced source of records without end.
type floodSource struct{}

func (floodSource) Open(int, int, []byte) error { return nil }
func (floodSource) Read(buf []uint64) (int, error) {
	clear(buf)
	return len(buf), nil
}
func (floodSource) Position() []byte { return nil }
func (floodSource) Close() error     { return nil }

// burstTask opens a source task over a burstSource of n records that
// writes into a new ring, and returns both.
func burstTask(t *testing.T, n int) (*Task, *ring.Ring) {
	return sourceTask(t, &burstSource{n: n}, 64)
}

// sourceTask opens a source task over src, reading batch records at
// once, that writes into a new ring, and returns both.
func sourceTask(t *testing.T, source Source[uint64], batch int) (*Task, *ring.Ring) {
	t.Helper()
	r, err := ring.New(ring.Options{Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	codec, err := CodecFor[uint64]()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate(codec, GateOptions{FrameBytes: 4096}, []EdgeOut{{Partitioning: Forward, Writers: []*ring.Writer{r.Writer()}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &Context{Operator: "src", Parallelism: 1}
	src := NewSourceRunner[uint64](source, batch, nil, nil, g)
	task := &Task{Name: "src#0", Ctx: ctx, Source: src, Ops: []Operator{g}, Ctxs: []*Context{ctx},
		Ports: g.Ports(), Gate: g, Opts: TaskOptions{MaxDelay: time.Hour}}
	if err := task.Open(); err != nil {
		t.Fatal(err)
	}
	return task, r
}

// TestPacedSourceFlushesWhenDry: once a paced source has produced every
// record that is due, its input has run dry and the step publishes them —
// they do not wait in the open frame for the next step, which on a busy
// worker comes only after its other tasks' steps.
func TestPacedSourceFlushesWhenDry(t *testing.T) {
	task, r := burstTask(t, 5)
	if _, err := task.Step(time.Now()); err != nil {
		t.Fatal(err)
	}
	f, err := r.Reader().Next()
	if err != nil {
		t.Fatalf("after one step the ring has no frame (%v): the 5 due records were not flushed", err)
	}
	if f.Type != ring.FrameData || f.Count != 5 {
		t.Fatalf("frame %s with %d records, want DATA with 5", f.Type, f.Count)
	}
}

// TestTaskReady: a task is ready when a step would find work — a frame in
// an input ring, a paced source's due time passed — and not otherwise; an
// input that is blocked (aligning) or ended does not count.
func TestTaskReady(t *testing.T) {
	in, err := ring.New(ring.Options{Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	c := &Channel{Reader: in.Reader()}
	task := &Task{Name: "count#0", Inputs: []*Channel{c}}
	now := time.Now()
	if task.Ready(now) {
		t.Fatal("ready with an empty input")
	}
	w := in.Writer()
	w.WriteData(make([]byte, 8), 1)
	w.Flush()
	if !task.Ready(now) {
		t.Fatal("not ready with a frame in its input")
	}
	c.blocked = true
	if task.Ready(now) {
		t.Fatal("ready on a blocked input's frame")
	}
	c.blocked, c.ended = false, true
	if task.Ready(now) {
		t.Fatal("ready on an ended input")
	}

	st, _ := burstTask(t, 5)
	if !st.Ready(time.Now()) {
		t.Fatal("a source with records due is not ready")
	}
	if _, err := st.Step(time.Now()); err != nil {
		t.Fatal(err)
	}
	if st.Ready(time.Now()) {
		t.Fatal("a paced source whose next record is due in an hour is ready")
	}
	if !st.Ready(time.Now().Add(2 * time.Hour)) {
		t.Fatal("a paced source is not ready after its due time")
	}
}

// nopCoord is a checkpoint coordinator that takes every report and
// forgets it.
type nopCoord struct{}

func (nopCoord) Snapshotted(_ *Task, r *SnapshotReport) { r.Release() }
func (nopCoord) Declined(*Task, uint64, error)          {}
func (nopCoord) SourceFinished(*Task)                   {}

type nopWaker struct{}

func (nopWaker) Wake() {}

// TestStoppingSourcePublishes: a source whose ring is full when a stop
// checkpoint's trigger comes queues its last records and the barrier
// behind them; once the ring has room, its next step must write and
// publish them, although a stopping source reads nothing more.
func TestStoppingSourcePublishes(t *testing.T) {
	// NB: a batch of 8 frames: the last frames of the batch that fills
	// the ring wait in Go memory, and the barrier behind them.
	task, r := sourceTask(t, floodSource{}, 4096)
	task.Checkpoints = &Checkpoints{Coord: nopCoord{}, Waker: nopWaker{}}
	for range 10_000 {
		if _, err := task.Step(time.Now()); err != nil {
			t.Fatal(err)
		}
		if task.blocked {
			break
		}
	}
	if !task.blocked {
		t.Fatal("the source's ring never filled")
	}
	task.Trigger(7, time.Now(), TriggerStop)
	if _, err := task.Step(time.Now()); err != nil {
		t.Fatal(err)
	}
	if !task.Checkpoints.stopping {
		t.Fatal("the source did not take the stop trigger")
	}
	rd := r.Reader()
	drain := func() (barrier bool) {
		for {
			f, err := rd.Next()
			if err == ring.ErrEmpty {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			rd.Release(f)
			if f.Type == ring.FrameBarrier && f.Barrier().ID == 7 {
				return true
			}
		}
	}
	if drain() {
		t.Fatal("the barrier went into the full ring ahead of the records waiting for room")
	}
	if _, err := task.Step(time.Now()); err != nil {
		t.Fatal(err)
	}
	if !drain() {
		t.Fatal("the stop checkpoint's barrier was not published after the ring drained")
	}
}
