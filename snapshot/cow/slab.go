package cow

import "unsafe"

// Pages come from slabs once a Map's tables are large: a slab is one Go
// allocation of slabBytes holding many pages, advised to the kernel as
// memory to back with transparent huge pages (adviseHuge). At millions of
// keys every update touches a random page of tens of MiB of state: with
// 4 KiB translations nearly every update also misses the TLB (in a VM, a
// two-dimensional page walk), and so does every copy-on-write copy, twice.
// Backed by 2 MiB pages, the state of one subtask needs a handful of
// translations. On the machine of docs/perf.md (THP "madvise"),
// keyed-count at 1M keys runs ~15% faster, and a page copy after a freeze
// costs less.
//
// The price is memory: a Map holds up to one slab's pages not yet used,
// besides its free list. Below slabMinBytes of tables that would be a large
// share of the Map, and the TLB reaches most of the state anyway, so small
// Maps allocate pages one by one, as the Go heap sizes them.
//
// A slab is an ordinary Go object: the garbage collector scans the pages of
// K and V that hold pointers, and a page still in use keeps its slab alive.
const (
	slabMinBytes = 8 << 20
	slabBytes    = 8 << 20
)

// newPage returns a page no one else uses (zeroed, though allocPage's
// callers do not rely on it).
func (m *Map[K, V]) newPage() *page[K, V] {
	if len(m.pages.slab) == 0 {
		if uintptr(m.slots)*unsafe.Sizeof(slot[K, V]{}) < slabMinBytes {
			return new(page[K, V])
		}
		n := max(1, slabBytes/int(unsafe.Sizeof(page[K, V]{})))
		m.pages.slab = make([]page[K, V], n)
		m.stats.Slabs++
		size := uintptr(n) * unsafe.Sizeof(page[K, V]{})
		if adviseHuge(unsafe.Pointer(&m.pages.slab[0]), size) == nil {
			m.stats.SlabsAdvised++
		}
	}
	p := &m.pages.slab[0]
	if m.pages.slab = m.pages.slab[1:]; len(m.pages.slab) == 0 {
		m.pages.slab = nil
	}
	return p
}
