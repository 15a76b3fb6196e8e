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

// TestPacedSourceFlushesWhenDry: once a paced source has produced every
// record that is due, its input has run dry and the step publishes them —
// they do not wait in the open frame for the next step, which on a busy
// worker comes only after its other tasks' steps.
func TestPacedSourceFlushesWhenDry(t *testing.T) {
	r, err := ring.New(ring.Options{Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	codec, err := CodecFor[uint64]()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate(codec, GateOptions{FrameBytes: 4096}, []EdgeOut{{Partitioning: Forward, Writers: []*ring.Writer{r.Writer()}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &Context{Operator: "src", Parallelism: 1}
	src := NewSourceRunner[uint64](&burstSource{n: 5}, 64, nil, nil, g)
	task := &Task{Name: "src#0", Ctx: ctx, Source: src, Ops: []Operator{g}, Ctxs: []*Context{ctx},
		Ports: g.Ports(), Gate: g, Opts: TaskOptions{MaxDelay: time.Hour}}
	if err := task.Open(); err != nil {
		t.Fatal(err)
	}
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
