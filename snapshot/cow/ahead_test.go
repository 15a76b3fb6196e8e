package cow

import (
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

// pagesWritten counts the pages of m's live tables written in interval v.
func pagesWritten(m *Map[uint64, int64], v uint64) int {
	n := 0
	for ti := range m.tables {
		for ri := range m.tables[ti].dir {
			if r := &m.tables[ti].dir[ri]; r.ver == v && r.dirty != [occWords]uint64{} {
				n++
			}
		}
	}
	return n
}

// copyAheadAll runs CopyAhead a few pages at a time until it has nothing
// left, and returns the copies it made.
func copyAheadAll(m *Map[uint64, int64]) int {
	total := 0
	for {
		n := m.CopyAhead(3)
		if n == 0 {
			return total
		}
		total += n
	}
}

func TestCopyAhead(t *testing.T) {
	m := newCounters(t, 16, keygroups.Range{})
	const keys = 20_000
	for k := range uint64(keys) {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.CopyAhead(1 << 20); n != 0 {
		t.Fatalf("CopyAhead with no snapshot made %d copies", n)
	}

	// Every page was written before the freeze: every page is copied ahead,
	// and the writes after it copy nothing.
	want := pagesWritten(m, m.Version())
	s1 := m.Freeze()
	before := m.Stats()
	if got := copyAheadAll(m); got != want {
		t.Fatalf("CopyAhead after a freeze made %d copies, want the %d pages written before it", got, want)
	}
	if n := m.CopyAhead(1); n != 0 {
		t.Fatalf("CopyAhead after it reported none left made %d more", n)
	}
	mid := m.Stats()
	if got := mid.PagesAhead - before.PagesAhead; got != uint64(want) || mid.PagesCopied-before.PagesCopied != uint64(want) {
		t.Fatalf("stats count %d copies ahead and %d copies, want %d of each", got, mid.PagesCopied-before.PagesCopied, want)
	}
	for k := range uint64(keys) {
		p, err := m.Upsert(k)
		if err != nil {
			t.Fatal(err)
		}
		*p = -1
	}
	if after := m.Stats(); after.PagesCopied != mid.PagesCopied || after.DirsCopied != mid.DirsCopied {
		t.Fatalf("writes after copying ahead copied %d pages and %d directories, want none",
			after.PagesCopied-mid.PagesCopied, after.DirsCopied-mid.DirsCopied)
	}
	for k := range uint64(keys) {
		if v, ok := s1.Get(k); !ok || v != int64(k) {
			t.Fatalf("snapshot after copying ahead: key %d = %d, %v; want %d", k, v, ok, k)
		}
	}

	// One key written in an interval: one page copied ahead after it, and
	// copying it does not count as a change.
	sx := m.Freeze() // of the interval that wrote every key; not copied ahead
	k := uint64(7)
	kg := m.KeyGroupOf(keygroups.HashUint64(k))
	if err := m.Put(k, 70); err != nil {
		t.Fatal(err)
	}
	s2 := m.Freeze()
	if got := copyAheadAll(m); got != 1 {
		t.Fatalf("one key written: CopyAhead made %d copies, want 1", got)
	}
	s3 := m.Freeze()
	if s3.ChangedSince(kg, s2.Version()) {
		t.Fatalf("key group %d copied ahead but not written reports a change since v%d", kg, s2.Version())
	}
	d, err := s3.AppendKeyGroupDelta(nil, kg)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := s2.AppendKeyGroupDelta(nil, (kg+1)%16) // a key group nobody wrote in that interval
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != len(empty) {
		t.Fatalf("delta of a key group copied ahead but not written: %d bytes, want %d (an empty delta)", len(d), len(empty))
	}
	if got := copyAheadAll(m); got != 0 {
		t.Fatalf("a page copied ahead and not written was copied ahead again: %d copies", got)
	}

	// A released snapshot shares nothing: nothing to copy.
	if err := m.Put(k, 71); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Snapshot[uint64, int64]{s1, sx, s2, s3} {
		s.Release()
	}
	s4 := m.Freeze()
	s4.Release()
	if got := copyAheadAll(m); got != 0 {
		t.Fatalf("CopyAhead with the snapshot released made %d copies", got)
	}
	if v, _ := m.Get(k); v != 71 {
		t.Fatalf("key %d = %d, want 71", k, v)
	}
}
