package cow

import (
	"math/bits"
	"unsafe"
)

// Page geometry. A page holds pageSlots entries and an occupancy bitmap;
// every table is a whole number of pages, so its capacity is at least
// pageSlots.
const (
	pageShift = 8
	pageSlots = 1 << pageShift
	pageMask  = pageSlots - 1
	occWords  = pageSlots / 64

	// A page is made private to the live map in two steps (see pageRef):
	// the first write to a page after a freeze copies only the chunk it
	// writes, 256 bytes for 16-byte entries, not the whole 4 KiB.
	chunkShift = 4
	chunkSlots = 1 << chunkShift
	pageChunks = pageSlots / chunkSlots
	allChunks  = 1<<pageChunks - 1

	// fibMul spreads the hash over the table index (Fibonacci hashing), so a
	// supplied hash with weak high bits still probes well. The key group
	// uses the hash's low bits (h % maxP); the index uses the product's
	// high bits.
	fibMul = 0x9E3779B97F4A7C15
)

type slot[K comparable, V any] struct {
	key K
	val V
}

// page is the unit of copy-on-write: pageSlots entries and nothing else, so
// that for 16-byte entries it is exactly one 4 KiB allocation size class.
type page[K comparable, V any] struct {
	slots [pageSlots]slot[K, V]
}

// pageRef is one directory entry: a page, its occupancy bitmap, the slots
// written in the current interval, and ver: the version (interval) in which
// the page was last allocated, copied, or first written in place. The page
// and the bitmaps are writable in place iff ver > Map.required, and the
// dirty bitmap means "written during interval ver".
//
// A partial page has a base: p then holds only the chunks in have, and the
// others are read from base, a page a snapshot froze, which nobody writes.
// The first write to a frozen page makes such a partial copy of it, holding
// the one chunk written; a write to any other chunk copies all the rest at
// once (as CopyAhead does in a task's idle steps), and the page drops its
// base.
//
// NB: the bitmaps live in the directory, not the page, so a probe reads the
// small, cache-resident directory and then exactly one slot's cache line.
// They are copied with the directory, and a snapshot's directory keeps the
// bitmaps of its frozen pages.
type pageRef[K comparable, V any] struct {
	p     *page[K, V]
	base  *page[K, V] // nil unless partial
	ver   uint64
	have  uint64 // chunks of p that hold the page's data, if base != nil
	occ   [occWords]uint64
	dirty [occWords]uint64
}

// pageOf returns the page that holds slot si's data: p, or base for a
// chunk a partial page does not have.
func (r *pageRef[K, V]) pageOf(si uint64) *page[K, V] {
	if r.base != nil && r.have&(1<<(si>>chunkShift)) == 0 {
		return r.base
	}
	return r.p
}

// slot returns slot si of the page, for reading; writers go through
// Map.touchSlot.
func (r *pageRef[K, V]) slot(si uint64) *slot[K, V] { return slotOf(r.pageOf(si), si) }

// slotOf returns slot si (taken mod pageSlots) of page p, which must not
// be nil.
//
// NB: the address is computed, not indexed: for &p.slots[si] Go checks p
// against nil by loading the page's first byte, a second cache line per
// probe. In the prefetch's pass over a batch's home slots (Map.prefetch),
// which only computes addresses, that load was the pass's one wait on
// memory: keyed-count at 100k keys and parallelism 2 ran 51.5M records/s
// with it and 56.2M without, higher in all eight alternating pairs (Intel
// Xeon 167, docs/perf.md).
func slotOf[K comparable, V any](p *page[K, V], si uint64) *slot[K, V] {
	return (*slot[K, V])(unsafe.Add(unsafe.Pointer(p), uintptr(si&pageMask)*unsafe.Sizeof(slot[K, V]{})))
}

func (r *pageRef[K, V]) occupied(si uint64) bool { return r.occ[si>>6]&(1<<(si&63)) != 0 }
func (r *pageRef[K, V]) setOccupied(si uint64)   { r.occ[si>>6] |= 1 << (si & 63) }
func (r *pageRef[K, V]) clearOccupied(si uint64) { r.occ[si>>6] &^= 1 << (si & 63) }
func (r *pageRef[K, V]) isDirty(si uint64) bool  { return r.dirty[si>>6]&(1<<(si&63)) != 0 }
func (r *pageRef[K, V]) setDirty(si uint64)      { r.dirty[si>>6] |= 1 << (si & 63) }

// table is one key group's open-addressing hash table (linear probing,
// backward-shift deletion, no tombstones), split into pages through a
// directory. A Snapshot holds a copy of this header; the directory and the
// pages it points to are then shared until the writer copies them.
type table[K comparable, V any] struct {
	dir     []pageRef[K, V]
	n       int    // entries
	growAt  int    // grow before inserting when n reaches this
	shift   uint   // 64 - log2(capacity)
	mask    uint64 // capacity - 1
	dirVer  uint64 // version at which dir was allocated or copied
	written uint64 // version of the last mutation; 0 = never since creation/restore

	// Keys deleted during interval deletedVer, for deltas. deltaLost is
	// an interval whose deletions were too many to log: no delta for it.
	deleted    []K
	deletedVer uint64
	deltaLost  uint64
}

func (t *table[K, V]) capacity() int { return len(t.dir) * pageSlots }

// home is the slot a hash probes first.
func (t *table[K, V]) home(h uint64) uint64 { return (h * fibMul) >> (t.shift & 63) } // NB: & 63 drops Go's shift-overflow check

func (t *table[K, V]) occupied(i uint64) bool {
	return t.dir[i>>pageShift].occupied(i & pageMask)
}

// slotAt returns slot i, for reading.
func (t *table[K, V]) slotAt(i uint64) *slot[K, V] {
	return t.dir[i>>pageShift].slot(i & pageMask)
}

// find returns the index holding k, or the empty index where k would be
// inserted. Read-only: safe on a frozen table from any goroutine.
func (t *table[K, V]) find(h uint64, k K) (uint64, bool) {
	if len(t.dir) == 0 {
		return 0, false
	}
	i := t.home(h)
	for {
		r := &t.dir[i>>pageShift]
		si := i & pageMask
		if !r.occupied(si) {
			return i, false
		}
		if r.slot(si).key == k {
			return i, true
		}
		i = (i + 1) & t.mask
	}
}

// setGeometry sizes an empty table header for capacity slots (a power of two,
// at least pageSlots).
func (t *table[K, V]) setGeometry(capacity int) {
	t.shift = uint(64 - bits.TrailingZeros(uint(capacity)))
	t.mask = uint64(capacity - 1)
	t.growAt = growAt(capacity)
}

// growAt is the number of entries at which a table of capacity slots
// grows: half full while it is smaller than bigTable, 7/8 full from then
// on. See "Per-record path" in the package doc for why.
func growAt(capacity int) int {
	if capacity < bigTable {
		return capacity / 2
	}
	return capacity / 8 * 7
}

// bigTable is the capacity from which a table grows at 7/8 rather than 1/2
// full: a subtask's 64 key groups of this size hold 4 MiB of 16-byte
// entries, more than the caches of the machine in docs/perf.md keep close.
const bigTable = 4096

// capacityFor returns the smallest table capacity that holds n entries
// without growing.
func capacityFor(n int) int {
	c := pageSlots
	for growAt(c) <= n {
		c *= 2
	}
	return c
}

// all calls yield for every entry in slot order until yield returns false.
// Read-only.
func (t *table[K, V]) all(yield func(K, V) bool) {
	for ri := range t.dir {
		r := &t.dir[ri]
		for w, word := range r.occ {
			for word != 0 {
				si := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				s := r.slot(uint64(si))
				if !yield(s.key, s.val) {
					return
				}
			}
		}
	}
}
