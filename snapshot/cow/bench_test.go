package cow

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/keygroups"
)

// benchState is a key set of n random uint64 keys, a Go map and a cow Map
// both holding all of them, and a fixed stream of accesses to replay.
type benchState struct {
	n      int
	keys   []uint64 // access stream, uniform over the key set
	hashes []uint64 // keygroups.HashUint64 of keys[i]
	gomap  map[uint64]int64
	cow    *Map[uint64, int64]
}

const benchStream = 1 << 22 // accesses replayed round-robin (32 MiB of keys+hashes)

func newBenchState(b testing.TB, n int) *benchState {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	set := make([]uint64, n)
	for i := range set {
		set[i] = r.Uint64()
	}
	s := &benchState{n: n, gomap: make(map[uint64]int64, n), cow: newCounters(b, 128, keygroups.Range{})}
	for _, k := range set {
		s.gomap[k] = 1
		if err := s.cow.Put(k, 1); err != nil {
			b.Fatal(err)
		}
	}
	s.keys, s.hashes = make([]uint64, benchStream), make([]uint64, benchStream)
	for i := range s.keys {
		s.keys[i] = set[r.IntN(n)]
		s.hashes[i] = keygroups.HashUint64(s.keys[i])
	}
	return s
}

var benchSizes = []int{100_000, 1_000_000, 10_000_000}

func sizeName(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("keys=%dM", n/1_000_000)
	default:
		return fmt.Sprintf("keys=%dk", n/1000)
	}
}

// BenchmarkUpdate increments a random existing key's counter: the
// keyed-count hot path. gomap is `m[k]++` on a map[uint64]int64; cow hashes
// with keygroups.HashUint64 and upserts; cow-prehashed takes the hash the
// partitioner already computed; cow-batch hashes a batch of 256 keys,
// Prefetches them, then upserts each.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchState(b, n)
		b.Run(sizeName(n)+"/gomap", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s.gomap[s.keys[i&(benchStream-1)]]++
			}
		})
		b.Run(sizeName(n)+"/cow", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := s.keys[i&(benchStream-1)]
				p, _ := s.cow.UpsertHashed(keygroups.HashUint64(k), k)
				*p++
			}
		})
		b.Run(sizeName(n)+"/cow-prehashed", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i & (benchStream - 1)
				p, _ := s.cow.UpsertHashed(s.hashes[j], s.keys[j])
				*p++
			}
		})
		// The engine's shape: a batch of records, hashed, then updated one
		// by one, a group ahead of the prefetches.
		b.Run(sizeName(n)+"/cow-batch=256", func(b *testing.B) {
			b.ReportAllocs()
			var hashes [256]uint64
			for i := 0; b.Loop(); i++ {
				j := i & (benchStream - 1)
				if j&255 == 0 {
					for x, k := range s.keys[j : j+256] {
						hashes[x] = keygroups.HashUint64(k)
					}
				}
				s.cow.PrefetchAhead(hashes[:], j&255)
				p, _ := s.cow.UpsertHashed(hashes[j&255], s.keys[j])
				*p++
			}
		})
	}
}

var benchSink int64

// BenchmarkGet reads a random existing key.
func BenchmarkGet(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchState(b, n)
		b.Run(sizeName(n)+"/gomap", func(b *testing.B) {
			var sum int64
			for i := 0; b.Loop(); i++ {
				sum += s.gomap[s.keys[i&(benchStream-1)]]
			}
			benchSink = sum
		})
		b.Run(sizeName(n)+"/cow", func(b *testing.B) {
			var sum int64
			for i := 0; b.Loop(); i++ {
				k := s.keys[i&(benchStream-1)]
				v, _ := s.cow.GetHashed(keygroups.HashUint64(k), k)
				sum += v
			}
			benchSink = sum
		})
	}
}

// BenchmarkUpdateWithSnapshots is BenchmarkUpdate/cow-prehashed with a
// Freeze every `every` updates, the previous snapshot released at each
// Freeze (as if written out in the meantime): the amortised copy-on-write
// cost.
func BenchmarkUpdateWithSnapshots(b *testing.B) {
	for _, n := range benchSizes[:2] {
		s := newBenchState(b, n)
		for _, every := range []int{1 << 20, 1 << 23} {
			b.Run(fmt.Sprintf("%s/freeze-every=%d", sizeName(n), every), func(b *testing.B) {
				b.ReportAllocs()
				before := s.cow.Stats()
				var prev *Snapshot[uint64, int64]
				for i := 0; b.Loop(); i++ {
					if i%every == 0 {
						if prev != nil {
							prev.Release()
						}
						prev = s.cow.Freeze()
					}
					j := i & (benchStream - 1)
					p, _ := s.cow.UpsertHashed(s.hashes[j], s.keys[j])
					*p++
				}
				prev.Release()
				st := s.cow.Stats()
				b.ReportMetric(float64(st.PagesCopied-before.PagesCopied)/float64(st.Freezes-before.Freezes), "pagecopies/freeze")
			})
		}
	}
}

// BenchmarkFreeze is the synchronous part of a snapshot: it must not grow
// with the number of keys.
func BenchmarkFreeze(b *testing.B) {
	for _, n := range benchSizes[1:] {
		s := newBenchState(b, n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.ReportAllocs()
			before := s.cow.Stats()
			for b.Loop() {
				s.cow.Freeze().Release()
			}
			after := s.cow.Stats()
			b.ReportMetric(float64(after.KeyGroupsFrozen-before.KeyGroupsFrozen)/float64(after.Freezes-before.Freezes), "kgs/op")
		})
	}
}

// BenchmarkAppendKeyGroup is the background write-out of one frozen key
// group of a 1M-key map (about 7800 entries).
func BenchmarkAppendKeyGroup(b *testing.B) {
	s := newBenchState(b, 1_000_000)
	snap := s.cow.Freeze()
	defer snap.Release()
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = snap.AppendKeyGroup(buf[:0], i&127)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkUpdateVsGoMap interleaves, chunk by chunk, updates on a Go map,
// on the cow Map one record at a time, and on the cow Map a batch of 256
// at a time (hash, then upsert with PrefetchAhead), and reports each one's ns per
// update. Interleaving makes the comparison fair on a shared, noisy
// machine: all three see the same interference. Each takes its own chunk
// of the access stream: had the two cow variants updated the same keys
// one after the other, the second would find their lines in cache.
func BenchmarkUpdateVsGoMap(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchState(b, n)
		b.Run(sizeName(n), func(b *testing.B) {
			const chunk = 1 << 14
			var hashes [256]uint64
			var tGo, tOne, tBatch time.Duration
			ops := 0
			for b.Loop() {
				at := (3 * ops) % (benchStream / (3 * chunk) * (3 * chunk))
				keysGo, keysOne, keysBatch := s.keys[at:][:chunk], s.keys[at+chunk:][:chunk], s.keys[at+2*chunk:][:chunk]
				t0 := time.Now()
				for _, k := range keysGo {
					s.gomap[k]++
				}
				t1 := time.Now()
				for _, k := range keysOne {
					p, _ := s.cow.UpsertHashed(keygroups.HashUint64(k), k)
					*p++
				}
				t2 := time.Now()
				for x := 0; x < chunk; x += len(hashes) {
					batch := keysBatch[x : x+len(hashes)]
					for i, k := range batch {
						hashes[i] = keygroups.HashUint64(k)
					}
					for i, k := range batch {
						s.cow.PrefetchAhead(hashes[:], i)
						p, _ := s.cow.UpsertHashed(hashes[i], k)
						*p++
					}
				}
				t3 := time.Now()
				tGo, tOne, tBatch = tGo+t1.Sub(t0), tOne+t2.Sub(t1), tBatch+t3.Sub(t2)
				ops += chunk
			}
			b.ReportMetric(float64(tGo.Nanoseconds())/float64(ops), "gomap-ns/update")
			b.ReportMetric(float64(tOne.Nanoseconds())/float64(ops), "cow-ns/update")
			b.ReportMetric(float64(tBatch.Nanoseconds())/float64(ops), "cow-batch-ns/update")
			b.ReportMetric(float64(tGo)/float64(tBatch), "speedup-batch")
		})
	}
}

// BenchmarkAppendKeyGroupDelta writes the delta of one key group of a
// 1M-key map after 1% of the keys changed (about 78 entries per key group).
func BenchmarkAppendKeyGroupDelta(b *testing.B) {
	s := newBenchState(b, 1_000_000)
	s.cow.Freeze().Release()
	for _, k := range s.keys[:10_000] {
		p, _ := s.cow.Upsert(k)
		*p++
	}
	snap := s.cow.Freeze()
	defer snap.Release()
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = snap.AppendKeyGroupDelta(buf[:0], i&127)
	}
	b.SetBytes(int64(len(buf)))
}

// subtaskKeys are BenchmarkSubtaskUpdate's key counts: a key-group table
// of the 50k size holds ~780 keys.
var subtaskKeys = []int{1000, 50_000, 1_000_000}

// subtaskStream fills one subtask's Map (64 of 128 key groups) with n
// random keys, and returns it, the keys, and a fixed stream of 1<<20
// accesses uniform over them with their hashes.
func subtaskStream(b *testing.B, n int) (m *Map[uint64, int64], set, keys, hashes []uint64) {
	rnd := rand.New(rand.NewPCG(3, uint64(n)))
	m = newCounters(b, 128, keygroups.Range{Start: 0, End: 64})
	set = make([]uint64, 0, n)
	for len(set) < n {
		k := rnd.Uint64()
		if keygroups.HashUint64(k)%128 >= 64 {
			continue // another subtask's key
		}
		set = append(set, k)
		if err := m.Put(k, 1); err != nil {
			b.Fatal(err)
		}
	}
	keys, hashes = make([]uint64, 1<<20), make([]uint64, 1<<20)
	for i := range keys {
		keys[i] = set[rnd.IntN(n)]
		hashes[i] = keygroups.HashUint64(keys[i])
	}
	return m, set, keys, hashes
}

// BenchmarkSubtaskUpdate updates one subtask's state the way the
// keyed-count pipeline does (64 of 128 key groups, the batch of a 1024-record
// frame, keys uniform over the set, hashes given), each variant in its own
// run so that none shares the caches with another: cow without prefetches,
// cow with PrefetchAhead's (forced, whatever the Map's size), and the Go
// map a baseline would use (which hashes the key itself).
func BenchmarkSubtaskUpdate(b *testing.B) {
	for _, n := range subtaskKeys {
		m, set, keys, hashes := subtaskStream(b, n)
		b.Run(sizeName(n)+"/cow", func(b *testing.B) { updateBatches(b, m, keys, hashes, nil, 0) })
		b.Run(sizeName(n)+"/cow-prefetch", func(b *testing.B) { updateBatches(b, m, keys, hashes, nil, PrefetchGroup) })
		gomap := make(map[uint64]int64, n)
		for _, k := range set {
			gomap[k] = 1
		}
		b.Run(sizeName(n)+"/gomap", func(b *testing.B) {
			off := 0
			for b.Loop() {
				for _, k := range keys[off : off+updateBatch] {
					gomap[k]++
				}
				off = (off + updateBatch) & (len(keys) - 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*updateBatch), "ns/update")
		})
	}
}

// updateBatch is how many updates updateBatches makes per iteration: a
// frame's worth.
const updateBatch = 1024

// updateBatches runs b's loop over the stream of keys, updateBatch at a
// time: before, if not nil, sees each batch's hashes first; then each key
// is updated, with the slots of group hashes prefetched a group ahead of
// their updates (none if group is 0, whatever the Map's size). It reports
// ns per update.
func updateBatches(b *testing.B, m *Map[uint64, int64], keys, hashes []uint64, before func(hs []uint64), group int) {
	off := 0
	for b.Loop() {
		ks, hs := keys[off:off+updateBatch], hashes[off:off+updateBatch]
		off = (off + updateBatch) & (len(keys) - 1)
		if before != nil {
			before(hs)
		}
		for i, k := range ks {
			if group > 0 && i%group == 0 {
				m.prefetchGroupAhead(hs, i, group)
			}
			p, _ := m.UpsertHashed(hs[i], k)
			*p++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*updateBatch), "ns/update")
}

// BenchmarkPrefetchGroups compares ways of prefetching a 1024-record
// batch's slots, in BenchmarkSubtaskUpdate's setting: none; one pass of
// plain loads over the whole batch before its updates (loads that miss
// cannot be dropped, but each holds its place in the reorder buffer);
// one prefetch instruction per slot for the whole batch (whole); and
// prefetches a group of g slots at a time, a group ahead of the updates
// (PrefetchAhead's way; g=32 is PrefetchGroup).
func BenchmarkPrefetchGroups(b *testing.B) {
	for _, n := range subtaskKeys[1:] {
		m, _, keys, hashes := subtaskStream(b, n)
		b.Run(sizeName(n)+"/none", func(b *testing.B) { updateBatches(b, m, keys, hashes, nil, 0) })
		b.Run(sizeName(n)+"/loads", func(b *testing.B) {
			updateBatches(b, m, keys, hashes, func(hs []uint64) { loadSlots(m, hs) }, 0)
		})
		b.Run(sizeName(n)+"/whole", func(b *testing.B) { updateBatches(b, m, keys, hashes, m.prefetch, 0) })
		for _, g := range []int{16, 32, 64} {
			b.Run(fmt.Sprintf("%s/g=%d", sizeName(n), g), func(b *testing.B) { updateBatches(b, m, keys, hashes, nil, g) })
		}
	}
}

// loadSink keeps loadSlots' loads from being optimised away.
var loadSink byte

// loadSlots reads the first and last byte of the home slot of each hash:
// the pass of loads the Map's prefetch was before PREFETCHT0.
func loadSlots(m *Map[uint64, int64], hashes []uint64) {
	var x byte
	slots := m.homeSlots(hashes)
	for _, s := range slots {
		x |= *(*byte)(s) | *(*byte)(unsafe.Add(s, unsafe.Sizeof(slot[uint64, int64]{})-1))
	}
	m.doneSlots(slots)
	loadSink = x
}

// BenchmarkFirstWritesAfterFreeze is the copy-on-write burst a checkpoint
// starts: at 1M keys and one update a microsecond (keyed-count at 1M
// records/s), the time the updates right after a Freeze take, per update,
// in three windows (the first millisecond, up to 5 ms, up to 20 ms), and
// the page copies (begun) and chunk copies per update in each (docs/perf.md,
// "Copy-on-write state").
// batch=1 updates one key a microsecond; batch=16 sixteen keys every 16µs,
// after a Prefetch of their hashes, as the keyed operators do with a frame
// of records. The ahead cases spend the time between updates in CopyAhead,
// a page at a time, as a task with no records waiting does. delay-ns is
// from when an update was due to when it was done: what a record's latency
// would gain, queueing behind the updates and copies before it included.
func BenchmarkFirstWritesAfterFreeze(b *testing.B) {
	s := newBenchState(b, 1_000_000)
	for _, batch := range []int{1, 16} {
		for _, ahead := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d", batch)
			if ahead {
				name += "/ahead"
			}
			b.Run(name, func(b *testing.B) { benchFirstWrites(b, s, batch, ahead) })
		}
	}
}

func benchFirstWrites(b *testing.B, s *benchState, batch int, ahead bool) {
	windows := []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}
	every := time.Duration(batch) * time.Microsecond
	var prev *Snapshot[uint64, int64]
	var busy, delay [3]time.Duration
	var count [3]int
	var copies, chunks [3]uint64
	j := 0
	for b.Loop() {
		if prev != nil {
			prev.Release()
		}
		// NB: the writes of the rest of a one-second interval would have
		// made every page private again by now (and completed the partial
		// ones); this does it at once, between the timed windows.
		for s.cow.CopyAhead(1<<20) > 0 {
		}
		prev = s.cow.Freeze()
		copied, chunked := s.cow.Stats().PagesCopied, s.cow.Stats().ChunksCopied
		start := time.Now()
		for i, w := 0, 0; w < len(windows); i++ {
			due := start.Add(time.Duration(i) * every)
			now := time.Now()
			for now.Before(due) {
				if ahead {
					s.cow.CopyAhead(1)
				}
				now = time.Now()
			}
			if now.Sub(start) >= windows[w] {
				st := s.cow.Stats()
				copies[w] += st.PagesCopied - copied
				chunks[w] += st.ChunksCopied - chunked
				copied, chunked = st.PagesCopied, st.ChunksCopied
				w++
				continue
			}
			j = (j + batch) & (benchStream - 1)
			if j+batch > benchStream {
				j = 0
			}
			if batch > 1 {
				s.cow.Prefetch(s.hashes[j : j+batch])
			}
			for k := j; k < j+batch; k++ {
				p, _ := s.cow.UpsertHashed(s.hashes[k], s.keys[k])
				*p++
			}
			done := time.Now()
			busy[w] += done.Sub(now)
			delay[w] += done.Sub(due) * time.Duration(batch)
			count[w] += batch
		}
	}
	prev.Release()
	for w, end := range windows {
		b.ReportMetric(float64(busy[w].Nanoseconds())/float64(count[w]), fmt.Sprintf("ns/update<%v", end))
		b.ReportMetric(float64(delay[w].Nanoseconds())/float64(count[w]), fmt.Sprintf("delay-ns<%v", end))
		b.ReportMetric(float64(copies[w])/float64(count[w]), fmt.Sprintf("copies/update<%v", end))
		b.ReportMetric(float64(chunks[w])/float64(count[w]), fmt.Sprintf("chunks/update<%v", end))
	}
}

// BenchmarkWriteOutVarint is the write-out of a checkpoint of a 1M-key
// keyed count after every key changed (the delta of each of 128 key
// groups of ~7800 entries, keys and counts as varints, as the engine
// writes them), through the codecs ("codec") and through the varint
// form's own loop ("varint").
func BenchmarkWriteOutVarint(b *testing.B) {
	for _, form := range []string{"codec", "varint"} {
		b.Run(form, func(b *testing.B) {
			cfg := Config[uint64, int64]{Hash: keygroups.HashUint64, MaxParallelism: 128,
				KeyCodec: varintOf[uint64]{}, ValueCodec: varintOf[int64]{}}
			if form == "codec" {
				cfg.KeyCodec, cfg.ValueCodec = hidden[uint64]{cfg.KeyCodec}, hidden[int64]{cfg.ValueCodec}
			}
			m, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([]uint64, 1_000_000)
			for i := range keys {
				keys[i] = uint64(r.IntN(4_000_000))
				if err := m.Put(keys[i], 1); err != nil {
					b.Fatal(err)
				}
			}
			m.Freeze().Release()
			for _, k := range keys {
				p, _ := m.Upsert(k)
				*p++
			}
			snap := m.Freeze()
			defer snap.Release()
			var buf []byte
			entries := 0
			for i := 0; b.Loop(); i++ {
				buf, err = snap.AppendKeyGroupDelta(buf[:0], i&127)
				if err != nil {
					b.Fatal(err)
				}
				entries += snap.Len(i & 127)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
			b.SetBytes(int64(len(buf)))
		})
	}
}
