package snapshot

import (
	"bytes"
	"strings"
	"testing"
)

// TestAssembly builds a checkpoint from pieces in any order: it reads
// back as a stored one does, and two pieces at one address, or a subtask
// beyond its operator's parallelism, are refused.
func TestAssembly(t *testing.T) {
	var a Assembly
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SourcePosition("src", 3, []byte("p3")))
	must(a.KeyGroup("count/sum", 9, []byte("base"), [][]byte{[]byte("d1"), []byte("d2")}))
	must(a.SinkTxn("out/txns", 0, []byte("t0")))
	must(a.SourcePosition("src", 0, []byte("p0")))
	meta := Meta{MaxParallelism: 16, Parallelism: map[string]int{"src": 4, "count/sum": 2, "out/txns": 1},
		StatesRecorded: true, Job: []byte("layout")}
	cp, err := a.Checkpoint(7, meta)
	if err != nil {
		t.Fatal(err)
	}
	if pos := cp.SourcePositions("src"); len(pos) != 2 || pos[0].Subtask != 0 || pos[1].Subtask != 3 || string(pos[1].Data) != "p3" {
		t.Errorf("positions %+v", pos)
	}
	if kgs := cp.KeyGroups("count/sum", 0, 15); len(kgs) != 1 || string(kgs[0].Data) != "base" || len(kgs[0].Deltas) != 2 ||
		string(kgs[0].Deltas[1]) != "d2" {
		t.Errorf("key groups %+v", kgs)
	}
	if txns := cp.SinkTxns("out/txns"); len(txns) != 1 || string(txns[0].Data) != "t0" {
		t.Errorf("transactions %+v", txns)
	}
	if cp.ID() != 7 || !bytes.Equal(cp.Meta().Job, []byte("layout")) {
		t.Errorf("checkpoint %d, job record %q", cp.ID(), cp.Meta().Job)
	}

	must(a.SourcePosition("src", 3, []byte("again")))
	if _, err := a.Checkpoint(7, meta); err == nil || !strings.Contains(err.Error(), "duplicated") {
		t.Errorf("two positions of one subtask: got %v", err)
	}
	var big Assembly
	must(big.SourcePosition("src", 19, nil))
	if _, err := big.Checkpoint(7, Meta{MaxParallelism: 16, Parallelism: map[string]int{"src": 20}}); err != nil {
		t.Errorf("20 subtasks of a source with max parallelism 16: %v", err)
	}
	var b Assembly
	must(b.SourcePosition("src", 5, nil))
	if _, err := b.Checkpoint(7, meta); err == nil || !strings.Contains(err.Error(), "not below parallelism 4") {
		t.Errorf("a subtask beyond the parallelism: got %v", err)
	}
}
