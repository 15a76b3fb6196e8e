package cow

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
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

// TestLargeMapPagesComeFromSlabs: once a Map's tables pass slabMinBytes,
// its new pages (here, the copies after a freeze) come from slabs, which
// are advised for huge pages where the kernel has them.
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
	if st.SlabsAdvised != st.Slabs {
		t.Fatalf("%d of %d slabs advised for huge pages", st.SlabsAdvised, st.Slabs)
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

// TestNoSlabsByDefault: without Config.HugePages a large Map takes its
// pages one by one.
func TestNoSlabsByDefault(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	for k := uint64(0); uintptr(m.slots)*unsafe.Sizeof(slot[uint64, int64]{}) <= slabMinBytes; k++ {
		if err := m.Put(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	s := m.Freeze()
	defer s.Release()
	for k := range uint64(1000) {
		if err := m.Put(k, 2); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Slabs != 0 || st.PagesCopied == 0 {
		t.Fatalf("%d slabs (want 0) and %d page copies (want some) without HugePages", st.Slabs, st.PagesCopied)
	}
}
