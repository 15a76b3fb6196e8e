package operator

import (
	"github.com/ringflow/ringflow/snapshot/cow"
)

// WindowJoin joins two keyed streams per key and event-time window: when the
// watermark passes a window's end, it emits f(l, r) for every pair of a left
// and a right record of the same key in that window (an inner join), with
// the window's max timestamp.
type WindowJoin[K comparable, L, R, O any] struct {
	Base
	lkeys    KeyFuncs[K, L]
	rkeys    KeyFuncs[K, R]
	windows  Windows
	f        func(L, R) O
	next     Input[O]
	ltable   *keyedTable[winKey[K], []L]
	rtable   *keyedTable[winKey[K], []R]
	left     *cow.Map[winKey[K], []L]
	right    *cow.Map[winKey[K], []R]
	fire     windowTimers[winKey[K]]
	wm       int64
	out      []O
	outTs    []int64
	wins     []Window
	klist    []K      // the batch's keys
	hashes   []uint64 // and their hashes
	pfHashes []uint64 // scratch of joinAdd's prefetch
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
	hash, maxP := j.lkeys.Hash, ctx.MaxParallelism
	wh := func(k winKey[K]) uint64 { return winHash(hash(k.key), k.win, maxP) }
	j.ltable = newTable[winKey[K], []L](ctx, "left", wh)
	j.rtable = newTable[winKey[K], []R](ctx, "right", wh)
	j.left, j.right = j.ltable.m, j.rtable.m
	return nil
}

// SnapshotState implements Checkpointed; timers follow from the state.
func (j *WindowJoin[K, L, R, O]) SnapshotState(id uint64) (StateSnapshot, error) {
	l, err := j.ltable.freeze(id)
	if err != nil {
		return nil, err
	}
	r, err := j.rtable.freeze(id)
	if err != nil {
		l.Release()
		return nil, err
	}
	return snapshots{l, r}, nil
}

// RestoreState implements Checkpointed.
func (j *WindowJoin[K, L, R, O]) RestoreState(sr StateReader) error {
	if err := j.ltable.restore(sr); err != nil {
		return err
	}
	if err := j.rtable.restore(sr); err != nil {
		return err
	}
	kgs := j.left.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		for wk := range j.left.All(kg) {
			j.fire.add(wk.win.MaxTimestamp(), wk)
		}
		for wk := range j.right.All(kg) {
			j.fire.add(wk.win.MaxTimestamp(), wk)
		}
	}
	return nil
}

// NotifyComplete implements CheckpointListener.
func (j *WindowJoin[K, L, R, O]) NotifyComplete(id uint64) error {
	j.ltable.complete(id)
	j.rtable.complete(id)
	return nil
}

// NotifyAborted implements CheckpointListener.
func (j *WindowJoin[K, L, R, O]) NotifyAborted(uint64) {}

// Left returns the join's left input.
func (j *WindowJoin[K, L, R, O]) Left() Input[L] { return joinLeft[K, L, R, O]{j} }

// Right returns the join's right input.
func (j *WindowJoin[K, L, R, O]) Right() Input[R] { return joinRight[K, L, R, O]{j} }

type joinLeft[K comparable, L, R, O any] struct{ j *WindowJoin[K, L, R, O] }

func (s joinLeft[K, L, R, O]) Push(recs []L, ts []int64) {
	defer Guard(s.j.Ctx)
	joinAdd(s.j, s.j.lkeys, s.j.left, recs, ts)
}

type joinRight[K comparable, L, R, O any] struct{ j *WindowJoin[K, L, R, O] }

func (s joinRight[K, L, R, O]) Push(recs []R, ts []int64) {
	defer Guard(s.j.Ctx)
	joinAdd(s.j, s.j.rkeys, s.j.right, recs, ts)
}

// joinAdd buffers records of one side in their windows.
func joinAdd[K comparable, T, L, R, O any](j *WindowJoin[K, L, R, O], keys KeyFuncs[K, T],
	side *cow.Map[winKey[K], []T], recs []T, ts []int64) {
	if ts == nil {
		Fail(j.Ctx, errNoEventTime)
	}
	hashKeys(keys, recs, &j.klist, &j.hashes)
	// Ask for the batch's state entries first, so that their cache misses
	// overlap.
	j.pfHashes = prefetchWindows(side, j.windows, j.hashes, ts, j.pfHashes, &j.wins, j.Ctx.MaxParallelism)
	for i := range recs {
		k, h := j.klist[i], j.hashes[i]
		j.wins = j.windows.assign(ts[i], j.wins[:0])
		for _, w := range j.wins {
			if w.MaxTimestamp() <= j.wm {
				j.Ctx.Metrics.LateDropped.Add(1)
				continue
			}
			wk := winKey[K]{k, w}
			p := upsert(j.Ctx, side, winHash(h, w, j.Ctx.MaxParallelism), wk)
			if len(*p) == 0 {
				// One timer per window and side; the second pop finds
				// the window joined and gone.
				j.fire.add(w.MaxTimestamp(), wk)
			}
			// NB: appending never changes the elements a snapshot of the
			// old slice header can see, so buffered lists are safe under
			// copy-on-write.
			*p = append(*p, recs[i])
		}
	}
}

// Watermark implements Operator: windows up to wm are joined and dropped.
func (j *WindowJoin[K, L, R, O]) Watermark(wm int64) {
	defer Guard(j.Ctx)
	j.wm = wm
	for {
		_, wk, ok := j.fire.pop(wm)
		if !ok {
			break
		}
		h := winHash(j.lkeys.Hash(wk.key), wk.win, j.Ctx.MaxParallelism)
		ls, lok := j.left.GetHashed(h, wk)
		rs, rok := j.right.GetHashed(h, wk)
		if !lok && !rok {
			continue // joined already, at the other side's timer
		}
		for _, l := range ls {
			for _, r := range rs {
				j.out = append(j.out, j.f(l, r))
				j.outTs = append(j.outTs, wk.win.MaxTimestamp())
			}
		}
		j.left.DeleteHashed(h, wk)
		j.right.DeleteHashed(h, wk)
		if len(j.out) >= 4096 {
			j.flush()
		}
	}
	j.flush()
}

func (j *WindowJoin[K, L, R, O]) flush() {
	if len(j.out) > 0 {
		j.next.Push(j.out, j.outTs)
		clear(j.out)
		j.out, j.outTs = j.out[:0], j.outTs[:0]
	}
}
