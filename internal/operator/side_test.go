package operator

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ringflow/ringflow/ring"
)

// fakePart is a GatePart with n edges that records what it is told.
type fakePart struct {
	Base
	n       int
	outputs map[int][]byte
	log     *[]string
	name    string
}

func (f *fakePart) edgeCount() int { return f.n }
func (f *fakePart) Idle(int64)     {}
func (f *fakePart) Barrier(b ring.Barrier) {
	*f.log = append(*f.log, fmt.Sprintf("%s barrier %d", f.name, b.ID))
}
func (f *fakePart) BarrierFirst(b ring.Barrier) {
	*f.log = append(*f.log, fmt.Sprintf("%s first %d", f.name, b.ID))
}
func (f *fakePart) SnapshotOutputs() map[int][]byte { return f.outputs }
func (f *fakePart) Ports() []Port                   { return nil }
func (f *fakePart) Watermark(wm int64)              { *f.log = append(*f.log, fmt.Sprintf("%s wm %d", f.name, wm)) }
func (f *fakePart) End()                            { *f.log = append(*f.log, f.name+" end") }
func (f *fakePart) Replay(edge, target int, state []byte) error {
	*f.log = append(*f.log, fmt.Sprintf("%s replay %d/%d %s", f.name, edge, target, state))
	return nil
}

// TestGates checks that joined gates pass control to every part and number
// the parts' edges one after another in output channel state.
func TestGates(t *testing.T) {
	var log []string
	a := &fakePart{n: 2, log: &log, name: "a", outputs: map[int][]byte{OutputKey(1, 3): []byte("a1")}}
	b := &fakePart{n: 1, log: &log, name: "b"}
	c := &fakePart{n: 2, log: &log, name: "c", outputs: map[int][]byte{OutputKey(0, 0): []byte("c0"), OutputKey(1, 2): []byte("c1")}}
	g := NewGates(a, b, c)
	g.Watermark(7)
	g.Barrier(ring.Barrier{ID: 3})
	g.End()
	want := map[int][]byte{OutputKey(1, 3): []byte("a1"), OutputKey(3, 0): []byte("c0"), OutputKey(4, 2): []byte("c1")}
	if got := g.SnapshotOutputs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	for k, v := range want {
		if err := g.Replay(k>>16, k&0xffff, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Replay(5, 0, nil); err == nil {
		t.Fatal("replay of edge 5 of 5: no error")
	}
	got := map[string]bool{}
	for _, l := range log {
		got[l] = true
	}
	for _, l := range []string{"a wm 7", "b wm 7", "c wm 7", "a barrier 3", "b barrier 3", "c barrier 3", "a end", "c end",
		"a replay 1/3 a1", "c replay 0/0 c0", "c replay 1/2 c1"} {
		if !got[l] {
			t.Errorf("no %q in %q", l, log)
		}
	}
	if g.edgeCount() != 5 {
		t.Fatalf("%d edges, want 5", g.edgeCount())
	}
}
