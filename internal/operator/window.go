package operator

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/ringflow/ringflow/snapshot/cow"
)

// WindowKind says how windows are assigned.
type WindowKind int

const (
	// Tumbling windows of Size, aligned to the epoch, do not overlap.
	Tumbling WindowKind = iota
	// Sliding windows of Size start every Slide, aligned to the epoch.
	Sliding
	// Session windows close after Gap without records for their key; a
	// record opens [ts, ts+Gap), and windows of a key that overlap merge.
	Session
)

// Windows describes an event-time window assignment.
type Windows struct {
	Kind  WindowKind
	Size  time.Duration // Tumbling, Sliding
	Slide time.Duration // Sliding
	Gap   time.Duration // Session
}

// Validate reports what is wrong with w, if anything.
func (w Windows) Validate() error {
	switch w.Kind {
	case Tumbling:
		if w.Size.Milliseconds() < 1 {
			return fmt.Errorf("tumbling window size %v: must be at least 1ms", w.Size)
		}
	case Sliding:
		if w.Size.Milliseconds() < 1 || w.Slide.Milliseconds() < 1 {
			return fmt.Errorf("sliding window size %v, slide %v: both must be at least 1ms", w.Size, w.Slide)
		}
	case Session:
		if w.Gap.Milliseconds() < 1 {
			return fmt.Errorf("session gap %v: must be at least 1ms", w.Gap)
		}
	default:
		return fmt.Errorf("unknown window kind %d", w.Kind)
	}
	return nil
}

// Window is the half-open event-time interval [Start, End), in epoch ms.
type Window struct{ Start, End int64 }

// MaxTimestamp is the last timestamp in the window; its results carry it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// assign appends the windows a record at ts belongs to.
func (w Windows) assign(ts int64, dst []Window) []Window {
	switch w.Kind {
	case Tumbling:
		size := w.Size.Milliseconds()
		start := floorDiv(ts, size) * size
		return append(dst, Window{start, start + size})
	case Sliding:
		size, slide := w.Size.Milliseconds(), w.Slide.Milliseconds()
		for start := floorDiv(ts, slide) * slide; start > ts-size; start -= slide {
			dst = append(dst, Window{start, start + size})
		}
		return dst
	}
	return append(dst, Window{ts, ts + w.Gap.Milliseconds()})
}

// WindowResult is one window's result for one key.
type WindowResult[K comparable, O any] struct {
	Key   K
	Start int64 // window start, epoch ms
	End   int64 // window end (exclusive), epoch ms
	Value O
}

// WindowOptions are the less common window settings.
type WindowOptions[T any] struct {
	// AllowedLateness keeps a window's state this long after it fired;
	// records arriving meanwhile update it and fire it again.
	AllowedLateness time.Duration
	// LateOutput, if set, names the side output (Context.SideOutputs) that
	// receives the records that arrive after their windows' allowed
	// lateness, with their timestamps; they are counted in
	// Metrics.LateDropped either way.
	LateOutput string
}

// winHash is the state hash of a key's window: in the key's key group, but
// spread over the table by the window, so that a key's many windows do not
// all probe from one slot.
func winHash(keyHash uint64, w Window, maxP int) uint64 {
	return cow.SubKeyHash(keyHash, uint64(w.Start)*0x9E3779B97F4A7C15^uint64(w.End), maxP)
}

type winKey[K comparable] struct {
	key K
	win Window
}

type winState[A any] struct {
	acc   A
	ok    bool
	fired bool // fired already; kept for the allowed lateness
}

// WindowAgg aggregates records per key and event-time window and emits each
// window's result when the watermark passes its end.
//
// Tumbling and sliding windows keep their state in panes, window first
// (see Panes). Session windows, whose bounds move as they merge, keep one
// table of (key, window) entries with a timer for each.
type WindowAgg[K comparable, T, A, O any] struct {
	Base
	keys     KeyFuncs[K, T]
	windows  Windows
	agg      AggregateFunc[T, A, O]
	adder    adder[T, A, O]
	opts     WindowOptions[T]
	next     Input[WindowResult[K, O]]
	panes    *panes[K, A]                        // tumbling and sliding windows
	table    *keyedTable[winKey[K], winState[A]] // session windows
	state    *cow.Map[winKey[K], winState[A]]
	fire     windowTimers[winKey[K]] // at the window's max timestamp
	cleanup  windowTimers[winKey[K]] // at max timestamp + allowed lateness
	sessions map[K][]Window          // a key's open sessions; derived from state
	late     *sideCollector[T]       // the late records' side output, if the job reads it
	wm       int64
	out      []WindowResult[K, O]
	outTs    []int64
	assigned []Window
	curPanes []*pane[K, A] // scratch of pushPanes
	klist    []K           // the batch's keys
	hashes   []uint64      // and their hashes: carried, or in own
	own      []uint64
	// carried holds the key hashes the Hash edge brought with the batch
	// being pushed (PushHashed), else nil.
	carried []uint64
	ahead   aheadChoice // whether the panes' entries are prefetched
}

// NewWindowAgg returns a window operator feeding next.
func NewWindowAgg[K comparable, T, A, O any](keys KeyFuncs[K, T], w Windows, agg AggregateFunc[T, A, O],
	opts WindowOptions[T], next Input[WindowResult[K, O]]) *WindowAgg[K, T, A, O] {
	return &WindowAgg[K, T, A, O]{keys: keys, windows: w, agg: agg, adder: newAdder(agg), opts: opts, next: next, wm: MinWatermark}
}

// Open implements Operator.
func (o *WindowAgg[K, T, A, O]) Open(ctx *Context) error {
	o.Ctx = ctx
	if o.windows.Kind == Session {
		o.table = newTable[winKey[K], winState[A]](ctx, "windows", o.windowHash)
		o.state = o.table.m
		o.sessions = make(map[K][]Window)
	} else {
		// NB: "windows" is where earlier versions kept these windows too:
		// declared, so that their checkpoints and savepoints restore (see
		// RestoreState); it stays empty.
		if err := ctx.Declare("windows", keyedLayout(reflect.TypeFor[winKey[K]](), Layout(reflect.TypeFor[winState[A]]()))); err != nil {
			return err
		}
		o.panes = newPanes[K, A](ctx, "panes", o.keys.Hash)
	}
	if name := o.opts.LateOutput; name != "" {
		if out, ok := ctx.SideOutputs[name]; ok {
			late, ok := out.(*sideCollector[T])
			if !ok {
				return fmt.Errorf("late records' side output %q: carries %s, not the window's input, %s",
					name, out.recordType(), reflect.TypeFor[T]())
			}
			late.reset(ctx.Timed)
			o.late = late
		}
	}
	return nil
}

// windowHash is the state hash of a (key, window) entry of the table.
func (o *WindowAgg[K, T, A, O]) windowHash(k winKey[K]) uint64 {
	return winHash(o.keys.Hash(k.key), k.win, o.Ctx.MaxParallelism)
}

var errNoEventTime = errors.New("windows need event time: give the source an EventTime (timestamps and watermarks)")

// PushHashed implements HashedInput.
func (o *WindowAgg[K, T, A, O]) PushHashed(recs []T, ts []int64, hashes []uint64) {
	o.carried = hashes
	o.Push(recs, ts)
	o.carried = nil
}

// Push implements Input.
func (o *WindowAgg[K, T, A, O]) Push(recs []T, ts []int64) {
	defer Guard(o.Ctx)
	if ts == nil {
		Fail(o.Ctx, errNoEventTime)
	}
	if o.panes != nil {
		o.pushPanes(recs, ts)
		return
	}
	lateness := o.opts.AllowedLateness.Milliseconds()
	o.hashes = hashKeys(o.keys, recs, o.carried, &o.klist, &o.own)
	for i := range recs {
		k, h := o.klist[i], o.hashes[i]
		o.assigned = o.windows.assign(ts[i], o.assigned[:0])
		if o.windows.Kind == Session {
			o.assigned[0] = o.mergeSessions(k, h, o.assigned[0])
		}
		taken := false
		for _, win := range o.assigned {
			if win.MaxTimestamp()+lateness <= o.wm {
				continue
			}
			taken = true
			wk := winKey[K]{k, win}
			p := upsert(o.Ctx, o.state, winHash(h, win, o.Ctx.MaxParallelism), wk)
			if !p.ok {
				p.acc, p.ok = o.agg.Create(), true
				o.fire.add(win.MaxTimestamp(), wk)
			}
			o.adder.add(&p.acc, &recs[i])
			if win.MaxTimestamp() <= o.wm { // a late record within the allowed lateness
				o.emit(wk, p.acc)
			}
		}
		if !taken {
			o.lateRecord(recs[i], ts[i])
		}
	}
	o.flush()
	if o.late != nil {
		o.late.flush()
	}
}

// pushPanes is Push for tumbling and sliding windows: each record updates
// its key's entry in the pane of each of its windows.
func (o *WindowAgg[K, T, A, O]) pushPanes(recs []T, ts []int64) {
	lateness := o.opts.AllowedLateness.Milliseconds()
	o.ahead.begin()
	o.hashes = hashKeys(o.keys, recs, o.carried, &o.klist, &o.own)
	if o.windows.Kind == Tumbling {
		// One window per record, mostly the previous record's.
		size := o.windows.Size.Milliseconds()
		var pn *pane[K, A]
		var win Window
		for i := range recs {
			if t := ts[i]; pn == nil || t < win.Start || t >= win.End {
				start := floorDiv(t, size) * size
				win = Window{start, start + size}
				if win.MaxTimestamp()+lateness <= o.wm {
					pn = nil
					o.lateRecord(recs[i], t)
					continue
				}
				pn = o.panes.get(win)
			}
			o.addTo(pn, i, &recs[i])
		}
	} else {
		// Sliding: a record's windows are those of every record in the
		// same slide, mostly the previous record's.
		slide := o.windows.Slide.Milliseconds()
		cur, curSlide := o.curPanes[:0], int64(0)
		for i := range recs {
			if s := floorDiv(ts[i], slide); i == 0 || s != curSlide {
				cur, curSlide = cur[:0], s
				o.assigned = o.windows.assign(ts[i], o.assigned[:0])
				for _, win := range o.assigned {
					if win.MaxTimestamp()+lateness > o.wm {
						cur = append(cur, o.panes.get(win))
					}
				}
			}
			if len(cur) == 0 {
				o.lateRecord(recs[i], ts[i])
			}
			for _, pn := range cur {
				o.addTo(pn, i, &recs[i])
			}
		}
		clear(cur) // NB: do not keep dropped panes reachable
		o.curPanes = cur[:0]
	}
	o.ahead.end(len(recs))
	o.flush()
	if o.late != nil {
		o.late.flush()
	}
}

// addTo adds *rec, record i of the batch, to its key's entry in pn. It is
// called for the batch's records in turn, and asks pn for the entries of
// the records a group ahead, which are mostly in the same pane (records
// come mostly in event-time order; see cow.Map.PrefetchAhead), when the
// prefetch policy says so.
func (o *WindowAgg[K, T, A, O]) addTo(pn *pane[K, A], i int, rec *T) {
	if o.ahead.on {
		pn.m.PrefetchAhead(o.hashes, i)
	}
	acc, created, err := pn.m.UpsertHashedNew(o.hashes[i], o.klist[i])
	if err != nil {
		Fail(o.Ctx, fmt.Errorf("window state for key %v: %w", o.klist[i], err))
	}
	if created {
		*acc = o.agg.Create()
	}
	o.adder.add(acc, rec)
	// A late record within the allowed lateness updates the result of its
	// window, fired already (maybe before a restore, which starts the
	// watermark afresh), or as late as its first record.
	if pn.fired || pn.win.MaxTimestamp() <= o.wm {
		pn.fired = true
		o.emit(winKey[K]{o.klist[i], pn.win}, *acc)
	}
}

// firePanes emits the result of every pane whose window the watermark wm
// passed, and drops the panes past their allowed lateness.
func (o *WindowAgg[K, T, A, O]) firePanes(wm, lateness int64) {
	for i := 0; i < len(o.panes.open); {
		pn := o.panes.open[i]
		if pn.win.MaxTimestamp() > wm {
			break // the panes are in window order
		}
		if !pn.fired {
			pn.fired = true
			pn.all(func(k K, acc A) {
				o.emit(winKey[K]{k, pn.win}, acc)
				if len(o.out) >= 4096 {
					o.flush()
				}
			})
		}
		if lateness == 0 || wm == MaxWatermark || pn.win.MaxTimestamp()+lateness <= wm {
			o.panes.drop(pn)
			continue
		}
		i++
	}
	o.flush()
}

// lateRecord counts a record that every window it belongs to has dropped
// already (past its allowed lateness), and sends it to the late records'
// side output.
func (o *WindowAgg[K, T, A, O]) lateRecord(rec T, ts int64) {
	o.Ctx.Metrics.LateDropped.Add(1)
	if o.late != nil {
		o.late.EmitAt(rec, ts)
	}
}

// mergeSessions merges the new session window w of key k with the key's
// sessions that overlap it, and returns the merged window. The merged
// sessions' accumulators are combined into the merged window's state.
func (o *WindowAgg[K, T, A, O]) mergeSessions(k K, h uint64, w Window) Window {
	open := o.sessions[k]
	kept := open[:0:0]
	var acc A
	var have bool
	for _, s := range open {
		if s.Start >= w.End || w.Start >= s.End {
			kept = append(kept, s)
			continue
		}
		w = Window{min(w.Start, s.Start), max(w.End, s.End)}
		old := winKey[K]{k, s}
		oh := winHash(h, s, o.Ctx.MaxParallelism)
		if st, ok := o.state.GetHashed(oh, old); ok && st.ok {
			if have {
				acc = o.agg.Merge(acc, st.acc)
			} else {
				acc, have = st.acc, true
			}
		}
		o.state.DeleteHashed(oh, old) // its timers find no state and are dropped
	}
	o.sessions[k] = append(kept, w)
	if have {
		wk := winKey[K]{k, w}
		p := upsert(o.Ctx, o.state, winHash(h, w, o.Ctx.MaxParallelism), wk)
		if p.ok {
			acc = o.agg.Merge(acc, p.acc)
		}
		p.acc, p.ok = acc, true
		o.fire.add(w.MaxTimestamp(), wk)
	}
	return w
}

func (o *WindowAgg[K, T, A, O]) emit(wk winKey[K], acc A) {
	o.out = append(o.out, WindowResult[K, O]{Key: wk.key, Start: wk.win.Start, End: wk.win.End, Value: o.agg.Result(acc)})
	o.outTs = append(o.outTs, wk.win.MaxTimestamp())
}

func (o *WindowAgg[K, T, A, O]) flush() {
	if len(o.out) > 0 {
		o.next.Push(o.out, o.outTs)
		clear(o.out)
		o.out, o.outTs = o.out[:0], o.outTs[:0]
	}
}

// Watermark implements Operator: it fires every window whose end the
// watermark passed, and drops state past its allowed lateness.
func (o *WindowAgg[K, T, A, O]) Watermark(wm int64) {
	defer Guard(o.Ctx)
	o.wm = wm
	lateness := o.opts.AllowedLateness.Milliseconds()
	if o.panes != nil {
		o.firePanes(wm, lateness)
		return
	}
	for {
		_, wk, ok := o.fire.pop(wm)
		if !ok {
			break
		}
		h := winHash(o.keys.Hash(wk.key), wk.win, o.Ctx.MaxParallelism)
		st, ok := o.state.GetHashed(h, wk)
		if !ok || st.fired {
			continue // merged away, or fired by an earlier copy of this timer
		}
		o.emit(wk, st.acc)
		if lateness == 0 || wm == MaxWatermark {
			o.drop(h, wk)
		} else {
			upsert(o.Ctx, o.state, h, wk).fired = true
			o.cleanup.add(wk.win.MaxTimestamp()+lateness, wk)
		}
		if len(o.out) >= 4096 {
			o.flush()
		}
	}
	for {
		_, wk, ok := o.cleanup.pop(wm)
		if !ok {
			break
		}
		o.drop(winHash(o.keys.Hash(wk.key), wk.win, o.Ctx.MaxParallelism), wk)
	}
	o.flush()
}

// drop deletes a window's state (and, for sessions, its index entry); h is
// the window's hash (winHash).
func (o *WindowAgg[K, T, A, O]) drop(h uint64, wk winKey[K]) {
	o.state.DeleteHashed(h, wk)
	if o.sessions == nil {
		return
	}
	open := o.sessions[wk.key]
	for i, s := range open {
		if s == wk.win {
			open = append(open[:i:i], open[i+1:]...)
			break
		}
	}
	if len(open) == 0 {
		delete(o.sessions, wk.key)
	} else {
		o.sessions[wk.key] = open
	}
}

// SnapshotState implements Checkpointed. Timers and the session index are
// not stored: they follow from the windows in the state.
func (o *WindowAgg[K, T, A, O]) SnapshotState(id uint64) (StateSnapshot, error) {
	if o.panes != nil {
		return o.panes.freeze()
	}
	return o.table.freeze(id)
}

// RestoreState implements Checkpointed: it loads the windows and rebuilds
// their timers and the session index.
func (o *WindowAgg[K, T, A, O]) RestoreState(r StateReader) error {
	if o.panes != nil {
		return o.restorePanes(r)
	}
	if err := o.table.restore(r); err != nil {
		return err
	}
	lateness := o.opts.AllowedLateness.Milliseconds()
	kgs := o.state.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		for wk, st := range o.state.All(kg) {
			if st.fired {
				o.cleanup.add(wk.win.MaxTimestamp()+lateness, wk)
			} else {
				o.fire.add(wk.win.MaxTimestamp(), wk)
			}
			if o.sessions != nil {
				o.sessions[wk.key] = append(o.sessions[wk.key], wk.win)
			}
		}
	}
	return nil
}

// restorePanes loads the panes, and the windows an earlier version kept
// in a table of (key, window) entries, if the checkpoint has them.
func (o *WindowAgg[K, T, A, O]) restorePanes(r StateReader) error {
	if err := o.panes.restore(r); err != nil {
		return err
	}
	hash := o.keys.Hash
	var err error
	lerr := restoreKeyed(o.Ctx, r, "windows", o.windowHash, func(wk winKey[K], st winState[A]) {
		if !st.ok || err != nil {
			return
		}
		pn := o.panes.get(wk.win)
		var acc *A
		if acc, _, err = pn.m.UpsertHashedNew(hash(wk.key), wk.key); err == nil {
			*acc = st.acc
			pn.fired = pn.fired || st.fired
		}
	})
	return errors.Join(lerr, err)
}

// NotifyComplete implements CheckpointListener.
func (o *WindowAgg[K, T, A, O]) NotifyComplete(id uint64) error {
	if o.table != nil {
		o.table.complete(id)
	}
	return nil
}

// NotifyAborted implements CheckpointListener.
func (o *WindowAgg[K, T, A, O]) NotifyAborted(uint64) {}
