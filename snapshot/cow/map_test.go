package cow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ringflow/ringflow/internal/prefetch"
	"github.com/ringflow/ringflow/keygroups"
)

func TestConfigErrors(t *testing.T) {
	good := counterConfig(128, keygroups.Range{})
	cases := map[string]func(*Config[uint64, int64]){
		"nil hash":        func(c *Config[uint64, int64]) { c.Hash = nil },
		"maxP negative":   func(c *Config[uint64, int64]) { c.MaxParallelism = -1 },
		"maxP too large":  func(c *Config[uint64, int64]) { c.MaxParallelism = 40_000 },
		"range past maxP": func(c *Config[uint64, int64]) { c.KeyGroups = keygroups.Range{Start: 100, End: 129} },
		"range negative":  func(c *Config[uint64, int64]) { c.KeyGroups = keygroups.Range{Start: -1, End: 3} },
		"range empty":     func(c *Config[uint64, int64]) { c.KeyGroups = keygroups.Range{Start: 5, End: 5} },
	}
	for name, mutate := range cases {
		c := good
		mutate(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
	c := good
	c.MaxParallelism = 0
	m, err := New(c)
	if err != nil || m.MaxParallelism() != keygroups.DefaultMaxParallelism || m.KeyGroups() != (keygroups.Range{Start: 0, End: 128}) {
		t.Fatalf("defaults: %v, maxP %d, range %v", err, m.MaxParallelism(), m.KeyGroups())
	}
}

// keyIn returns the first key >= from whose key group is kg (under maxP).
func keyIn(kg, maxP int, from uint64) uint64 {
	for k := from; ; k++ {
		if keygroups.OfUint64(k, maxP) == kg {
			return k
		}
	}
}

func TestKeyOutsideRange(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{Start: 0, End: 64})
	k := keyIn(100, 128, 0)
	if _, err := m.Upsert(k); !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("Upsert of a key in kg 100 = %v, want ErrKeyGroupNotOwned", err)
	}
	if err := m.Put(k, 1); !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("Put of a key in kg 100 = %v, want ErrKeyGroupNotOwned", err)
	}
	if _, ok := m.Get(k); ok || m.Delete(k) || m.Len() != 0 || m.KeyGroupLen(100) != 0 {
		t.Fatal("a key outside the range changed or was found in the map")
	}
	if n := m.DeleteFunc(100, func(uint64, int64) bool { return true }); n != 0 {
		t.Fatalf("DeleteFunc on a key group not held removed %d", n)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	keys := make([]uint64, 10_000)
	hashes := make([]uint64, len(keys))
	for i := range keys {
		keys[i], hashes[i] = uint64(i), keygroups.HashUint64(uint64(i))
		if err := m.Put(keys[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	n := testing.AllocsPerRun(10_000, func() {
		j := i % len(keys)
		i++
		p, _ := m.UpsertHashed(hashes[j], keys[j])
		*p++
		q, _ := m.Upsert(keys[j])
		*q++
		if v, _ := m.GetHashed(hashes[j], keys[j]); v == 0 {
			t.Fatal("lost an update")
		}
		m.Prefetch(hashes[j : j+1])
		m.PrefetchAhead(hashes, j)
	})
	if n != 0 {
		t.Fatalf("per-record operations allocate %v times per run", n)
	}
}

func fillCounters(t testing.TB, m *Map[uint64, int64], n int) {
	for k := range uint64(n) {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
}

// freezeCost returns the allocations and heap bytes of one Freeze+Release
// and the Stats delta of one Freeze.
func freezeCost(t *testing.T, m *Map[uint64, int64]) (allocs float64, bytes uint64, d Stats) {
	allocs = testing.AllocsPerRun(50, func() { m.Freeze().Release() })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 200
	for range runs {
		m.Freeze().Release()
	}
	runtime.ReadMemStats(&after)
	s0 := m.Stats()
	m.Freeze().Release()
	s1 := m.Stats()
	d = Stats{
		KeyGroupsFrozen: s1.KeyGroupsFrozen - s0.KeyGroupsFrozen,
		PagesCopied:     s1.PagesCopied - s0.PagesCopied,
		DirsCopied:      s1.DirsCopied - s0.DirsCopied,
		PagesAllocated:  s1.PagesAllocated - s0.PagesAllocated,
	}
	return allocs, (after.TotalAlloc - before.TotalAlloc) / runs, d
}

// TestFreezeCostIndependentOfSize counts Freeze's work (headers captured,
// pages and directories copied, allocations, bytes) at two sizes 300x
// apart: it must be identical, and proportional to the key groups only.
func TestFreezeCostIndependentOfSize(t *testing.T) {
	small, large := newCounters(t, 128, keygroups.Range{}), newCounters(t, 128, keygroups.Range{})
	fillCounters(t, small, 1_000)
	fillCounters(t, large, 300_000)
	as, bs, ds := freezeCost(t, small)
	al, bl, dl := freezeCost(t, large)
	t.Logf("small: %v allocs %d B %+v; large: %v allocs %d B %+v", as, bs, ds, al, bl, dl)
	want := Stats{KeyGroupsFrozen: 128}
	if ds != want || dl != want {
		t.Fatalf("Freeze did more than capture 128 key groups: small %+v, large %+v", ds, dl)
	}
	if as != al {
		t.Fatalf("Freeze allocates %v times at 1k keys, %v at 300k", as, al)
	}
	// NB: bytes may differ by a few words of unrelated runtime allocation;
	// a size-dependent Freeze would differ by megabytes.
	if bl > bs+bs/8 || bs > bl+bl/8 {
		t.Fatalf("Freeze allocates %d B at 1k keys, %d B at 300k", bs, bl)
	}
	if bl > 64<<10 {
		t.Fatalf("Freeze allocates %d B for 128 key groups", bl)
	}
}

// TestFreezeReusesReleasedHeaders: once a snapshot is released, the next
// Freeze captures its headers into that snapshot's array instead of a new
// one (its only allocation is the Snapshot itself), and a snapshot still
// live keeps its own headers and values.
func TestFreezeReusesReleasedHeaders(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, 10_000)
	if allocs := testing.AllocsPerRun(100, func() { m.Freeze().Release() }); allocs > 1 {
		t.Fatalf("Freeze after a Release allocates %v times, want 1 (the Snapshot)", allocs)
	}
	held := m.Freeze()
	m.Freeze().Release()
	for k := range uint64(10_000) {
		p, _ := m.Upsert(k)
		*p = -1
	}
	m.Freeze().Release() // prunes the released one, reuses its headers
	next := m.Freeze()
	for _, k := range []uint64{0, 1, 4_321, 9_999} {
		if v, ok := held.Get(k); !ok || v != int64(k) {
			t.Fatalf("held snapshot: key %d = %d, %v; want %d", k, v, ok, k)
		}
		if v, ok := next.Get(k); !ok || v != -1 {
			t.Fatalf("new snapshot: key %d = %d, %v; want -1", k, v, ok)
		}
	}
	held.Release()
	next.Release()
}

// TestWriteAfterFreezeCopiesOnePage: the first write to a frozen page copies
// that page and its key group's directory, later writes to it copy nothing,
// and the snapshot keeps the old value.
func TestWriteAfterFreezeCopiesOnePage(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, 100_000)
	snap := m.Freeze()
	k := uint64(12345)
	s0 := m.Stats()
	for range 3 {
		p, _ := m.Upsert(k)
		*p += 1000
	}
	s1 := m.Stats()
	if s1.PagesCopied-s0.PagesCopied != 1 || s1.DirsCopied-s0.DirsCopied != 1 {
		t.Fatalf("3 writes to one frozen key copied %d pages, %d dirs; want 1, 1",
			s1.PagesCopied-s0.PagesCopied, s1.DirsCopied-s0.DirsCopied)
	}
	// A key in another key group: one more page and directory.
	other := keyIn((keygroups.OfUint64(k, 128)+1)%128, 128, 0)
	if err := m.Put(other, -1); err != nil {
		t.Fatal(err)
	}
	s2 := m.Stats()
	if s2.PagesCopied-s1.PagesCopied != 1 || s2.DirsCopied-s1.DirsCopied != 1 {
		t.Fatalf("a write in a second key group copied %d pages, %d dirs", s2.PagesCopied-s1.PagesCopied, s2.DirsCopied-s1.DirsCopied)
	}
	if v, _ := snap.Get(k); v != int64(k) {
		t.Fatalf("snapshot sees %d for key %d, want the frozen %d", v, k, k)
	}
	if v, _ := snap.Get(other); v != int64(other) {
		t.Fatalf("snapshot sees %d for key %d, want the frozen %d", v, other, other)
	}
	if v, _ := m.Get(k); v != int64(k)+3000 {
		t.Fatalf("map sees %d for key %d, want %d", v, k, k+3000)
	}
	snap.Release()
}

// TestSteadyStateReusesPages: checkpoint cycles that rewrite every key stop
// taking pages from the heap once released snapshots' pages come back.
func TestSteadyStateReusesPages(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, 50_000)
	var allocated, dirs []uint64
	for range 8 {
		s := m.Freeze()
		for k := range uint64(50_000) {
			p, _ := m.Upsert(k)
			*p++
		}
		s.Release()
		st := m.Stats()
		allocated = append(allocated, st.PagesAllocated)
		dirs = append(dirs, st.DirsCopied-st.DirsReused)
	}
	if n := len(allocated); allocated[n-1] != allocated[3] {
		t.Fatalf("pages allocated from the heap keep growing: %v", allocated)
	}
	if n := len(dirs); dirs[n-1] != dirs[3] {
		t.Fatalf("directories allocated from the heap keep growing: %v", dirs)
	}
	if st := m.Stats(); st.PagesReused == 0 || st.DirsReused == 0 {
		t.Fatalf("no page or directory reused: %+v", st)
	}
}

func TestChangedSinceAndRestore(t *testing.T) {
	src := newCounters(t, 8, keygroups.Range{})
	fillCounters(t, src, 1000)
	snap := src.Freeze()
	defer snap.Release()
	blobs := make(map[int][]byte)
	for kg := range 8 {
		b, err := snap.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		blobs[kg] = b
	}
	m := newCounters(t, 8, keygroups.Range{})
	for kg := range 4 {
		if _, err := m.LoadKeyGroup(blobs[kg]); err != nil {
			t.Fatal(err)
		}
	}
	s1 := m.Freeze()
	for kg := range 8 {
		if s1.ChangedSince(kg, 0) {
			t.Fatalf("kg %d restored before the first Freeze counts as changed since the restore", kg)
		}
	}
	// A write to kg of key 5, and a restore after the first Freeze.
	written := keygroups.OfUint64(5, 8)
	if err := m.Put(5, -5); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LoadKeyGroup(blobs[4]); err != nil {
		t.Fatal(err)
	}
	s2 := m.Freeze()
	for kg := range 8 {
		want := kg == written || kg == 4
		if s2.ChangedSince(kg, s1.Version()) != want || s2.ChangedSince(kg, 0) != want {
			t.Fatalf("kg %d: ChangedSince(v%d) = %v, want %v", kg, s1.Version(), s2.ChangedSince(kg, s1.Version()), want)
		}
	}
	if s2.ChangedSince(99, 0) != true {
		t.Fatal("a key group not held must report changed")
	}
	s1.Release()
	s2.Release()
}

// TestRescale restores a parallelism-1 map's key groups into 3 subtasks,
// then those into 2, following keygroups.Rescale, and checks that every
// key ends up, with its value, in the subtask that owns its key group.
func TestRescale(t *testing.T) {
	const maxP, nKeys = 128, 20_000
	src := newCounters(t, maxP, keygroups.Range{})
	fillCounters(t, src, nKeys)
	want := mapContents(t, src)
	blobs := func(m *Map[uint64, int64]) map[int][]byte {
		s := m.Freeze()
		defer s.Release()
		out := make(map[int][]byte)
		for kg := m.KeyGroups().Start; kg < m.KeyGroups().End; kg++ {
			b, err := s.AppendKeyGroup(nil, kg)
			if err != nil {
				t.Fatal(err)
			}
			out[kg] = b
		}
		return out
	}
	old := []map[int][]byte{blobs(src)}
	for _, p := range []int{3, 2, 4, 1} {
		plan, err := keygroups.Rescale(len(old), p, maxP)
		if err != nil {
			t.Fatal(err)
		}
		next := make([]map[int][]byte, p)
		all := make(map[uint64]int64)
		for j := range p {
			r, _ := keygroups.RangeOf(j, p, maxP)
			m := newCounters(t, maxP, r)
			for _, tr := range plan[j] {
				for kg := tr.KeyGroups.Start; kg < tr.KeyGroups.End; kg++ {
					if _, err := m.LoadKeyGroup(old[tr.OldSubtask][kg]); err != nil {
						t.Fatalf("p=%d subtask %d: %v", p, j, err)
					}
				}
			}
			// A key group of another subtask is refused.
			if foreign := r.End % maxP; !r.Contains(foreign) {
				if _, err := m.LoadKeyGroup(blobFor(old, foreign)); !errors.Is(err, ErrKeyGroupNotOwned) {
					t.Fatalf("p=%d subtask %d loading kg %d: %v, want ErrKeyGroupNotOwned", p, j, foreign, err)
				}
			}
			for k, v := range mapContents(t, m) {
				all[k] = v
			}
			next[j] = blobs(m)
		}
		diffMaps(t, fmt.Sprintf("union of %d subtasks", p), all, want)
		old = next
	}
}

func blobFor(subtasks []map[int][]byte, kg int) []byte {
	for _, s := range subtasks {
		if b, ok := s[kg]; ok {
			return b
		}
	}
	return nil
}

func TestReleasedSnapshotAndMissingCodecs(t *testing.T) {
	m := newCounters(t, 4, keygroups.Range{})
	fillCounters(t, m, 10)
	s := m.Freeze()
	s.Release()
	s.Release() // idempotent
	if _, err := s.AppendKeyGroup(nil, 0); !errors.Is(err, ErrReleased) {
		t.Fatalf("AppendKeyGroup after Release = %v, want ErrReleased", err)
	}
	if s.Len(0) != 0 {
		t.Fatal("a released snapshot reports entries")
	}
	s = m.Freeze()
	defer s.Release()
	if _, err := s.AppendKeyGroup(nil, 7); !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("AppendKeyGroup(7) of a 4-group map = %v", err)
	}
	bare, _ := New(Config[uint64, int64]{Hash: keygroups.HashUint64, MaxParallelism: 4})
	if _, err := bare.Freeze().AppendKeyGroup(nil, 0); !errors.Is(err, ErrNoCodec) {
		t.Fatalf("AppendKeyGroup without codecs = %v", err)
	}
	if _, err := bare.LoadKeyGroup([]byte("x")); !errors.Is(err, ErrNoCodec) {
		t.Fatalf("LoadKeyGroup without codecs = %v", err)
	}
}

// TestStringKeys exercises a pointer-holding key and value type through
// growth, deletion, copy-on-write and a round trip.
func TestStringKeys(t *testing.T) {
	m, err := New(Config[string, []byte]{
		Hash: keygroups.HashString, MaxParallelism: 16,
		KeyCodec: StringCodec{}, ValueCodec: BytesCodec{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if err := m.Put(fmt.Sprint("key-", i), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	s := m.Freeze()
	for i := 0; i < 5000; i += 2 {
		m.Delete(fmt.Sprint("key-", i))
	}
	_ = m.Put("key-1", []byte("changed"))
	if v, ok := s.Get("key-1"); !ok || string(v) != "v1" {
		t.Fatalf("snapshot: key-1 = %q, %v", v, ok)
	}
	if _, ok := s.Get("key-0"); !ok {
		t.Fatal("snapshot lost key-0 deleted after the freeze")
	}
	r, _ := New(Config[string, []byte]{Hash: keygroups.HashString, MaxParallelism: 16,
		KeyCodec: StringCodec{}, ValueCodec: BytesCodec{}})
	total := 0
	for kg := range 16 {
		b, err := s.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.LoadKeyGroup(b); err != nil {
			t.Fatal(err)
		}
		total += s.Len(kg)
	}
	s.Release()
	if total != 5000 || r.Len() != 5000 || m.Len() != 2500 {
		t.Fatalf("snapshot %d, restored %d, live %d entries; want 5000, 5000, 2500", total, r.Len(), m.Len())
	}
	if v, _ := r.Get("key-4999"); string(v) != "v4999" {
		t.Fatalf("restored key-4999 = %q", v)
	}
	if v, _ := m.Get("key-1"); string(v) != "changed" {
		t.Fatalf("live key-1 = %q", v)
	}
}

func TestSubKeyHashKeepsKeyGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(seeds.Seed(t), 11))
	for _, maxP := range []int{1, 3, 128, 1000, 32768} {
		seen := make(map[uint64]bool)
		for range 20_000 {
			kh, sh := r.Uint64(), r.Uint64()
			h := SubKeyHash(kh, sh, maxP)
			if h%uint64(maxP) != kh%uint64(maxP) {
				t.Fatalf("maxP %d: SubKeyHash(%#x, %#x) in key group %d, want %d", maxP, kh, sh, h%uint64(maxP), kh%uint64(maxP))
			}
			seen[h] = true
		}
		if len(seen) < 19_990 {
			t.Fatalf("maxP %d: only %d distinct hashes of 20000", maxP, len(seen))
		}
	}
	// Sub-keys of one key spread over the table's index bits.
	homes := make(map[uint64]bool)
	tb := table[uint64, int64]{}
	tb.setGeometry(1 << 16)
	for sub := range uint64(1000) {
		homes[tb.home(SubKeyHash(keygroups.HashUint64(42), keygroups.HashUint64(sub), 128))] = true
	}
	if len(homes) < 950 {
		t.Fatalf("1000 sub-keys of one key land on %d home slots of 65536", len(homes))
	}
}

// TestSlotsTracksCapacity checks the count of table slots that Prefetch
// consults against the tables, through growth and restore.
func TestSlotsTracksCapacity(t *testing.T) {
	check := func(m *Map[uint64, int64], when string) {
		t.Helper()
		want := 0
		for i := range m.tables {
			want += m.tables[i].capacity()
		}
		if m.slots != want {
			t.Fatalf("%s: slots %d, tables hold %d", when, m.slots, want)
		}
	}
	m := newCounters(t, 8, keygroups.Range{})
	check(m, "empty")
	for k := range uint64(20_000) {
		if err := m.Put(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	check(m, "after 20k puts")
	if m.slots < 20_000 {
		t.Fatalf("slots %d for 20k entries", m.slots)
	}
	snap := m.Freeze()
	defer snap.Release()
	r := newCounters(t, 8, keygroups.Range{})
	for kg := range 8 {
		b, err := snap.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.LoadKeyGroup(b); err != nil {
			t.Fatal(err)
		}
	}
	check(r, "after restore")
}

// TestReserve checks that a key group reserved for n entries takes n
// inserts without growing (no page taken after the Reserve), that it keeps
// the entries it had, and that a key group not held is refused.
func TestReserve(t *testing.T) {
	const maxP, kg, n = 128, 5, 5000
	m := newCounters(t, maxP, keygroups.Range{Start: 0, End: 64})
	var keys []uint64
	for k := uint64(0); len(keys) < n; k++ {
		k = keyIn(kg, maxP, k)
		keys = append(keys, k)
	}
	for _, k := range keys[:100] {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Reserve(kg, n); err != nil {
		t.Fatal(err)
	}
	pages := m.Stats().PagesAllocated + m.Stats().PagesReused
	for _, k := range keys[100:] {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Stats().PagesAllocated + m.Stats().PagesReused; got != pages {
		t.Fatalf("%d inserts after Reserve(%d) took %d pages: the table grew", n-100, n, got-pages)
	}
	for _, k := range keys {
		if v, ok := m.Get(k); !ok || v != int64(k) {
			t.Fatalf("key %d: got %d, %v after Reserve", k, v, ok)
		}
	}
	if m.KeyGroupLen(kg) != n {
		t.Fatalf("key group %d holds %d entries, want %d", kg, m.KeyGroupLen(kg), n)
	}
	if err := m.Reserve(100, 10); !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("Reserve of a key group not held = %v, want ErrKeyGroupNotOwned", err)
	}
}

// TestClear checks that Clear empties the map but not a snapshot taken
// before it, that the entries after it reuse the map's pages, and that the
// next snapshot writes the cleared key groups whole.
func TestClear(t *testing.T) {
	m := newCounters(t, 128, keygroups.Range{})
	for k := range uint64(20_000) {
		if err := m.Put(k, int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	s := m.Freeze()
	m.Clear()
	if m.Len() != 0 {
		t.Fatalf("Len after Clear = %d", m.Len())
	}
	for k := range uint64(20_000) {
		if _, ok := m.Get(k); ok {
			t.Fatalf("key %d found after Clear", k)
		}
	}
	n := 0
	for kg := range 128 {
		for k, v := range s.All(kg) {
			if v != int64(k) {
				t.Fatalf("snapshot: key %d holds %d", k, v)
			}
			n++
		}
	}
	if n != 20_000 {
		t.Fatalf("the snapshot taken before Clear holds %d entries, want 20000", n)
	}
	s.Release()
	allocated := m.Stats().PagesAllocated
	for k := range uint64(20_000) {
		if err := m.Put(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	if grew := m.Stats().PagesAllocated - allocated; grew != 0 {
		t.Fatalf("refilling a cleared map took %d new pages, want its old ones", grew)
	}
	s2 := m.Freeze()
	defer s2.Release()
	kg := m.KeyGroupOf(keygroups.HashUint64(7))
	if _, err := s2.AppendKeyGroupDelta(nil, kg); !errors.Is(err, ErrNoDelta) {
		t.Fatalf("delta of a cleared key group = %v, want ErrNoDelta", err)
	}
	blob, err := s2.AppendKeyGroup(nil, kg)
	if err != nil {
		t.Fatal(err)
	}
	r := newCounters(t, 128, keygroups.Range{})
	if _, err := r.LoadKeyGroup(blob); err != nil {
		t.Fatal(err)
	}
	if r.Len() != s2.Len(kg) || r.Len() == 0 {
		t.Fatalf("restored %d entries of key group %d, snapshot has %d", r.Len(), kg, s2.Len(kg))
	}
}

// TestAheadRange checks PrefetchAhead's schedule: in a loop over a batch,
// every hash is asked for exactly once, never after its own lookup, and,
// past the first group, at least a group of lookups before it.
func TestAheadRange(t *testing.T) {
	for _, group := range []int{1, 3, 16, PrefetchGroup} {
		for _, n := range []int{0, 1, group - 1, group, group + 1, 2 * group, 5*group + 2, 1024} {
			askedAt := make([]int, n)
			for j := range askedAt {
				askedAt[j] = -1
			}
			for i := range n {
				from, to := aheadRange(i, n, group)
				if from > to || from < 0 || to > n {
					t.Fatalf("group %d, n %d, lookup %d: range [%d, %d)", group, n, i, from, to)
				}
				for j := from; j < to; j++ {
					if askedAt[j] >= 0 {
						t.Fatalf("group %d, n %d: hash %d asked for at lookups %d and %d", group, n, j, askedAt[j], i)
					}
					askedAt[j] = i
				}
			}
			for j, i := range askedAt {
				switch {
				case i < 0:
					t.Fatalf("group %d, n %d: hash %d never asked for", group, n, j)
				case i > j:
					t.Fatalf("group %d, n %d: hash %d asked for at lookup %d, after its own", group, n, j, i)
				case j >= group && j-i < group:
					t.Fatalf("group %d, n %d: hash %d asked for at lookup %d, less than a group ahead", group, n, j, i)
				}
			}
		}
	}
}

// TestPrefetchFromL2 checks that prefetching is on exactly while the
// tables are at least as large as a core's L2 cache.
func TestPrefetchFromL2(t *testing.T) {
	m := newCounters(t, 8, keygroups.Range{})
	if m.prefetchFrom != uintptr(prefetch.L2Bytes()) || m.prefetchFrom == 0 {
		t.Fatalf("prefetchFrom %d, L2 %d", m.prefetchFrom, prefetch.L2Bytes())
	}
	m.prefetchFrom = 64 << 10
	seen := map[bool]bool{}
	for k := uint64(0); uintptr(m.slots)*unsafe.Sizeof(slot[uint64, int64]{}) <= 4*m.prefetchFrom; k++ {
		bytes := uintptr(m.slots) * unsafe.Sizeof(slot[uint64, int64]{})
		if got, want := m.prefetchPays(), bytes >= m.prefetchFrom; got != want {
			t.Fatalf("%d bytes of tables: prefetchPays %v", bytes, got)
		}
		seen[m.prefetchPays()] = true
		if err := m.Put(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	if !seen[false] || !seen[true] {
		t.Fatalf("prefetchPays took only %v as the tables grew", seen)
	}
}
