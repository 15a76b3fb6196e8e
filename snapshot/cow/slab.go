package cow

import (
	"cmp"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"
)

// Pages come from slabs: runs of many pages allocated at once. Where a
// slab comes from depends on what a page holds.
//
// Pages of plain data (K and V hold no pointers, as in counters, sums and
// fixed-size records) live outside the Go heap, in slabs mapped from the
// kernel (mapSlab). The state of a job is most of its memory and lives as
// long as the job: on the Go heap it set the garbage collector's goal to
// twice its size, so the runtime held memory for a second copy that no one
// used, reached that size only as garbage slowly accumulated (resident
// memory rose for minutes after start), and every in-place restore, which
// builds new tables while the old ones await collection, stepped it up
// again. Mapped slabs are counted exactly: they are returned to the kernel
// when the Map is closed and every Snapshot of it released (see shared),
// and pages freed inside them go to the Map's free list, never to the
// collector. Memory a slab holds but no page has touched yet costs address
// space only, so slabs start small and double (firstSlabBytes up to
// slabBytes) and small Maps cost little more than their pages.
//
// Pages that hold pointers must stay where the collector sees them: one by
// one from the Go heap, or, with Config.HugePages once the tables pass
// slabMinBytes, from slabs that are single Go allocations.
//
// keepAlive: the collector does not see pointers into mapped slabs, and a
// Map dropped without Close gives its slabs back once the Map itself is
// unreachable (runtime.AddCleanup in New). A method's receiver may be
// dead before the method is done with the pages it found through it (a
// probe reads slots after its last use of m; an iterator over All runs
// after the call that made it), and the collector could then unmap a slab
// under it. Every method that reads or writes pages after its last use of
// the Map ends with runtime.KeepAlive(m), which costs nothing at run time.
// A pointer that Upsert returns is valid only while the Map is reachable.
//
// With Config.HugePages, slabs are also advised to the kernel as memory to
// back with transparent huge pages (adviseHuge). At millions of keys every
// update touches a random page of tens of MiB of state: with 4 KiB
// translations nearly every update also misses the TLB (in a VM, a
// two-dimensional page walk), and so does every copy-on-write copy, twice.
// Backed by 2 MiB pages, the state of one subtask needs a handful of
// translations. On the machine of docs/perf.md (THP "madvise"),
// keyed-count at 1M keys ran about 7% faster; it is off by default because
// the slowest records there were slower with it.
const (
	firstSlabBytes = 64 << 10
	slabMinBytes   = 8 << 20
	slabBytes      = 8 << 20
)

// mappedBytes is the memory all Maps hold in mapped slabs, now.
var mappedBytes atomic.Int64

// MappedBytes reports the memory all Maps of the process hold outside the
// Go heap, in slabs mapped from the kernel: the state of plain-data Maps,
// which the Go runtime's statistics do not count.
func MappedBytes() int64 { return mappedBytes.Load() }

// pointerFree reports whether values of type t hold no pointers the
// garbage collector must see.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// newPage returns a page no one else uses (zeroed, though allocPage's
// callers do not rely on it).
func (m *Map[K, V]) newPage() *page[K, V] {
	if len(m.pages.slab) == 0 {
		if !m.mapped && (!m.huge || uintptr(m.slots)*unsafe.Sizeof(slot[K, V]{}) < slabMinBytes) {
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
// address range (fromSlab) and, with Config.HugePages, advises it for huge
// pages.
func (m *Map[K, V]) newSlab() {
	pageSize := unsafe.Sizeof(page[K, V]{})
	bytes := uintptr(slabBytes)
	if m.mapped {
		bytes = uintptr(min(slabBytes, firstSlabBytes<<len(m.pages.slabs)))
	}
	n := max(1, bytes/pageSize)
	size := n * pageSize
	if m.mapped {
		mem, err := mapSlab(size)
		if err != nil {
			// NB: out of address space or mappings; the Go heap is the
			// only place left, and the collector's memory is as good.
			m.mapped = false
			m.pages.slab = make([]page[K, V], n)
		} else {
			m.shared.slabs = append(m.shared.slabs, mem)
			mappedBytes.Add(int64(len(mem)))
			m.pages.slab = unsafe.Slice((*page[K, V])(unsafe.Pointer(unsafe.SliceData(mem))), n)
		}
	} else {
		m.pages.slab = make([]page[K, V], n)
	}
	base := unsafe.Pointer(&m.pages.slab[0])
	r := addrRange{uintptr(base), uintptr(base) + size}
	i, _ := slices.BinarySearchFunc(m.pages.slabs, r.from, addrRange.cmpFrom)
	m.pages.slabs = slices.Insert(m.pages.slabs, i, r)
	m.stats.Slabs++
	m.stats.SlabBytes += uint64(size)
	if m.huge && adviseHuge(base, size) == nil {
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

// addrRange is the addresses [from, to). NB: neither a Go heap object nor a
// mapping moves, and a heap slab is kept alive by its pages, which the Map
// never lets go.
type addrRange struct{ from, to uintptr }

func (r addrRange) cmpFrom(a uintptr) int { return cmp.Compare(r.from, a) }

// shared is what the owner and snapshot readers both touch: the count of
// releases, and the mapped slabs with the references that keep them.
//
// The owner holds one reference until Close, and every Snapshot one until
// its Release; the last to let go unmaps the slabs. Only the owner appends
// to slabs, and only while it holds its reference, so the count cannot
// reach zero while it does.
type shared struct {
	releases atomic.Uint64 // Release calls so far
	refs     atomic.Int64
	slabs    [][]byte
}

// unref drops a reference, and unmaps the slabs with the last.
func (s *shared) unref() {
	n := s.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		panic("cow: a Map or Snapshot let go twice")
	}
	for _, mem := range s.slabs {
		mappedBytes.Add(-int64(len(mem)))
		unmapSlab(mem)
	}
	s.slabs = nil
}

// ownerRef is the owner's reference, which Close, or the collector once the
// Map is unreachable, gives up exactly once.
type ownerRef struct {
	shared *shared
	done   atomic.Bool
}

func (o *ownerRef) drop() {
	if o.done.CompareAndSwap(false, true) {
		o.shared.unref()
	}
}
