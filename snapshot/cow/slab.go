package cow

import (
	"cmp"
	"slices"
	"unsafe"
)

// With Config.HugePages, pages come from slabs once a Map's tables are
// large: a slab is one Go allocation of slabBytes holding many pages,
// advised to the kernel as memory to back with transparent huge pages
// (adviseHuge). At millions of keys every update touches a random page of
// tens of MiB of state: with 4 KiB translations nearly every update also
// misses the TLB (in a VM, a two-dimensional page walk), and so does every
// copy-on-write copy, twice.
// Backed by 2 MiB pages, the state of one subtask needs a handful of
// translations. On the machine of docs/perf.md (THP "madvise"),
// keyed-count at 1M keys ran about 7% faster (docs/perf.md, thirteenth
// session); it is off by default because the slowest records there were
// slower with it.
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
		if !m.huge || uintptr(m.slots)*unsafe.Sizeof(slot[K, V]{}) < slabMinBytes {
			return new(page[K, V])
		}
		m.newSlab()
	}
	p := &m.pages.slab[0]
	if m.pages.slab = m.pages.slab[1:]; len(m.pages.slab) == 0 {
		m.pages.slab = nil
	}
	return p
}

// newSlab allocates a slab as the source of the next pages, records its
// address range (fromSlab) and advises it for huge pages.
func (m *Map[K, V]) newSlab() {
	n := max(1, slabBytes/int(unsafe.Sizeof(page[K, V]{})))
	size := uintptr(n) * unsafe.Sizeof(page[K, V]{})
	m.pages.slab = make([]page[K, V], n)
	base := unsafe.Pointer(&m.pages.slab[0])
	r := addrRange{uintptr(base), uintptr(base) + size}
	i, _ := slices.BinarySearchFunc(m.pages.slabs, r.from, addrRange.cmpFrom)
	m.pages.slabs = slices.Insert(m.pages.slabs, i, r)
	m.stats.Slabs++
	if adviseHuge(base, size) == nil {
		m.stats.SlabsAdvised++
	}
	if len(m.pages.slabs) == 1 {
		// From now on only slab pages are reused, so that in time all
		// of the Map's pages are: the pages allocated one by one go to
		// the garbage collector as the Map lets go of them.
		clear(m.pages.free)
		m.pages.free = m.pages.free[:0]
	}
}

// freePage puts a page the Map no longer needs on the free list, unless the
// Map has slabs and the page is not from one of them.
func (m *Map[K, V]) freePage(p *page[K, V]) {
	if len(m.pages.slabs) > 0 && !m.fromSlab(p) {
		return
	}
	m.pages.free = append(m.pages.free, p)
}

// fromSlab reports whether p lies in one of the Map's slabs (a binary
// search: a Map of 10M keys has tens of slabs, and a checkpoint frees
// about as many pages as it copies).
func (m *Map[K, V]) fromSlab(p *page[K, V]) bool {
	a := uintptr(unsafe.Pointer(p))
	i, found := slices.BinarySearchFunc(m.pages.slabs, a, addrRange.cmpFrom)
	if found {
		return true
	}
	return i > 0 && a < m.pages.slabs[i-1].to
}

// addrRange is the addresses [from, to). NB: a Go heap object does not
// move, and a slab is kept alive by its pages, which the Map never lets go.
type addrRange struct{ from, to uintptr }

func (r addrRange) cmpFrom(a uintptr) int { return cmp.Compare(r.from, a) }
