package cow

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"runtime"
	"unsafe"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/internal/prefetch"
	"github.com/ringflow/ringflow/keygroups"
)

// Sentinel errors; the returned errors wrap them with the details.
var (
	// ErrKeyGroupNotOwned reports a key, or a serialised key group, whose key
	// group lies outside the Map's range.
	ErrKeyGroupNotOwned = errors.New("cow: key group not owned by this map")
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("cow: invalid config")
	// ErrNoCodec reports serialisation on a Map configured without codecs.
	ErrNoCodec = errors.New("cow: no key or value codec configured")
	// ErrCorrupt reports serialised key-group bytes that fail validation.
	ErrCorrupt = errors.New("cow: corrupt key group data")
	// ErrNotEmpty reports a restore into a key group that already has entries.
	ErrNotEmpty = errors.New("cow: key group not empty")
	// ErrReleased reports use of a released Snapshot.
	ErrReleased = errors.New("cow: snapshot released")
)

// Config describes a Map.
type Config[K comparable, V any] struct {
	// Hash hashes a key; required. The key group of k is
	// Hash(k) % MaxParallelism, so it must be the hash the job partitions
	// by (keygroups.HashUint64, HashString, ...). It is called by Get, Put,
	// Upsert and Delete, and by growth, deletion and restore; the *Hashed
	// methods take the hash from the caller instead.
	Hash func(K) uint64
	// MaxParallelism is the number of key groups; 0 means
	// keygroups.DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups is the range of key groups this Map holds (the subtask's
	// range); the zero Range means all of [0, MaxParallelism).
	KeyGroups keygroups.Range
	// KeyCodec and ValueCodec serialise entries for AppendKeyGroup and
	// LoadKeyGroup. Optional if the Map is never written out.
	KeyCodec   Codec[K]
	ValueCodec Codec[V]
	// HugePages advises the Map's slabs for transparent huge pages, and
	// takes pages that hold pointers from slabs too once its tables are
	// large (see newPage): faster updates at millions of keys, for up to
	// one slab of memory held unused.
	HugePages bool
}

// Map is keyed state for one subtask, stored per key group, with
// copy-on-write snapshots. See the package documentation for the design.
//
// A Map is owned by one goroutine (the task's): all its methods must be
// called from it. Snapshots may be read and released from any goroutine.
type Map[K comparable, V any] struct {
	hash   func(K) uint64
	keys   Codec[K]
	vals   Codec[V]
	varint varintForm // how snapshots write pages (varintFormOf)
	maxP   uint64
	kgMask uint64 // maxP-1 if maxP is a power of two
	pow2   bool
	huge   bool // Config.HugePages
	// mapped: pages come from slabs mapped outside the Go heap (see
	// newPage), which owner's reference keeps.
	mapped bool
	owner  *ownerRef
	kgs    keygroups.Range
	tables []table[K, V] // tables[kg-kgs.Start]
	n      int
	slots  int // capacity of all tables

	prefetchBuf []unsafe.Pointer
	// prefetchFrom: Prefetch and PrefetchAhead do nothing while the
	// tables take fewer bytes than this, a core's L2 cache: while they
	// stay in the caches, prefetching only costs time.
	prefetchFrom uintptr

	version  uint64 // current version; pages written now get this version
	required uint64 // highest snapshot version that may still be read; 0: none
	pages    pagePool[K, V]
	live     []*Snapshot[K, V] // not yet seen released
	spare    []table[K, V]     // headers of a pruned snapshot, for the next Freeze
	released []*Snapshot[K, V] // pruneLive's scratch
	shared   *shared
	seen     uint64 // shared.releases at the last pruneLive
	// retiredDirty: a snapshot was pruned since reclaim last scanned the
	// retired pages.
	retiredDirty bool
	// ahead is CopyAhead's place: the next table and page it looks at, in
	// the interval of version ver (0: nothing to copy ahead).
	ahead struct {
		ver         uint64
		table, page int
	}
	// partial lists the pages writes have made partial in this interval,
	// for CopyAhead to complete (some may have been completed since).
	partial []pageAt[K, V]
	// scratch holds a delta being decoded, reused by the next.
	scratch delta[K, V]
	stats   Stats
}

// pageAt names page index page of table t (a table of Map.tables, which
// never moves).
type pageAt[K comparable, V any] struct {
	t    *table[K, V]
	page uint32
}

// New returns an empty Map.
func New[K comparable, V any](cfg Config[K, V]) (*Map[K, V], error) {
	if cfg.Hash == nil {
		return nil, fmt.Errorf("%w: Hash is nil", ErrConfig)
	}
	maxP := cfg.MaxParallelism
	if maxP == 0 {
		maxP = keygroups.DefaultMaxParallelism
	}
	if err := keygroups.ValidateMaxParallelism(maxP); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	r := cfg.KeyGroups
	if r == (keygroups.Range{}) {
		r = keygroups.Range{Start: 0, End: maxP}
	}
	if r.Start < 0 || r.End > maxP || r.Len() < 1 {
		return nil, fmt.Errorf("%w: key groups %v not a non-empty part of [0,%d)", ErrConfig, r, maxP)
	}
	m := &Map[K, V]{
		hash: cfg.Hash, keys: cfg.KeyCodec, vals: cfg.ValueCodec,
		varint: varintFormOf(cfg.KeyCodec, cfg.ValueCodec),
		maxP:   uint64(maxP), pow2: maxP&(maxP-1) == 0, huge: cfg.HugePages, kgs: r,
		tables:       make([]table[K, V], r.Len()),
		spare:        make([]table[K, V], r.Len()),
		version:      1,
		shared:       new(shared),
		prefetchFrom: uintptr(prefetch.L2Bytes()),
	}
	m.shared.refs.Store(1)
	m.owner = &ownerRef{shared: m.shared}
	if pointerFree(reflect.TypeFor[page[K, V]]()) && canMapSlabs {
		m.mapped = true
		// NB: a Map dropped without Close still gives its slabs back,
		// once the collector finds it unreachable.
		runtime.AddCleanup(m, (*ownerRef).drop, m.owner)
	}
	// NB: the first Freeze captures its headers into spare; written once
	// here, its pages are in place by then. Fresh pages cost a fault each
	// (in a VM, 10–50 µs for the first Freeze's few KiB), which would
	// otherwise fall inside that checkpoint's synchronous part.
	copy(m.spare, m.tables)
	// So is the free list of directories, which the first Freeze after a
	// Release fills.
	m.pages.dirs = make([][]pageRef[K, V], maxFreeDirs(r.Len()))
	clear(m.pages.dirs)
	m.pages.dirs = m.pages.dirs[:0]
	if m.pow2 {
		m.kgMask = m.maxP - 1
	}
	return m, nil
}

// Close gives back the memory of a Map no longer used: its mapped slabs
// (see newPage) are unmapped once every Snapshot of it is released too.
// The Map must not be used after Close; its Snapshots stay readable until
// they are released. Close is idempotent; a Map dropped without it gives
// its memory back when the collector finds it unreachable.
func (m *Map[K, V]) Close() {
	if m.owner.done.Load() {
		return
	}
	// NB: nothing reachable may point into a slab once it is unmapped.
	m.tables, m.spare = nil, nil
	m.pages, m.scratch = pagePool[K, V]{}, delta[K, V]{}
	clear(m.live)
	clear(m.released)
	m.live, m.released, m.partial = nil, nil, nil
	m.owner.drop()
}

// KeyGroups is the range of key groups the Map holds.
func (m *Map[K, V]) KeyGroups() keygroups.Range { return m.kgs }

// MaxParallelism is the total number of key groups.
func (m *Map[K, V]) MaxParallelism() int { return int(m.maxP) }

// KeyGroupOf returns the key group of a key hash.
func (m *Map[K, V]) KeyGroupOf(h uint64) int {
	if m.pow2 {
		return int(h & m.kgMask)
	}
	return int(h % m.maxP)
}

// Len is the number of entries in all key groups.
func (m *Map[K, V]) Len() int { return m.n }

// KeyGroupLen is the number of entries in key group kg (0 if not owned).
func (m *Map[K, V]) KeyGroupLen(kg int) int {
	if !m.kgs.Contains(kg) {
		return 0
	}
	return m.tables[kg-m.kgs.Start].n
}

// Version is the current version: the version the next Freeze will give its
// snapshot. It starts at 1.
func (m *Map[K, V]) Version() uint64 { return m.version }

// table returns the table of hash h's key group, or nil if not owned.
func (m *Map[K, V]) table(h uint64) *table[K, V] {
	var kg uint64
	if m.pow2 {
		kg = h & m.kgMask
	} else {
		kg = h % m.maxP
	}
	i := kg - uint64(m.kgs.Start)
	if i >= uint64(len(m.tables)) {
		return nil
	}
	return &m.tables[i]
}

func (m *Map[K, V]) notOwned(h uint64) error {
	return fmt.Errorf("%w: key group %d (hash %#x) outside %v", ErrKeyGroupNotOwned, m.KeyGroupOf(h), h, m.kgs)
}

func (m *Map[K, V]) checkHash(h uint64, k K) {
	if got := m.hash(k); got != h {
		panic(invariants.Failf("cow: caller's hash %#x for key %v, Config.Hash gives %#x", h, k, got))
	}
}

// Get returns k's value and whether it is present.
func (m *Map[K, V]) Get(k K) (V, bool) { return m.GetHashed(m.hash(k), k) }

// GetHashed is Get with k's hash supplied by the caller; h must equal
// Config.Hash(k) (checked when invariants are enabled).
func (m *Map[K, V]) GetHashed(h uint64, k K) (V, bool) {
	if invariants.Enabled {
		m.checkHash(h, k)
	}
	var v V
	found := false
	if t := m.table(h); t != nil && len(t.dir) != 0 {
		// NB: the probe loop is written out here and in UpsertHashed
		// rather than calling find: it keeps the per-record path free of
		// calls.
		for i := t.home(h); ; i = (i + 1) & t.mask {
			r := &t.dir[i>>pageShift]
			si := i & pageMask
			if !r.occupied(si) {
				break
			}
			if s := r.slot(si); s.key == k {
				v, found = s.val, true
				break
			}
		}
	}
	runtime.KeepAlive(m) // see keepAlive in slab.go
	return v, found
}

// Prefetching pays only for tables at least as large as a core's L2 cache
// (Map.prefetchFrom). In the keyed-count pipeline on the machine of
// docs/perf.md (1 MiB of L2 per core), prefetching made 1k and 20k keys at
// parallelism 1 (512 and 1,020 KiB of tables) 13% and 5% slower. Above, it
// pays: at 100k keys and parallelism 1 (4 MiB), PrefetchAhead ran 8%
// faster than a pass of loads over the whole batch, itself 13% faster than
// none, and at 1M keys 15% faster than that pass; the window at
// parallelism 2 (3 MiB of tables a pane) lost 32% without it. Tables of
// 2 MiB sized for 1 MiB of entries (they grow half full below bigTable
// slots) are a toss-up: keyed-count at 100k keys and parallelism 2 ran 4%
// faster without the prefetches, but at a tenth of that rate, where one
// worker carries both subtasks' state, its p99 latency rose from 2.5 to
// 3.5 µs.

// Prefetch asks the CPU to load, for each hash, the first slot a lookup of
// that hash probes. Called on a few hashes before their GetHashed or
// UpsertHashed calls, it lets the CPU overlap their cache and TLB misses
// instead of taking them one at a time. It has no other effect, and does
// nothing while the Map's tables are small enough to stay in the caches
// (smaller than a core's L2 cache).
//
// A prefetch that finds no free miss buffer is dropped, so a batch much
// larger than PrefetchGroup is better walked with PrefetchAhead.
func (m *Map[K, V]) Prefetch(hashes []uint64) {
	if !m.prefetchPays() {
		return
	}
	m.prefetch(hashes)
}

// PrefetchGroup is how many slots PrefetchAhead asks for at a time: about
// as many misses as a core keeps in flight. BenchmarkPrefetchGroups at 1M
// keys finds groups of 16, 32 and 64 alike (26.6, 24.7 and 24.7 ns per
// update), and a prefetch of a whole 1,024-hash batch before its updates
// slower (29.1 ns).
const PrefetchGroup = 32

// PrefetchAhead is Prefetch spread over a loop that looks up hashes[0],
// hashes[1], … in turn: called before each lookup, with that lookup's
// index i, it asks for the slots of the next group of PrefetchGroup hashes
// whenever i starts a group (the first two groups at i == 0), so that a
// group's misses are in flight while the group before it is updated.
func (m *Map[K, V]) PrefetchAhead(hashes []uint64, i int) {
	if i%PrefetchGroup == 0 {
		m.prefetchAhead(hashes, i)
	}
}

func (m *Map[K, V]) prefetchAhead(hashes []uint64, i int) {
	if m.prefetchPays() {
		m.prefetchGroupAhead(hashes, i, PrefetchGroup)
	}
}

// prefetchGroupAhead prefetches, whatever the Map's size, the hashes
// aheadRange names for lookup i.
func (m *Map[K, V]) prefetchGroupAhead(hashes []uint64, i, group int) {
	if from, to := aheadRange(i, len(hashes), group); from < to {
		m.prefetch(hashes[from:to])
	}
}

// aheadRange returns the hashes [from, to) of a batch of n to prefetch
// before lookup i: the group after the one that starts at i, both groups
// at i == 0, none unless i starts a group.
func aheadRange(i, n, group int) (from, to int) {
	if i%group != 0 {
		return 0, 0
	}
	from = min(i+group, n)
	if i == 0 {
		from = 0
	}
	return from, min(i+2*group, n)
}

// prefetchPays reports whether the Map's tables outgrow a core's L2 cache.
func (m *Map[K, V]) prefetchPays() bool {
	return uintptr(m.slots)*unsafe.Sizeof(slot[K, V]{}) >= m.prefetchFrom
}

// prefetch is Prefetch whatever the Map's size.
func (m *Map[K, V]) prefetch(hashes []uint64) {
	// Two passes. The first finds each home slot (the tables and
	// directories are small and mostly cached); the second prefetches the
	// found slots (both lines, if a slot straddles two), so that their
	// misses are in flight at once.
	slots := m.homeSlots(hashes)
	prefetch.Spans(slots, unsafe.Sizeof(slot[K, V]{}))
	m.doneSlots(slots)
}

// homeSlots returns the address of the home slot of each hash the Map
// owns, in a buffer the Map reuses; give it back with doneSlots.
func (m *Map[K, V]) homeSlots(hashes []uint64) []unsafe.Pointer {
	slots := m.prefetchBuf[:0]
	for _, h := range hashes {
		if t := m.table(h); t != nil && len(t.dir) != 0 {
			i := t.home(h)
			slots = append(slots, unsafe.Pointer(t.dir[i>>pageShift].slot(i&pageMask)))
		}
	}
	return slots
}

// doneSlots gives back homeSlots' buffer.
func (m *Map[K, V]) doneSlots(slots []unsafe.Pointer) {
	clear(slots) // NB: do not keep pages reachable
	m.prefetchBuf = slots[:0]
}

// Put sets k's value.
func (m *Map[K, V]) Put(k K, v V) error { return m.PutHashed(m.hash(k), k, v) }

// PutHashed is Put with k's hash supplied; see GetHashed.
func (m *Map[K, V]) PutHashed(h uint64, k K, v V) error {
	p, err := m.UpsertHashed(h, k)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Upsert returns a pointer to k's value, inserting the zero value first if k
// is absent: `p, err := m.Upsert(k); *p += 1` is one probe.
//
// NB: the pointer is valid only until the next call that mutates the Map or
// Freeze: after Freeze the page it points into belongs to the snapshot, and
// writing through it would change the snapshot. It points outside the Go
// heap for plain data, so it does not keep the Map reachable: the caller
// must (see keepAlive in slab.go).
func (m *Map[K, V]) Upsert(k K) (*V, error) { return m.UpsertHashed(m.hash(k), k) }

// UpsertHashed is Upsert with k's hash supplied; see GetHashed. This is the
// per-record path: no allocation and no indirect call unless the key
// group's table grows or a page must be copied.
func (m *Map[K, V]) UpsertHashed(h uint64, k K) (*V, error) {
	p, _, err := m.UpsertHashedNew(h, k)
	return p, err
}

// UpsertHashedNew is UpsertHashed that also reports whether k was inserted
// (its value is the zero value) rather than found.
func (m *Map[K, V]) UpsertHashedNew(h uint64, k K) (*V, bool, error) {
	if invariants.Enabled {
		m.checkHash(h, k)
	}
	t := m.table(h)
	if t == nil {
		return nil, false, m.notOwned(h)
	}
	t.written = m.version
	if len(t.dir) != 0 {
		for i := t.home(h); ; i = (i + 1) & t.mask {
			r := &t.dir[i>>pageShift]
			si := i & pageMask
			if !r.occupied(si) {
				break
			}
			if s := r.slot(si); s.key == k {
				if r.ver != m.version || r.base != nil {
					// The first write in this interval, or to a partial page.
					return &m.touchSlot(t, i).val, false, nil
				}
				r.setDirty(si)
				return &s.val, false, nil
			}
		}
	}
	return m.insert(t, h, k), true, nil
}

// insert adds absent key k with the zero value and returns its value slot.
func (m *Map[K, V]) insert(t *table[K, V], h uint64, k K) *V {
	if t.n >= t.growAt {
		m.grow(t)
	}
	i, _ := t.find(h, k)
	s := m.touchSlot(t, i)
	t.dir[i>>pageShift].setOccupied(i & pageMask)
	s.key = k
	t.n++
	m.n++
	return &s.val
}

// touchSlot returns slot i of t, marked written in this interval, after
// making its page (and t's directory) private to the live map.
func (m *Map[K, V]) touchSlot(t *table[K, V], i uint64) *slot[K, V] {
	pi, si := i>>pageShift, i&pageMask
	if t.dir[pi].ver != m.version {
		m.touchPage(t, pi, si, false)
	}
	r := &t.dir[pi]
	if invariants.Enabled && (r.ver <= m.required || t.dirVer <= m.required) {
		panic(invariants.Failf("cow: writing page v%d dir v%d with snapshot v%d live", r.ver, t.dirVer, m.required))
	}
	if r.base != nil && r.have&(1<<(si>>chunkShift)) == 0 {
		m.fill(r) // the page's second chunk: all the rest at once
	}
	r.setDirty(si)
	return slotOf(r.p, si)
}

// Delete removes k and reports whether it was present.
func (m *Map[K, V]) Delete(k K) bool { return m.DeleteHashed(m.hash(k), k) }

// DeleteHashed is Delete with k's hash supplied; see GetHashed.
func (m *Map[K, V]) DeleteHashed(h uint64, k K) bool {
	if invariants.Enabled {
		m.checkHash(h, k)
	}
	t := m.table(h)
	if t == nil {
		return false
	}
	i, found := t.find(h, k)
	if !found {
		runtime.KeepAlive(m) // see keepAlive in slab.go
		return false
	}
	t.written = m.version
	m.removeAt(t, i)
	return true
}

// removeAt empties slot i and closes the gap by shifting later entries of
// the probe run back (backward-shift deletion), so lookups never need
// tombstones. Every entry keeps the invariant that the slots from its home
// to its position are occupied.
func (m *Map[K, V]) removeAt(t *table[K, V], i uint64) {
	m.logDelete(t, t.slotAt(i).key)
	for j := (i + 1) & t.mask; t.occupied(j); j = (j + 1) & t.mask {
		s := t.slotAt(j)
		dist := (j - t.home(m.hash(s.key))) & t.mask
		if dist >= (j-i)&t.mask {
			*m.touchSlot(t, i) = *s // NB: a moved entry counts as written
			i = j
		}
	}
	*m.touchSlot(t, i) = slot[K, V]{}
	t.dir[i>>pageShift].clearOccupied(i & pageMask)
	t.n--
	m.n--
}

// logDelete records a deleted key for this interval's delta, or gives the
// delta up once the log outgrows the table (a full blob is then as cheap).
func (m *Map[K, V]) logDelete(t *table[K, V], k K) {
	if t.deletedVer != m.version {
		t.deleted, t.deletedVer = nil, m.version // NB: the old log may belong to a snapshot
	}
	switch {
	case t.deltaLost == m.version:
	case len(t.deleted) >= max(1024, t.n):
		t.deleted, t.deltaLost = nil, m.version
	default:
		t.deleted = append(t.deleted, k)
	}
}

// DeleteFunc removes every entry of key group kg for which del returns true
// and returns how many it removed. del must not touch the Map.
func (m *Map[K, V]) DeleteFunc(kg int, del func(K, V) bool) int {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if !m.kgs.Contains(kg) {
		return 0
	}
	t := &m.tables[kg-m.kgs.Start]
	if t.n == 0 {
		return 0
	}
	// Start just after an empty slot: no probe run crosses it, so a
	// backward shift only ever moves an unvisited entry into the slot
	// being visited, which is then looked at again.
	start := uint64(0)
	for t.occupied(start) {
		start++
	}
	removed := 0
	for c, i := uint64(0), (start+1)&t.mask; c < t.mask; c++ {
		if t.occupied(i) {
			s := t.slotAt(i)
			if del(s.key, s.val) {
				t.written = m.version
				m.removeAt(t, i)
				removed++
				c-- // slot i may now hold a shifted entry
				continue
			}
		}
		i = (i + 1) & t.mask
	}
	return removed
}

// All iterates over the entries of key group kg. The Map must not be
// mutated during the iteration (use DeleteFunc to delete while scanning).
func (m *Map[K, V]) All(kg int) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.kgs.Contains(kg) {
			m.tables[kg-m.kgs.Start].all(yield)
		}
		runtime.KeepAlive(m) // see keepAlive in slab.go
	}
}

// Reserve makes room in key group kg for n entries, so that inserting up
// to n does not grow its table: a Map whose size is known ahead (the next
// window's state, sized as the last) skips the rebuilds of growing from
// empty. It does nothing if the table has room already.
func (m *Map[K, V]) Reserve(kg, n int) error {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if !m.kgs.Contains(kg) {
		return fmt.Errorf("%w: key group %d outside %v", ErrKeyGroupNotOwned, kg, m.kgs)
	}
	t := &m.tables[kg-m.kgs.Start]
	if n <= t.growAt {
		return nil
	}
	capacity := max(pageSlots, t.capacity())
	for growAt(capacity) < n {
		capacity *= 2
	}
	m.rebuild(t, capacity)
	return nil
}

// Clear removes every entry. The Map keeps its pages for the entries that
// follow: those no snapshot reads go back to its free list at once, the
// others once the snapshots that read them are released. A Map emptied and
// filled again, as a window's state is when one window ends and the next
// begins, so reuses its memory instead of mapping more. The next snapshot
// has no delta for a key group that held entries (ErrNoDelta): it is
// written whole.
func (m *Map[K, V]) Clear() {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	for i := range m.tables {
		t := &m.tables[i]
		if len(t.dir) == 0 && t.n == 0 {
			continue
		}
		for _, r := range t.dir {
			m.drop(r)
		}
		*t = table[K, V]{written: m.version, deltaLost: m.version}
	}
	m.n, m.slots = 0, 0
}
