package operator

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"
)

// WindowJoin joins two keyed streams per key and event-time window: when the
// watermark passes a window's end, it emits f(l, r) for every pair of a left
// and a right record of the same key in that window (an inner join), with
// the window's max timestamp.
type WindowJoin[K comparable, L, R, O any] struct {
	Base
	lkeys   KeyFuncs[K, L]
	rkeys   KeyFuncs[K, R]
	windows Windows
	f       func(L, R) O
	next    Input[O]
	// The records of each side, window first (see Panes); a window's two
	// panes are joined and dropped together.
	left   *panes[K, []L]
	right  *panes[K, []R]
	larena listArena[L]
	rarena listArena[R]
	wm     int64
	out    []O
	outTs  []int64
	wins   []Window
	klist  []K      // the batch's keys
	hashes []uint64 // and their hashes: carried, or in own
	own    []uint64
	// Whether each side's entries are prefetched: a policy each, as the
	// two sides' records and lists differ.
	lahead, rahead aheadChoice
}

// NewWindowJoin returns a window join feeding next; its two inputs are Left
// and Right. Session windows are not supported (Validate the Windows first).
func NewWindowJoin[K comparable, L, R, O any](lkeys KeyFuncs[K, L], rkeys KeyFuncs[K, R], w Windows,
	f func(L, R) O, next Input[O]) *WindowJoin[K, L, R, O] {
	return &WindowJoin[K, L, R, O]{lkeys: lkeys, rkeys: rkeys, windows: w, f: f, next: next, wm: MinWatermark}
}

// Open implements Operator.
func (j *WindowJoin[K, L, R, O]) Open(ctx *Context) error {
	j.Ctx = ctx
	// NB: "left" and "right" are where earlier versions kept the buffered
	// records, in tables of (key, window) entries: declared so that their
	// checkpoints and savepoints restore (see RestoreState); they stay
	// empty.
	if err := ctx.Declare("left", keyedLayout(reflect.TypeFor[winKey[K]](), Layout(reflect.TypeFor[[]L]()))); err != nil {
		return err
	}
	if err := ctx.Declare("right", keyedLayout(reflect.TypeFor[winKey[K]](), Layout(reflect.TypeFor[[]R]()))); err != nil {
		return err
	}
	j.left = newPanes[K, []L](ctx, "left panes", j.lkeys.Hash)
	j.right = newPanes[K, []R](ctx, "right panes", j.lkeys.Hash)
	return nil
}

// SnapshotState implements Checkpointed; timers follow from the state.
func (j *WindowJoin[K, L, R, O]) SnapshotState(uint64) (StateSnapshot, error) {
	l, err := j.left.freeze()
	if err != nil {
		return nil, err
	}
	r, err := j.right.freeze()
	if err != nil {
		l.Release()
		return nil, err
	}
	return snapshots{l, r}, nil
}

// RestoreState implements Checkpointed. It also restores the tables of
// (key, window) entries of earlier versions.
func (j *WindowJoin[K, L, R, O]) RestoreState(sr StateReader) error {
	if err := j.left.restore(sr); err != nil {
		return err
	}
	if err := j.right.restore(sr); err != nil {
		return err
	}
	hash, maxP := j.lkeys.Hash, j.Ctx.MaxParallelism
	wh := func(k winKey[K]) uint64 { return winHash(hash(k.key), k.win, maxP) }
	var err error
	lerr := restoreKeyed(j.Ctx, sr, "left", wh, func(wk winKey[K], ls []L) {
		if err == nil {
			err = putList(j.left, hash, wk, ls)
		}
	})
	rerr := restoreKeyed(j.Ctx, sr, "right", wh, func(wk winKey[K], rs []R) {
		if err == nil {
			err = putList(j.right, hash, wk, rs)
		}
	})
	return errors.Join(lerr, rerr, err)
}

// putList adds list to key wk.key's list in the pane of window wk.win.
func putList[K comparable, T any](p *panes[K, []T], hash func(K) uint64, wk winKey[K], list []T) error {
	v, _, err := p.get(wk.win).m.UpsertHashedNew(hash(wk.key), wk.key)
	if err == nil {
		*v = append(*v, list...)
	}
	return err
}

// NotifyComplete implements CheckpointListener.
func (j *WindowJoin[K, L, R, O]) NotifyComplete(uint64) error { return nil }

// NotifyAborted implements CheckpointListener.
func (j *WindowJoin[K, L, R, O]) NotifyAborted(uint64) {}

// Left returns the join's left input.
func (j *WindowJoin[K, L, R, O]) Left() Input[L] { return joinLeft[K, L, R, O]{j} }

// Right returns the join's right input.
func (j *WindowJoin[K, L, R, O]) Right() Input[R] { return joinRight[K, L, R, O]{j} }

type joinLeft[K comparable, L, R, O any] struct{ j *WindowJoin[K, L, R, O] }

func (s joinLeft[K, L, R, O]) Push(recs []L, ts []int64) { s.PushHashed(recs, ts, nil) }

// PushHashed implements HashedInput.
func (s joinLeft[K, L, R, O]) PushHashed(recs []L, ts []int64, hashes []uint64) {
	defer Guard(s.j.Ctx)
	joinAdd(s.j, s.j.lkeys, s.j.left, &s.j.larena, &s.j.lahead, recs, ts, hashes)
}

type joinRight[K comparable, L, R, O any] struct{ j *WindowJoin[K, L, R, O] }

func (s joinRight[K, L, R, O]) Push(recs []R, ts []int64) { s.PushHashed(recs, ts, nil) }

// PushHashed implements HashedInput.
func (s joinRight[K, L, R, O]) PushHashed(recs []R, ts []int64, hashes []uint64) {
	defer Guard(s.j.Ctx)
	joinAdd(s.j, s.j.rkeys, s.j.right, &s.j.rarena, &s.j.rahead, recs, ts, hashes)
}

// joinAdd buffers records of one side in their windows' panes; carried are
// their key hashes, if the edge brought them, and ahead the side's prefetch
// policy.
func joinAdd[K comparable, T, L, R, O any](j *WindowJoin[K, L, R, O], keys KeyFuncs[K, T],
	side *panes[K, []T], arena *listArena[T], ahead *aheadChoice, recs []T, ts []int64, carried []uint64) {
	if ts == nil {
		Fail(j.Ctx, errNoEventTime)
	}
	if len(recs) == 0 {
		return
	}
	ahead.begin()
	j.hashes = hashKeys(keys, recs, carried, &j.klist, &j.own)
	for i := range recs {
		j.wins = j.windows.assign(ts[i], j.wins[:0])
		for _, w := range j.wins {
			if w.MaxTimestamp() <= j.wm {
				j.Ctx.Metrics.LateDropped.Add(1)
				continue
			}
			// Ask for the entries a group ahead, so that their cache
			// misses overlap, when the policy says so (see
			// WindowAgg.addTo).
			pn := side.get(w)
			if ahead.on {
				pn.m.PrefetchAhead(j.hashes, i)
			}
			p, _, err := pn.m.UpsertHashedNew(j.hashes[i], j.klist[i])
			if err != nil {
				Fail(j.Ctx, fmt.Errorf("join state for key %v: %w", j.klist[i], err))
			}
			*p = arena.append(*p, recs[i])
		}
	}
	ahead.end(len(recs))
}

// Watermark implements Operator: windows up to wm are joined and dropped.
func (j *WindowJoin[K, L, R, O]) Watermark(wm int64) {
	defer Guard(j.Ctx)
	j.wm = wm
	for {
		var w Window
		switch {
		case len(j.left.open) > 0 && (len(j.right.open) == 0 || !windowBefore(j.right.open[0].win, j.left.open[0].win)):
			w = j.left.open[0].win
		case len(j.right.open) > 0:
			w = j.right.open[0].win
		}
		if w == (Window{}) || w.MaxTimestamp() > wm {
			break
		}
		lp, rp := j.left.find(w), j.right.find(w)
		if lp != nil && rp != nil {
			j.join(lp, rp)
		}
		if lp != nil {
			j.left.drop(lp)
		}
		if rp != nil {
			j.right.drop(rp)
		}
	}
	j.flush()
}

// listArena gives the lists of buffered records their backing arrays,
// carved from chunks of a few tens of KiB: a key's first record in a window
// allocates nothing, where a slice of its own cost an allocation per key
// and window, about one per record of a join whose keys have a record or
// two per window.
//
// Appending never changes an element a snapshot of the list's older
// header can see: a list grows in place only past its length, and moves
// to a fresh array when full; so buffered lists are safe under
// copy-on-write. Chunks are not reused: a chunk is collected when no
// list, live or in a snapshot, refers to it.
type listArena[T any] struct{ chunk []T }

// listChunkBytes is the size of an arena's chunks, which holds a few
// hundred lists of small records.
const listChunkBytes = 32 << 10

func (a *listArena[T]) append(list []T, rec T) []T {
	if len(list) < cap(list) {
		return append(list, rec)
	}
	n := max(2, 2*cap(list))
	if len(a.chunk) < n {
		a.chunk = make([]T, max(n, listChunkBytes/max(1, int(unsafe.Sizeof(rec)))))
	}
	fresh := a.chunk[:len(list):n]
	a.chunk = a.chunk[n:]
	copy(fresh, list)
	return append(fresh, rec)
}

// windowBefore orders windows as panes are: by end, then start.
func windowBefore(a, b Window) bool {
	return a.End < b.End || a.End == b.End && a.Start < b.Start
}

// join emits f(l, r) for every pair of a left and a right record of one key
// in the panes of one window, probing the right pane with each left key.
func (j *WindowJoin[K, L, R, O]) join(lp *pane[K, []L], rp *pane[K, []R]) {
	ts := lp.win.MaxTimestamp()
	hash := j.lkeys.Hash
	lp.all(func(k K, ls []L) {
		rs, ok := rp.m.GetHashed(hash(k), k)
		if !ok {
			return
		}
		for _, l := range ls {
			for _, r := range rs {
				j.out = append(j.out, j.f(l, r))
				j.outTs = append(j.outTs, ts)
			}
		}
		if len(j.out) >= 4096 {
			j.flush()
		}
	})
}

func (j *WindowJoin[K, L, R, O]) flush() {
	if len(j.out) > 0 {
		j.next.Push(j.out, j.outTs)
		clear(j.out)
		j.out, j.outTs = j.out[:0], j.outTs[:0]
	}
}
