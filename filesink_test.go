package ringflow

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// TestFileSinkOf: records of any type go through the sink's own format
// function, one line each, into a part file that a commit makes visible;
// once the part file is open, writing a record allocates nothing.
func TestFileSinkOf(t *testing.T) {
	type pair struct{ k, v uint64 }
	dir := t.TempDir()
	s := FileSinkOf(dir, func(b []byte, p pair) []byte {
		b = strconv.AppendUint(b, p.k, 10)
		b = append(b, ' ')
		return strconv.AppendUint(b, p.v, 10)
	})()
	if err := s.Open(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(nil); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range uint64(100) {
		if err := s.Write(pair{i, i * i}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d %d", i, i*i))
	}
	if allocs := testing.AllocsPerRun(1000, func() { s.Write(pair{7, 49}) }); allocs != 0 {
		t.Errorf("a record's write allocates %.2f times", allocs)
	}
	for range 1001 { // NB: AllocsPerRun runs its function once more than it counts
		want = append(want, "7 49")
	}
	txn, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(txn); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("committed %d lines, want %d: %.5q…", len(got), len(want), got)
	}
}
