package pipelines

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/internal/prefetch"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// BenchmarkKeyedCountCeiling measures the most an engine can do on the
// keyed-count pipeline here, as BenchmarkMapFilterCeiling does for
// map-filter, with one table or another for the counts:
//
//   - gomap: a Go map per subtask, updated as the channel baseline does;
//   - cow: ringflow's keyed state (snapshot/cow), prefetched a batch at a
//     time, as the engine's rolling operators use it;
//   - flat: one open-addressing array of key and count per subtask, no
//     key groups, no copy-on-write, prefetched a batch at a time — about
//     the cheapest table there is for this work.
//
// The keyed edge cannot be fused away: a record's count lives with the
// subtask that owns its key group, on the other core half the time. So the
// loop is bulk-synchronous: in each round every source instance generates
// a chunk, hashes the keys (xxhash, as the spec's key groups require) and
// appends each record to its subtask's buffer, while every subtask counts
// the chunks of the round before, from every source, and digests the
// results into its lane; one barrier per round. No per-record hand-off, no
// frame, no call through a function value. The channel baseline runs in
// the same iteration; both must produce the same records and checksum.
// BenchmarkWindowCeiling and BenchmarkJoinCeiling run the window and join
// pipelines the same way.
func BenchmarkKeyedCountCeiling(b *testing.B) {
	for _, table := range []string{"gomap", "cow", "flat"} {
		b.Run(table, func(b *testing.B) {
			benchCeiling(b, "keyed-count", func(c Config, ls *lanes) (float64, error) {
				return fusedKeyedCount(c, table, ls)
			})
		})
	}
}

// ceilingChunk is how many records a source instance generates per round.
const ceilingChunk = 4096

// keyedChunk is what one source instance hands one subtask in a round.
type keyedChunk struct {
	recs   []Record
	hashes []uint64
}

// countTable counts a subtask's records: it adds each record's value to
// its key's count and leaves the new count in the record.
type countTable interface {
	count(ch *keyedChunk)
}

// fusedKeyedCount runs keyed-count bulk-synchronously on c.Parallelism
// goroutines (see BenchmarkKeyedCountCeiling) and returns its seconds.
func fusedKeyedCount(c Config, table string, ls *lanes) (float64, error) {
	par := c.Parallelism
	parts, err := keygroups.NewPartitioner(par, MaxParallelism)
	if err != nil {
		return 0, err
	}
	tables := make([]countTable, par)
	for j := range tables {
		if tables[j], err = newCountTable(table, j, c); err != nil {
			return 0, err
		}
	}
	// chunks[r%2][i][j]: what source i handed subtask j in round r.
	var chunks [2][][]keyedChunk
	for r := range chunks {
		chunks[r] = make([][]keyedChunk, par)
		for i := range chunks[r] {
			chunks[r][i] = make([]keyedChunk, par)
		}
	}
	spec := specOf(c, seedMain)
	var bar barrier
	bar.init(par)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s genSource
			s.init(spec, w, par, 0, new(atomic.Uint64))
			buf := make([]Record, ceilingChunk)
			hashes := make([]uint64, ceilingChunk)
			lane := &ls.l[w]
			for round := 0; ; round++ {
				// Generate and route this round's chunk.
				out := chunks[round%2][w]
				for j := range out {
					out[j].recs, out[j].hashes = out[j].recs[:0], out[j].hashes[:0]
				}
				n := s.next(buf)
				for i := range buf[:n] {
					h := keygroups.HashUint64(buf[i].Key)
					hashes[i] = h
				}
				for i := range buf[:n] {
					d := &out[parts.Subtask(hashes[i])]
					d.recs = append(d.recs, buf[i])
					d.hashes = append(d.hashes, hashes[i])
				}
				// Count what every source routed here last round.
				if round > 0 {
					for i := range par {
						ch := &chunks[(round-1)%2][i][w]
						tables[w].count(ch)
						for k := range ch.recs {
							lane.add(digestCount(&ch.recs[k]), ch.recs[k].SrcNanos)
						}
					}
				}
				if !bar.wait(round, n > 0) {
					break // no source produced anything this round
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start).Seconds(), nil
}

// barrier is a reusable barrier for the fused loop's goroutines that
// also tells them whether any of them still had work in the round.
type barrier struct {
	n       int32
	arrived atomic.Int32
	round   atomic.Uint32
	more    [2]atomic.Bool // by round parity
}

func (b *barrier) init(n int) { b.n = int32(n) }

// wait is called by every goroutine at the end of round, with whether it
// had work; it returns when all have arrived, with whether any had.
func (b *barrier) wait(round int, more bool) bool {
	if more {
		b.more[round%2].Store(true)
	}
	if b.arrived.Add(1) == b.n {
		b.arrived.Store(0)
		b.more[(round+1)%2].Store(false) // nobody writes it before the round opens
		b.round.Store(uint32(round + 1))
	} else {
		for spins := 0; b.round.Load() == uint32(round); spins++ {
			if spins > 100 {
				runtime.Gosched()
			}
		}
	}
	return b.more[round%2].Load()
}

// newCountTable returns subtask j's table of the given kind.
func newCountTable(kind string, j int, c Config) (countTable, error) {
	switch kind {
	case "gomap":
		return goMapTable{m: make(map[uint64]int64)}, nil
	case "cow":
		kgs, err := keygroups.RangeOf(j, c.Parallelism, MaxParallelism)
		if err != nil {
			return nil, err
		}
		m, err := cow.New(cow.Config[uint64, int64]{Hash: keygroups.HashUint64, MaxParallelism: MaxParallelism, KeyGroups: kgs})
		if err != nil {
			return nil, err
		}
		return &cowTable{m: m}, nil
	case "flat":
		size := uint64(1)
		for size < c.Keys/uint64(c.Parallelism)*4/3 {
			size <<= 1
		}
		return &flatTable{slots: make([]flatSlot, size), mask: size - 1}, nil
	}
	panic("unknown table " + kind)
}

type goMapTable struct{ m map[uint64]int64 }

func (t goMapTable) count(ch *keyedChunk) {
	for i := range ch.recs {
		r := &ch.recs[i]
		n := t.m[r.Key] + r.Value
		t.m[r.Key] = n
		r.Value = n
	}
}

type cowTable struct{ m *cow.Map[uint64, int64] }

func (t *cowTable) count(ch *keyedChunk) {
	for i := range ch.recs {
		r := &ch.recs[i]
		t.m.PrefetchAhead(ch.hashes, i)
		p, _, err := t.m.UpsertHashedNew(ch.hashes[i], r.Key)
		if err != nil {
			panic(err)
		}
		*p += r.Value
		r.Value = *p
	}
}

// flatSlot holds key+1 (0: empty) and its count.
type flatSlot struct{ key1, n uint64 }

type flatTable struct {
	slots []flatSlot
	mask  uint64
	ptrs  []unsafe.Pointer
}

func (t *flatTable) count(ch *keyedChunk) {
	for lo := 0; lo < len(ch.recs); lo += 1024 {
		hi := min(lo+1024, len(ch.recs))
		ptrs := t.ptrs[:0]
		for _, h := range ch.hashes[lo:hi] {
			ptrs = append(ptrs, unsafe.Pointer(&t.slots[flatHome(h, t.mask)]))
		}
		prefetch.Spans(ptrs, unsafe.Sizeof(flatSlot{}))
		t.ptrs = ptrs
		for i := lo; i < hi; i++ {
			r := &ch.recs[i]
			k1 := r.Key + 1
			for s := flatHome(ch.hashes[i], t.mask); ; s = (s + 1) & t.mask {
				sl := &t.slots[s]
				if sl.key1 == k1 || sl.key1 == 0 {
					sl.key1 = k1
					sl.n += uint64(r.Value)
					r.Value = int64(sl.n)
					break
				}
			}
		}
	}
}

// flatHome is a hash's home slot. NB: not the low bits, which hold the key
// group, and a subtask owns a range of key groups.
func flatHome(h, mask uint64) uint64 { return h >> 16 & mask }

// TestFusedKeyedCount checks the ceiling's loop against the channel
// baseline for every table, so that the benchmark measures the real work.
func TestFusedKeyedCount(t *testing.T) {
	for _, table := range []string{"gomap", "cow", "flat"} {
		for _, par := range []int{1, 2, 3} {
			c := Config{Pipeline: "keyed-count", Records: 300_001, Parallelism: par, Keys: 5000}.withDefaults()
			res, err := RunBaseline(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			ls := newLanes(c)
			if _, err := fusedKeyedCount(c, table, ls); err != nil {
				t.Fatal(err)
			}
			if n, sum := ls.total(new(Histogram)); n != res.SinkRecords || sum != res.Checksum {
				t.Errorf("%s, parallelism %d: %d records, checksum %#x; the baseline: %d, %#x",
					table, par, n, sum, res.SinkRecords, res.Checksum)
			}
		}
	}
}
