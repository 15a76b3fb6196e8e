package cow

import (
	"fmt"
	"iter"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/keygroups"
)

// Stats counts the work the Map has done; tests use it to assert costs
// without timing anything.
type Stats struct {
	Freezes         uint64 // Freeze calls
	KeyGroupsFrozen uint64 // table headers captured by Freeze: all its work
	PagesCopied     uint64 // copy-on-write page copies (begun: see ChunksCopied), CopyAhead's included
	PagesAhead      uint64 // page copies CopyAhead made
	ChunksCopied    uint64 // chunks copied into partial pages, by writes and by completing them
	PagesCompleted  uint64 // partial pages completed by CopyAhead, or copied whole after a freeze caught them partial
	DirsCopied      uint64 // copy-on-write directory copies
	DirsReused      uint64 // directories taken from the free list
	PagesAllocated  uint64 // pages taken from the Go heap, or from a slab
	Slabs           uint64 // slabs allocated (see newPage)
	SlabBytes       uint64 // their size, in all
	SlabsAdvised    uint64 // slabs advised for huge pages (the madvise call succeeded)
	PagesReused     uint64 // pages taken from the free list
	PagesRetired    int    // pages kept only for live snapshots, now
	PagesFree       int    // pages on the free list, now
	LiveSnapshots   int    // snapshots not yet seen released, now
}

// Stats returns the Map's counters.
func (m *Map[K, V]) Stats() Stats {
	s := m.stats
	s.PagesRetired, s.PagesFree, s.LiveSnapshots = len(m.pages.retired), len(m.pages.free), len(m.live)
	return s
}

// Snapshot is a frozen, read-only view of a Map at one version. Its methods
// may be called from any goroutine, concurrently with each other and with
// the Map's owner, until Release.
type Snapshot[K comparable, V any] struct {
	version  uint64
	kgs      keygroups.Range
	maxP     int
	hash     func(K) uint64
	keys     Codec[K]
	vals     Codec[V]
	varint   varintForm
	tables   []table[K, V] // frozen headers; pages they reach are never written
	shared   *shared
	released atomic.Bool
}

// Freeze takes a snapshot of every key group and returns it. Its cost is one
// table-header copy per key group, independent of the number of entries:
// the pages stay shared, and the owner copies a page (and a key group's
// directory) the first time it writes to it afterwards.
func (m *Map[K, V]) Freeze() *Snapshot[K, V] {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if m.shared.releases.Load() != m.seen {
		m.pruneLive() // O(live snapshots): keeps m.live short when nothing is written
	}
	// NB: the headers come from a snapshot pruned since the last Freeze
	// when there is one: a fresh allocation of a few KiB here took tens of
	// µs in a checkpointing job (new spans, GC assists), all of it inside
	// the synchronous part of the checkpoint.
	tables := m.spare
	m.spare = nil
	if cap(tables) < len(m.tables) {
		tables = make([]table[K, V], len(m.tables))
	}
	tables = tables[:len(m.tables)]
	copy(tables, m.tables)
	s := &Snapshot[K, V]{
		version: m.version, kgs: m.kgs, maxP: int(m.maxP),
		hash: m.hash, keys: m.keys, vals: m.vals, varint: m.varint,
		tables: tables,
		shared: m.shared,
	}
	m.required = m.version
	m.version++
	m.ahead.ver, m.ahead.table, m.ahead.page = m.version, 0, 0
	m.partial = m.partial[:0] // now frozen: the ahead scan finds them
	m.live = append(m.live, s)
	m.shared.refs.Add(1)
	m.stats.Freezes++
	m.stats.KeyGroupsFrozen += uint64(len(m.tables))
	return s
}

// Version is the snapshot's version: it holds every write made before the
// Freeze that returned it, and none after.
func (s *Snapshot[K, V]) Version() uint64 { return s.version }

// KeyGroups is the range of key groups in the snapshot.
func (s *Snapshot[K, V]) KeyGroups() keygroups.Range { return s.kgs }

// Release declares the snapshot unused, so the pages only it still needs can
// be reused. Call it once the snapshot has been written out; the snapshot
// must not be read afterwards. Safe from any goroutine; idempotent.
func (s *Snapshot[K, V]) Release() {
	if s.released.CompareAndSwap(false, true) {
		s.shared.releases.Add(1) // NB: publishes all reads of s before the owner reuses its pages
		s.shared.unref()
	}
}

func (s *Snapshot[K, V]) table(kg int) (*table[K, V], error) {
	if s.released.Load() {
		return nil, fmt.Errorf("%w: version %d", ErrReleased, s.version)
	}
	if !s.kgs.Contains(kg) {
		return nil, fmt.Errorf("%w: key group %d outside %v", ErrKeyGroupNotOwned, kg, s.kgs)
	}
	return &s.tables[kg-s.kgs.Start], nil
}

// Len is the number of entries in key group kg at the freeze (0 if not
// held or released).
func (s *Snapshot[K, V]) Len(kg int) int {
	t, err := s.table(kg)
	if err != nil {
		return 0
	}
	return t.n
}

// ChangedSince reports whether key group kg was written (Put, Upsert,
// Delete, restore after the first Freeze) after the snapshot of version v
// was taken and before this one. v = 0 means the initial state: empty, or as
// restored by LoadKeyGroup before the first Freeze. An incremental
// checkpoint can reference kg's previous blob when this is false. Key groups
// not held report true.
func (s *Snapshot[K, V]) ChangedSince(kg int, v uint64) bool {
	t, err := s.table(kg)
	return err != nil || t.written > v
}

// Get returns k's value at the freeze.
func (s *Snapshot[K, V]) Get(k K) (V, bool) {
	var zero V
	h := s.hash(k)
	t, err := s.table(keygroups.Of(h, s.maxP))
	if err != nil {
		return zero, false
	}
	i, ok := t.find(h, k)
	if !ok {
		return zero, false
	}
	return t.slotAt(i).val, true
}

// All iterates over key group kg's entries at the freeze.
func (s *Snapshot[K, V]) All(kg int) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if t, err := s.table(kg); err == nil {
			t.all(yield)
		}
	}
}

// pagePool holds the pages the live map no longer points to: retired ones
// that a live snapshot may still read, and free ones ready for reuse.
type pagePool[K comparable, V any] struct {
	retired []retiredPage[K, V]
	free    []*page[K, V]
	// Directories no snapshot or table uses, for copy-on-write directory
	// copies: allocating those fresh cost a page fault per few KiB in the
	// first milliseconds after every freeze. A free directory still points
	// at the pages it held until it is overwritten; there are at most
	// maxFreeDirs of them.
	dirs [][]pageRef[K, V]
	// slab holds the pages of the current slab not yet handed out, and
	// slabs the address ranges of all slabs (see newPage).
	slab  []page[K, V]
	slabs []addrRange
}

// retiredPage was visible, unchanged, to the snapshots with versions in
// [from, until).
type retiredPage[K comparable, V any] struct {
	p           *page[K, V]
	from, until uint64
}

// allocPage returns a page with unspecified contents.
func (m *Map[K, V]) allocPage() *page[K, V] {
	if len(m.pages.free) == 0 && (m.retiredDirty || m.shared.releases.Load() != m.seen) {
		m.reclaim()
	}
	if n := len(m.pages.free); n > 0 {
		p := m.pages.free[n-1]
		m.pages.free = m.pages.free[:n-1]
		m.stats.PagesReused++
		return p
	}
	m.stats.PagesAllocated++
	return m.newPage()
}

// drop is called when the live map stops pointing to page r (and to its
// base, if it is partial).
func (m *Map[K, V]) drop(r pageRef[K, V]) {
	if r.base != nil {
		m.dropBase(r.base)
	}
	if r.ver <= m.required {
		m.pages.retired = append(m.pages.retired, retiredPage[K, V]{p: r.p, from: r.ver, until: m.version})
		return
	}
	m.freePage(r.p)
}

// dropBase is called when the live map stops reading from the base of a
// partial page. The base was frozen at some version before the partial
// page's, which the reference does not keep; retiring it as visible to
// every snapshot before the current version is safe, and frees it once
// the snapshots that could see it are released.
func (m *Map[K, V]) dropBase(base *page[K, V]) {
	if m.required != 0 {
		m.pages.retired = append(m.pages.retired, retiredPage[K, V]{p: base, from: 0, until: m.version})
		return
	}
	m.freePage(base)
}

// reclaim forgets released snapshots, lowers m.required to the newest live
// one, and frees the retired pages no live snapshot can see. It runs on the
// owner, amortised into page allocation and copying, never in Freeze.
func (m *Map[K, V]) reclaim() {
	m.pruneLive()
	m.retiredDirty = false
	kept := m.pages.retired[:0]
	for _, r := range m.pages.retired {
		if m.visible(r) {
			kept = append(kept, r)
		} else {
			m.freePage(r.p)
		}
	}
	clear(m.pages.retired[len(kept):])
	m.pages.retired = kept
}

// pruneLive forgets released snapshots and lowers m.required to the newest
// live one. Retired pages are freed later, by reclaim.
func (m *Map[K, V]) pruneLive() {
	m.seen = m.shared.releases.Load()
	live, released := m.live[:0], m.released[:0]
	m.required = 0
	for _, s := range m.live {
		if s.released.Load() {
			released = append(released, s)
			continue
		}
		live = append(live, s)
		m.required = max(m.required, s.version)
	}
	if len(released) == 0 {
		return
	}
	m.retiredDirty = true
	clear(m.live[len(live):])
	m.live = live
	for _, s := range released {
		m.freeDirs(s, released)
	}
	// NB: a released snapshot is not read again (Release's contract), so
	// its headers can be reused; cleared, they hold no pages.
	for _, s := range released {
		if m.spare == nil {
			m.spare = s.tables
			clear(m.spare)
		}
		s.tables = nil
	}
	clear(released)
	m.released = released[:0]
}

// freeDirs puts on the free list the directories of released snapshot s
// that neither the live tables nor a live snapshot use. A directory shared
// by several released snapshots is freed with the first of them.
func (m *Map[K, V]) freeDirs(s *Snapshot[K, V], released []*Snapshot[K, V]) {
	same := func(a, b []pageRef[K, V]) bool { return cap(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b) }
next:
	for i := range s.tables {
		d := s.tables[i].dir
		if cap(d) == 0 || same(d, m.tables[i].dir) {
			continue
		}
		for _, l := range m.live {
			if same(d, l.tables[i].dir) {
				continue next
			}
		}
		for _, r := range released {
			if r == s {
				break
			}
			if same(d, r.tables[i].dir) {
				continue next // freed with r
			}
		}
		if len(m.pages.dirs) < maxFreeDirs(len(m.tables)) {
			m.pages.dirs = append(m.pages.dirs, d)
		}
	}
}

// maxFreeDirs bounds the directory free list: two per key group covers a
// checkpoint's copies with one snapshot still being written out.
func maxFreeDirs(keyGroups int) int { return 2 * keyGroups }

// allocDir returns a directory of n entries, from the free list if one
// there is large enough. Its contents are the caller's to set.
func (m *Map[K, V]) allocDir(n int) []pageRef[K, V] {
	for len(m.pages.dirs) > 0 {
		last := len(m.pages.dirs) - 1
		d := m.pages.dirs[last]
		m.pages.dirs[last] = nil
		m.pages.dirs = m.pages.dirs[:last]
		if cap(d) >= n {
			m.stats.DirsReused++
			return d[:n]
		}
		// Smaller than this table's: left from before a table grew.
	}
	return make([]pageRef[K, V], n)
}

func (m *Map[K, V]) visible(r retiredPage[K, V]) bool {
	for _, s := range m.live {
		if s.version >= r.from && s.version < r.until {
			return true
		}
	}
	return false
}

// touchPage starts the current interval for t's page pi. When a live
// snapshot can see the page, it copies t's directory (if a snapshot shares
// it too) and makes the page private: whole, or (for a write to slot si)
// as a partial copy holding si's chunk. Either way it clears the page's
// dirty bitmap. A frozen page that is itself partial is always copied
// whole: its data has two sources.
func (m *Map[K, V]) touchPage(t *table[K, V], pi, si uint64, whole bool) {
	if m.shared.releases.Load() != m.seen {
		m.reclaim()
	}
	if t.dir[pi].ver <= m.required {
		if t.dirVer <= m.required {
			dir := m.allocDir(len(t.dir))
			copy(dir, t.dir)
			t.dir, t.dirVer = dir, m.version
			m.stats.DirsCopied++
		}
		r := &t.dir[pi]
		old := *r
		p := m.allocPage()
		m.stats.PagesCopied++
		switch {
		case old.base != nil:
			// NB: rare: a page is left partial across a freeze only if
			// its task had no idle step to complete it in.
			r.p, r.base, r.have = p, old.base, old.have
			copyChunks(p, old.p, old.have)
			m.fill(r)
			m.stats.PagesCompleted++
			m.drop(pageRef[K, V]{p: old.p, ver: old.ver}) // the base was dropped by fill
		case whole:
			*p = *old.p
			r.p = p
			m.drop(old)
		default:
			c := uint64(1) << (si >> chunkShift)
			copyChunks(p, old.p, c)
			r.p, r.base, r.have = p, old.p, c // NB: old.p stays in use, as the base
			m.stats.ChunksCopied++
			m.partial = append(m.partial, pageAt[K, V]{t, uint32(pi)})
		}
	}
	r := &t.dir[pi]
	r.ver, r.dirty = m.version, [occWords]uint64{}
}

// copyChunks copies the chunks in set from src to dst, a run of adjacent
// chunks at a time.
func copyChunks[K comparable, V any](dst, src *page[K, V], set uint64) {
	for set != 0 {
		lo := uint64(bits.TrailingZeros64(set))
		n := uint64(bits.TrailingZeros64(^(set >> lo)))
		a, b := lo<<chunkShift, (lo+n)<<chunkShift
		copy(dst.slots[a:b], src.slots[a:b])
		set &^= (1<<n - 1) << lo
	}
}

// fill gives partial page r, whose page is private, every chunk it does not
// have yet, and drops its base.
func (m *Map[K, V]) fill(r *pageRef[K, V]) {
	missing := allChunks &^ r.have
	copyChunks(r.p, r.base, missing)
	m.stats.ChunksCopied += uint64(bits.OnesCount64(missing))
	m.dropBase(r.base)
	r.base, r.have = nil, 0
}

// complete fills writable partial page r (see fill).
func (m *Map[K, V]) complete(r *pageRef[K, V]) {
	m.fill(r)
	m.stats.PagesCompleted++
}

// CopyAhead makes up to n of the page copies the writes after the last
// Freeze are expected to make, before they make them, and returns how many
// it made; 0 means there is nothing to do now (later writes may leave
// partial pages for it again). The expected pages are those written in the
// interval the newest snapshot froze and still shared with it; it also
// completes the partial pages (see pageRef) the writes have left, so that
// their reads no longer go through the base and their next writes copy
// nothing. A task calls
// it when it has no records waiting: copied then, a page does not delay
// the record whose write would otherwise have copied it, nor the records
// behind that one.
//
// A page copied ahead and then not written costs a page until the
// snapshot is released, and nothing else: its dirty bitmap stays empty, so
// the next snapshot's deltas and ChangedSince are as if it had not been
// copied. Once the newest snapshot is released, writes copy nothing, and
// CopyAhead only completes partial pages.
func (m *Map[K, V]) CopyAhead(n int) int {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if m.shared.releases.Load() != m.seen {
		m.reclaim()
	}
	made := 0
	if m.ahead.ver == m.version {
		made = m.copyAheadFrozen(n)
	}
	for made < n && len(m.partial) > 0 {
		last := len(m.partial) - 1
		at := m.partial[last]
		m.partial = m.partial[:last]
		// NB: the table may have been rebuilt since: then the page at that
		// index is a fresh one, not partial, and is passed over.
		if at.page < uint32(len(at.t.dir)) {
			if r := &at.t.dir[at.page]; r.base != nil && r.ver == m.version {
				m.complete(r)
				made++
			}
		}
	}
	return made
}

// copyAheadFrozen is CopyAhead's scan of the frozen pages, from where it
// last stopped.
func (m *Map[K, V]) copyAheadFrozen(n int) int {
	v := m.version - 1 // the interval the newest snapshot froze
	if m.required != v {
		m.ahead.ver = 0
		return 0
	}
	made := 0
	for ; m.ahead.table < len(m.tables); m.ahead.table, m.ahead.page = m.ahead.table+1, 0 {
		t := &m.tables[m.ahead.table]
		for m.ahead.page < len(t.dir) {
			pi := m.ahead.page
			m.ahead.page++
			r := &t.dir[pi]
			switch {
			case r.ver == m.version && r.base != nil:
				m.complete(r) // made partial by a write before the scan came here
			case r.ver == v && r.dirty != [occWords]uint64{} || r.ver <= v && r.base != nil:
				copies := m.stats.PagesCopied
				m.touchPage(t, uint64(pi), 0, true)
				if m.stats.PagesCopied == copies {
					m.ahead.ver = 0 // the snapshot was released meanwhile
					return made
				}
				m.stats.PagesAhead++
			default:
				continue
			}
			if made++; made == n {
				return made
			}
		}
	}
	m.ahead.ver = 0
	return made
}

// grow doubles t's capacity (or gives an empty table its first page) and
// re-inserts every entry into fresh pages.
func (m *Map[K, V]) grow(t *table[K, V]) {
	m.rebuild(t, max(pageSlots, 2*t.capacity()))
}

// rebuild moves t's entries into new pages of the given capacity.
func (m *Map[K, V]) rebuild(t *table[K, V], capacity int) {
	old := t.dir
	nt := table[K, V]{
		dir:     make([]pageRef[K, V], capacity/pageSlots),
		dirVer:  m.version,
		written: t.written,
		deleted: t.deleted, deletedVer: t.deletedVer, deltaLost: t.deltaLost,
	}
	nt.setGeometry(capacity)
	for i := range nt.dir {
		p := m.allocPage()
		*p = page[K, V]{}
		nt.dir[i] = pageRef[K, V]{p: p, ver: m.version}
	}
	for _, r := range old {
		current := r.ver == m.version // dirty bits are this interval's
		for w, word := range r.occ {
			for word != 0 {
				si := uint64(w*64 + bits.TrailingZeros64(word))
				word &= word - 1
				s := r.slot(si)
				i := nt.insertNew(m.hash(s.key), s.key, s.val)
				if current && r.isDirty(si) {
					nt.dir[i>>pageShift].setDirty(i & pageMask)
				}
			}
		}
	}
	if invariants.Enabled && nt.n != t.n {
		panic(invariants.Failf("cow: rebuild moved %d of %d entries", nt.n, t.n))
	}
	for _, r := range old {
		m.drop(r)
	}
	m.slots += nt.capacity() - t.capacity()
	*t = nt
}

// insertNew adds an entry known to be absent to a table whose pages are all
// private and which has room, and returns its index.
func (t *table[K, V]) insertNew(h uint64, k K, v V) uint64 {
	i := t.home(h)
	for t.occupied(i) {
		i = (i + 1) & t.mask
	}
	r := &t.dir[i>>pageShift]
	r.setOccupied(i & pageMask)
	r.p.slots[i&pageMask] = slot[K, V]{key: k, val: v}
	t.n++
	return i
}
