package operator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
)

// memState is a StateWriter and StateReader that keeps key group blobs in
// memory (full blobs and deltas, no reuse).
type memState struct {
	id     uint64
	kgs    map[string]map[int][]byte
	deltas map[string]map[int][][]byte
}

func newMemState(id uint64) *memState {
	return &memState{id: id, kgs: map[string]map[int][]byte{}, deltas: map[string]map[int][][]byte{}}
}

func (s *memState) PutKeyGroup(state string, kg int, blob []byte) error {
	if s.kgs[state] == nil {
		s.kgs[state] = map[int][]byte{}
	}
	s.kgs[state][kg] = slices.Clone(blob)
	return nil
}
func (s *memState) ReuseKeyGroup(string, int, uint64) error { return fmt.Errorf("no reuse here") }
func (s *memState) AppendKeyGroupDelta(state string, kg int, blob []byte) error {
	if s.deltas[state] == nil {
		s.deltas[state] = map[int][][]byte{}
	}
	s.deltas[state][kg] = append(s.deltas[state][kg], slices.Clone(blob))
	return nil
}
func (s *memState) PutSubtask(string, []byte) error { return nil }
func (s *memState) BeforeCommit(fn func() error)    { fn() }
func (s *memState) Pause() error                    { return nil }
func (s *memState) KeyGroup(state string, kg int) ([]byte, [][]byte, bool) {
	b, ok := s.kgs[state][kg]
	return b, s.deltas[state][kg], ok
}
func (s *memState) Subtask(string) [][]byte { return nil }
func (s *memState) Checkpoint() uint64      { return s.id }

// countOf counts records per key and window.
type countOf struct{}

func (countOf) Create() int64                 { return 0 }
func (countOf) Add(acc int64, _ uint64) int64 { return acc + 1 }
func (countOf) Result(acc int64) int64        { return acc }
func (countOf) Merge(a, b int64) int64        { return a + b }

type countResult = WindowResult[uint64, int64]

// newCountWindows opens a window count over keys (key = record % keys) of
// the key groups [0, 64) of 128, feeding out.
func newCountWindows(t *testing.T, w Windows, lateness time.Duration, out *collectInput[countResult]) *WindowAgg[uint64, uint64, int64, int64] {
	t.Helper()
	return newWindows(t, w, lateness, countOf{}, out)
}

// newWindows is newCountWindows with the aggregate agg.
func newWindows(t *testing.T, w Windows, lateness time.Duration, agg AggregateFunc[uint64, int64, int64], out *collectInput[countResult]) *WindowAgg[uint64, uint64, int64, int64] {
	t.Helper()
	keys := KeyFuncs[uint64, uint64]{Key: func(r uint64) uint64 { return r % 1000 }, Hash: keygroups.HashUint64}
	o := NewWindowAgg[uint64, uint64, int64, int64](keys, w, agg, WindowOptions[uint64]{AllowedLateness: lateness}, Input[countResult](out))
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128},
		Timed: true, Checkpoints: true, Metrics: &Metrics{}}
	if err := o.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range ctx.closers {
			c()
		}
	})
	return o
}

// sortedResults returns rs sorted, for comparing outputs whose order within
// a window is the state's.
func sortedResults(rs []countResult) []countResult {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b countResult) int {
		if a.Start != b.Start {
			return cmpInt64(a.Start, b.Start)
		}
		if a.Key != b.Key {
			return cmpInt64(int64(a.Key), int64(b.Key))
		}
		return cmpInt64(a.Value, b.Value)
	})
	return rs
}

// TestPanesRestore runs window counts of tumbling and sliding windows with
// an allowed lateness, takes a checkpoint midway (some panes open, one
// fired and kept for its lateness), and checks that an operator restored
// from it emits, for the rest of the input, exactly what the original
// does: the windows' counts, including a late record's update of the fired
// window.
func TestPanesRestore(t *testing.T) {
	for _, w := range []Windows{
		{Kind: Tumbling, Size: 10 * time.Millisecond},
		{Kind: Sliding, Size: 30 * time.Millisecond, Slide: 10 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(w.Kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
			batch := func(from, to int64) ([]uint64, []int64) {
				var recs []uint64
				var ts []int64
				for range 500 {
					recs = append(recs, rng.Uint64N(5000))
					ts = append(ts, from+rng.Int64N(to-from))
				}
				return recs, ts
			}
			var out, restoredOut collectInput[countResult]
			o := newCountWindows(t, w, 15*time.Millisecond, &out)
			o.Push(batch(0, 40))
			o.Watermark(12) // fires [0,10), kept till 24
			o.Push(batch(30, 50))

			s, err := o.SnapshotState(1)
			if err != nil {
				t.Fatal(err)
			}
			st := newMemState(1)
			if err := s.WriteTo(st); err != nil {
				t.Fatal(err)
			}
			s.Release()
			r := newCountWindows(t, w, 15*time.Millisecond, &restoredOut)
			if err := r.RestoreState(st); err != nil {
				t.Fatal(err)
			}
			out.recs, out.ts = nil, nil

			late, lateTs := batch(0, 10) // into the fired window, within its lateness
			rest, restTs := batch(40, 60)
			for _, op := range []*WindowAgg[uint64, uint64, int64, int64]{o, r} {
				op.Push(late, lateTs)
				op.Push(rest, restTs)
				op.Watermark(30)
				op.Watermark(MaxWatermark)
			}
			if len(out.recs) == 0 {
				t.Fatal("the original emitted nothing after the checkpoint")
			}
			want, got := sortedResults(out.recs), sortedResults(restoredOut.recs)
			if !slices.Equal(want, got) {
				t.Fatalf("restored operator emitted %d results, the original %d; first difference at %d", len(got), len(want),
					firstDiff(want, got))
			}
			if len(o.panes.open) != 0 || len(r.panes.open) != 0 {
				t.Fatalf("panes left open after the last watermark: %d and %d", len(o.panes.open), len(r.panes.open))
			}
		})
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPanesRestoreEarlierLayout checks that windows an earlier version
// kept in one table of (key, window) entries, under state "windows",
// restore into panes: firing them emits each entry's count.
func TestPanesRestoreEarlierLayout(t *testing.T) {
	ctx := &Context{Operator: "count", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
	old := newTable[winKey[uint64], winState[int64]](ctx, "windows", func(k winKey[uint64]) uint64 {
		return winHash(keygroups.HashUint64(k.key), k.win, 128)
	})
	defer old.m.Close()
	var want []countResult
	for k := range uint64(300) {
		for _, win := range []Window{{0, 10}, {10, 20}} {
			n := int64(k%7 + 1)
			wk := winKey[uint64]{k, win}
			if err := old.m.Put(wk, winState[int64]{acc: n, ok: true}); err != nil {
				t.Fatal(err)
			}
			want = append(want, countResult{Key: k, Start: win.Start, End: win.End, Value: n})
		}
	}
	s, err := old.freeze(1)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemState(1)
	if err := s.WriteTo(st); err != nil {
		t.Fatal(err)
	}
	s.Release()

	var out collectInput[countResult]
	o := newCountWindows(t, Windows{Kind: Tumbling, Size: 10 * time.Millisecond}, 0, &out)
	if err := o.RestoreState(st); err != nil {
		t.Fatal(err)
	}
	o.Watermark(MaxWatermark)
	if got := sortedResults(out.recs); !slices.Equal(got, sortedResults(want)) {
		t.Fatalf("restored %d window results from the table layout, want %d; first difference at %d",
			len(got), len(want), firstDiff(got, sortedResults(want)))
	}
}

// TestPanesRejectBadBlob checks that a key group blob of panes that is not
// one fails the restore with an error naming the state and key group.
func TestPanesRejectBadBlob(t *testing.T) {
	for _, blob := range [][]byte{{}, {9, 1}, {panesVersion, 1, 2}, {panesVersion, 1, 0, 20, 0, 5, 1, 2}} {
		var out collectInput[countResult]
		o := newCountWindows(t, Windows{Kind: Tumbling, Size: 10 * time.Millisecond}, 0, &out)
		st := newMemState(1)
		st.PutKeyGroup("panes", 3, blob)
		err := o.RestoreState(st)
		if err == nil {
			t.Fatalf("blob %v restored without error", blob)
		}
		if want := `state "panes" key group 3`; !strings.Contains(err.Error(), want) {
			t.Fatalf("blob %v: error %q does not name %s", blob, err, want)
		}
	}
}

// TestJoinPanesRestore checks that a window join restored from a
// checkpoint taken midway emits, for the rest of the input, exactly what
// the original does, and that the buffered records an earlier version
// kept in tables of (key, window) entries restore too.
func TestJoinPanesRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	type pair struct{ L, R uint64 }
	keys := KeyFuncs[uint64, uint64]{Key: func(r uint64) uint64 { return r % 100 }, Hash: keygroups.HashUint64}
	open := func(out *collectInput[pair]) *WindowJoin[uint64, uint64, uint64, pair] {
		j := NewWindowJoin(keys, keys, Windows{Kind: Tumbling, Size: 10 * time.Millisecond},
			func(l, r uint64) pair { return pair{l, r} }, Input[pair](out))
		ctx := &Context{Operator: "join", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128},
			Timed: true, Checkpoints: true, Metrics: &Metrics{}}
		if err := j.Open(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, c := range ctx.closers {
				c()
			}
		})
		return j
	}
	batch := func(from, to int64) ([]uint64, []int64) {
		var recs []uint64
		var ts []int64
		for range 300 {
			recs = append(recs, rng.Uint64N(1_000_000))
			ts = append(ts, from+rng.Int64N(to-from))
		}
		return recs, ts
	}
	sorted := func(ps []pair) []pair {
		ps = slices.Clone(ps)
		slices.SortFunc(ps, func(a, b pair) int {
			if a.L != b.L {
				return cmpInt64(int64(a.L), int64(b.L))
			}
			return cmpInt64(int64(a.R), int64(b.R))
		})
		return ps
	}
	var out, restoredOut collectInput[pair]
	j := open(&out)
	j.Left().Push(batch(0, 30))
	j.Right().Push(batch(0, 30))
	j.Watermark(9)
	s, err := j.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemState(1)
	if err := s.WriteTo(st); err != nil {
		t.Fatal(err)
	}
	s.Release()
	r := open(&restoredOut)
	if err := r.RestoreState(st); err != nil {
		t.Fatal(err)
	}
	out.recs, out.ts = nil, nil
	l2, l2ts := batch(10, 40)
	r2, r2ts := batch(10, 40)
	for _, op := range []*WindowJoin[uint64, uint64, uint64, pair]{j, r} {
		op.Left().Push(l2, l2ts)
		op.Right().Push(r2, r2ts)
		op.Watermark(MaxWatermark)
	}
	if len(out.recs) == 0 || !slices.Equal(sorted(out.recs), sorted(restoredOut.recs)) {
		t.Fatalf("restored join emitted %d pairs, the original %d", len(restoredOut.recs), len(out.recs))
	}

	// The earlier layout: the same buffered records in "left" and "right"
	// tables restore to the same pairs.
	ctx := &Context{Operator: "join", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
	wh := func(k winKey[uint64]) uint64 { return winHash(keygroups.HashUint64(k.key), k.win, 128) }
	lt := newTable[winKey[uint64], []uint64](ctx, "left", wh)
	rt := newTable[winKey[uint64], []uint64](ctx, "right", wh)
	defer lt.m.Close()
	defer rt.m.Close()
	old := newMemState(2)
	for _, side := range []struct {
		tb   *keyedTable[winKey[uint64], []uint64]
		recs []uint64
		ts   []int64
	}{{lt, l2, l2ts}, {rt, r2, r2ts}} {
		for i, rec := range side.recs {
			start := floorDiv(side.ts[i], 10) * 10
			wk := winKey[uint64]{rec % 100, Window{start, start + 10}}
			v, err := side.tb.m.Upsert(wk)
			if err != nil {
				t.Fatal(err)
			}
			*v = append(*v, rec)
		}
		snap, err := side.tb.freeze(2)
		if err != nil {
			t.Fatal(err)
		}
		if err := snap.WriteTo(old); err != nil {
			t.Fatal(err)
		}
		snap.Release()
	}
	var fresh, legacy collectInput[pair]
	f := open(&fresh)
	f.Left().Push(l2, l2ts)
	f.Right().Push(r2, r2ts)
	f.Watermark(MaxWatermark)
	lj := open(&legacy)
	if err := lj.RestoreState(old); err != nil {
		t.Fatal(err)
	}
	lj.Watermark(MaxWatermark)
	if len(fresh.recs) == 0 || !slices.Equal(sorted(fresh.recs), sorted(legacy.recs)) {
		t.Fatalf("join restored from the table layout emitted %d pairs, want %d", len(legacy.recs), len(fresh.recs))
	}
}
