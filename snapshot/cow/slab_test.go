package cow

import (
	"fmt"
	"iter"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/keygroups"
)

// thpEnabled reports whether the kernel may give madvised memory huge
// pages, and why not if it may not.
func thpEnabled() (bool, string) {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return false, fmt.Sprint("no transparent huge pages: ", err)
	}
	if strings.Contains(string(b), "[never]") {
		return false, "transparent huge pages are off: " + strings.TrimSpace(string(b))
	}
	return true, ""
}

// TestLargeMapPagesComeFromSlabs: with HugePages, the pages of a large Map
// (here, the copies after a freeze) come from slabs, which are advised for
// huge pages where the kernel has them.
func TestLargeMapPagesComeFromSlabs(t *testing.T) {
	cfg := counterConfig(128, keygroups.Range{})
	cfg.HugePages = true
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := uint64(0)
	for uintptr(m.slots)*unsafe.Sizeof(slot[uint64, int64]{}) < slabMinBytes {
		for range 10_000 {
			if err := m.Put(keys, 1); err != nil {
				t.Fatal(err)
			}
			keys++
		}
	}
	s := m.Freeze()
	for k := range keys {
		p, err := m.Upsert(k)
		if err != nil {
			t.Fatal(err)
		}
		*p++
	}
	st := m.Stats()
	if st.Slabs == 0 {
		t.Fatalf("%d keys, %d slots: no slab allocated (stats %+v)", keys, m.slots, st)
	}
	// Once there are slabs, only their pages are reused: the pages s
	// holds are not, and those of the next snapshot (slab pages) are.
	s.Release()
	s2 := m.Freeze()
	for k := range keys {
		p, _ := m.Upsert(k)
		*p++
	}
	s2.Release()
	m.reclaim()
	if len(m.pages.free) == 0 {
		t.Fatalf("no free pages after the second snapshot, holding %d pages copied from slabs, was released", st.PagesCopied)
	}
	for _, p := range m.pages.free {
		if !m.fromSlab(p) {
			t.Fatalf("free page %p is not from one of the %d slabs", p, len(m.pages.slabs))
		}
	}
	if m.fromSlab(new(page[uint64, int64])) {
		t.Fatal("a page from the Go heap counts as a slab's")
	}
	for i := 1; i < len(m.pages.slabs); i++ {
		if m.pages.slabs[i-1].to > m.pages.slabs[i].from {
			t.Fatalf("slab ranges out of order or overlapping: %v", m.pages.slabs)
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	if ok, why := thpEnabled(); !ok {
		t.Skip(why)
	}
	// A slab of 4 MiB or more holds a whole huge page, so its advice
	// cannot fail for want of one.
	var whole uint64
	for _, r := range m.pages.slabs {
		if r.to-r.from >= 4<<20 {
			whole++
		}
	}
	if whole == 0 || st.SlabsAdvised < whole {
		t.Fatalf("%d of %d slabs advised for huge pages, %d of them large enough", st.SlabsAdvised, st.Slabs, whole)
	}
}

// TestSlabPagesKeepPointersAlive: values that point into the Go heap stay
// reachable from pages in slabs, through collections.
func TestSlabPagesKeepPointersAlive(t *testing.T) {
	m, err := New(Config[uint64, *string]{Hash: keygroups.HashUint64, MaxParallelism: 128, HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for m.Stats().Slabs == 0 || n%100_000 != 0 { // some pages in a slab, and more
		v := fmt.Sprint("value-", n)
		if err := m.Put(n, &v); err != nil {
			t.Fatal(err)
		}
		n++
	}
	runtime.GC()
	junk := make([]*string, 0, 1<<16) // reuse freed memory, if any was freed
	for i := range cap(junk) {
		s := strings.Repeat("x", 6+i%8)
		junk = append(junk, &s)
	}
	runtime.GC()
	for k := range n {
		if v, ok := m.Get(k); !ok || *v != fmt.Sprint("value-", k) {
			t.Fatalf("key %d = %v after collections, want value-%d", k, v, k)
		}
	}
	runtime.KeepAlive(junk)
}

// TestPointerPagesOnHeapByDefault: without Config.HugePages a large Map
// whose pages hold pointers takes them one by one from the Go heap.
func TestPointerPagesOnHeapByDefault(t *testing.T) {
	m, err := New(Config[uint64, *int64]{Hash: keygroups.HashUint64, MaxParallelism: 128})
	if err != nil {
		t.Fatal(err)
	}
	one := new(int64)
	for k := uint64(0); uintptr(m.slots)*unsafe.Sizeof(slot[uint64, *int64]{}) <= slabMinBytes; k++ {
		if err := m.Put(k, one); err != nil {
			t.Fatal(err)
		}
	}
	s := m.Freeze()
	defer s.Release()
	for k := range uint64(1000) {
		if err := m.Put(k, one); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Slabs != 0 || st.PagesCopied == 0 || m.mapped {
		t.Fatalf("%d slabs (want 0), %d page copies (want some), mapped %v, for pointer pages without HugePages",
			st.Slabs, st.PagesCopied, m.mapped)
	}
}

// TestPlainPagesAreMapped: a Map of plain data takes every page from
// mapped slabs, counted in MappedBytes; Close keeps them while a snapshot
// is unreleased, and the snapshot still reads its version; the release
// unmaps them.
func TestPlainPagesAreMapped(t *testing.T) {
	if !canMapSlabs {
		t.Skip("no mapped slabs on " + runtime.GOOS)
	}
	before := MappedBytes()
	m := newCounters(t, 128, keygroups.Range{})
	const keys = 200_000
	for k := range uint64(keys) {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	st := m.Stats()
	if !m.mapped || st.Slabs == 0 || MappedBytes()-before != int64(st.SlabBytes) {
		t.Fatalf("mapped %v, %d slabs of %d bytes; MappedBytes grew by %d", m.mapped, st.Slabs, st.SlabBytes, MappedBytes()-before)
	}
	for i := range m.tables {
		for _, r := range m.tables[i].dir {
			if !m.fromSlab(r.p) {
				t.Fatalf("key group %d: page %p is not from a slab", i, r.p)
			}
		}
	}
	for i := 1; i < len(m.pages.slabs); i++ {
		if m.pages.slabs[i-1].to > m.pages.slabs[i].from {
			t.Fatalf("slab ranges out of order or overlapping: %v", m.pages.slabs)
		}
	}
	s := m.Freeze()
	for k := range uint64(keys) {
		if err := m.Put(k, -1); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	m.Close() // idempotent
	if MappedBytes() == before {
		t.Fatal("Close unmapped slabs an unreleased snapshot reads")
	}
	got := snapshotContents(t, s)
	if len(got) != keys {
		t.Fatalf("snapshot after Close holds %d keys, want %d", len(got), keys)
	}
	for k, v := range got {
		if v != int64(k) {
			t.Fatalf("snapshot after Close: key %d = %d, want %d", k, v, k)
		}
	}
	s.Release()
	if MappedBytes() != before {
		t.Fatalf("MappedBytes %d after Close and the last Release, want %d", MappedBytes(), before)
	}
}

// TestRestoredPagesAreMapped: key groups loaded from blobs take their pages
// from the Map's slabs too.
func TestRestoredPagesAreMapped(t *testing.T) {
	if !canMapSlabs {
		t.Skip("no mapped slabs on " + runtime.GOOS)
	}
	src := newCounters(t, 16, keygroups.Range{})
	defer src.Close()
	for k := range uint64(50_000) {
		if err := src.Put(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	s := src.Freeze()
	defer s.Release()
	dst := newCounters(t, 16, keygroups.Range{})
	defer dst.Close()
	for kg := range 16 {
		blob, err := s.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dst.LoadKeyGroup(blob); err != nil {
			t.Fatal(err)
		}
	}
	if dst.Len() != 50_000 || dst.Stats().Slabs == 0 {
		t.Fatalf("restored %d keys into %d slabs", dst.Len(), dst.Stats().Slabs)
	}
	for i := range dst.tables {
		for _, r := range dst.tables[i].dir {
			if !dst.fromSlab(r.p) {
				t.Fatalf("restored key group %d: page %p is not from a slab", i, r.p)
			}
		}
	}
}

// TestDroppedMapUnmapped: a Map dropped without Close gives its slabs back
// once the collector finds it unreachable.
func TestDroppedMapUnmapped(t *testing.T) {
	if !canMapSlabs {
		t.Skip("no mapped slabs on " + runtime.GOOS)
	}
	before := MappedBytes()
	func() {
		m := newCounters(t, 16, keygroups.Range{})
		for k := range uint64(10_000) {
			if err := m.Put(k, 1); err != nil {
				t.Fatal(err)
			}
		}
		if MappedBytes() == before {
			t.Fatal("a Map of 10,000 counters mapped nothing")
		}
	}()
	for range 100 {
		runtime.GC()
		if MappedBytes() == before {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("MappedBytes %d after 100 collections, want %d: the dropped Map's slabs are still mapped", MappedBytes(), before)
}

// TestIterationKeepsMapReachable: a Map reachable only through an iterator
// of All must stay mapped while the iterator runs, though collections run
// and the Map's cleanup would unmap its slabs. Without the KeepAlive at
// the end of All's iterator the slabs go mid-loop and the next slot read
// faults (the test binary dies).
func TestIterationKeepsMapReachable(t *testing.T) {
	if !canMapSlabs {
		t.Skip("slabs are not mapped on this platform")
	}
	const n = 20_000
	seq := func() iter.Seq2[uint64, int64] {
		m, err := New(counterConfig(1, keygroups.Range{}))
		if err != nil {
			t.Fatal(err)
		}
		for k := range uint64(n) {
			if err := m.Put(k, 1); err != nil {
				t.Fatal(err)
			}
		}
		return m.All(0)
	}()
	sum := 0
	for _, v := range seq {
		if sum%2000 == 0 {
			runtime.GC()
			runtime.GC()
			time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine
		}
		sum += int(v)
	}
	if sum != n {
		t.Errorf("iterated values sum to %d; want %d", sum, n)
	}
}
