package pipelines

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// BenchmarkWindowCeiling measures the most an engine can do on the window
// pipeline here, and BenchmarkJoinCeiling on the join: generate, assign
// event time, route by key, count (or buffer and join) per key and window,
// fire each window once every sender's watermark has passed it, and digest
// the results into the sink's lanes.
//
// Like keyed-count, these cannot fuse the keyed edge away: a key's
// windows live with the subtask that owns its key group. So they share
// fusedKeyedCount's bulk-synchronous loop (see BenchmarkKeyedCountCeiling):
// in each round every source instance generates a chunk, hashes the keys
// and routes each record to its subtask's buffer, and stamps its watermark
// (its newest record's event time - 1 ms, as the sources of both engines
// do); every subtask adds the chunks of the round before, sender by
// sender, and after each sender's chunk advances an eventClock with that
// sender's watermark and fires the windows the minimum over its senders
// has passed, as the channel baseline does after each batch. One barrier
// per round; the join's goroutines each run a left and a right source
// instance.
//
// The window count keeps its counts in one of three tables per window:
//
//   - gomap: a Go map of counts and one of sample times, as the channel
//     baseline has (the sample map takes one record in SampleEvery);
//   - gomap16: one Go map of the 16-byte accumulator the engine's window
//     keeps (WindowCount: count and newest sample time);
//   - cow16: ringflow's keyed state (snapshot/cow) of that accumulator,
//     prefetched a batch at a time, cleared and reused when the window
//     fires, as the engine's window panes are.
func BenchmarkWindowCeiling(b *testing.B) {
	for _, table := range []string{"gomap", "gomap16", "cow16"} {
		b.Run(table, func(b *testing.B) {
			benchCeiling(b, "window", func(c Config, ls *lanes) (float64, error) {
				return fusedWindowed(c, table, ls)
			})
		})
	}
}

// BenchmarkJoinCeiling: see BenchmarkWindowCeiling.
func BenchmarkJoinCeiling(b *testing.B) {
	benchCeiling(b, "join", func(c Config, ls *lanes) (float64, error) {
		return fusedWindowed(c, "", ls)
	})
}

// windowOp is one subtask's windowed operator in the fused loop. Its
// methods take a chunk or a watermark at a time; the work per record stays
// in their loops, with no call through an interface or function value.
type windowOp interface {
	// add adds what sender handed this subtask in a round.
	add(recs []Record, sender int)
	// watermark advances sender's watermark to wm and fires into l every
	// window the minimum over all senders has passed.
	watermark(sender int, wm int64, l *lane)
	// finish fires every window left into l, at the end of the input.
	finish(l *lane)
}

// fusedWindowed runs the window or join pipeline of c bulk-synchronously
// on c.Parallelism goroutines (see BenchmarkWindowCeiling), the window's
// counts in the given kind of table, and returns its seconds.
func fusedWindowed(c Config, table string, ls *lanes) (float64, error) {
	par := c.Parallelism
	parts, err := keygroups.NewPartitioner(par, MaxParallelism)
	if err != nil {
		return 0, err
	}
	run := &windowedRun{specs: []sourceSpec{specOf(c, seedMain)}, par: par, stride: c.EventStride, parts: parts}
	if c.Pipeline == "join" {
		run.specs = append(run.specs, specOf(c, seedRight))
	}
	senders := len(run.specs) * par
	for r := range run.routed {
		run.routed[r] = make([][][]Record, senders)
		for s := range run.routed[r] {
			run.routed[r][s] = make([][]Record, par)
		}
		run.wms[r] = make([]int64, senders)
	}
	run.bar.init(par)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range par {
		op, err := newWindowOp(c, table, w, senders)
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.subtask(w, op, &ls.l[w])
		}()
	}
	wg.Wait()
	return time.Since(start).Seconds(), nil
}

// newWindowOp returns subtask j of c's windowed operator, with senders
// senders, its counts in the given kind of table.
func newWindowOp(c Config, table string, j, senders int) (windowOp, error) {
	if c.Pipeline == "join" {
		return newFusedJoin(senders, c.Parallelism, c.EventStride), nil
	}
	newPane := func() countPane { return &goMapPane{counts: make(map[uint64]int64), samples: make(map[uint64]int64)} }
	switch table {
	case "gomap":
	case "gomap16":
		newPane = func() countPane { return goMap16Pane{m: make(map[uint64]WindowCount)} }
	case "cow16":
		kgs, err := keygroups.RangeOf(j, c.Parallelism, MaxParallelism)
		if err != nil {
			return nil, err
		}
		cfg := cow.Config[uint64, WindowCount]{Hash: keygroups.HashUint64, MaxParallelism: MaxParallelism, KeyGroups: kgs}
		if _, err := cow.New(cfg); err != nil {
			return nil, err
		}
		newPane = func() countPane {
			m, _ := cow.New(cfg)
			return &cowPane{m: m}
		}
	default:
		return nil, fmt.Errorf("unknown table %q", table)
	}
	return newFusedCounts(senders, c.EventStride, newPane), nil
}

// windowedRun is what the goroutines of fusedWindowed share. Sender
// s·par + i is instance i of source s, the join's left source being
// source 0.
type windowedRun struct {
	specs  []sourceSpec
	par    int
	stride uint64 // records per ms of event time
	parts  *keygroups.Partitioner
	// routed[r%2][s][j]: what sender s handed subtask j in round r;
	// wms[r%2][s]: sender s's watermark after round r.
	routed [2][][][]Record
	wms    [2][]int64
	bar    barrier
}

// subtask runs goroutine w: instance w of every source, and subtask w of
// the windowed operator, op, which emits into lane l.
func (run *windowedRun) subtask(w int, op windowOp, l *lane) {
	src := make([]genSource, len(run.specs))
	wm := make([]int64, len(run.specs))
	for s := range src {
		src[s].init(run.specs[s], w, run.par, 0, new(atomic.Uint64))
		wm[s] = math.MinInt64
	}
	buf := make([]Record, ceilingChunk)
	for round := 0; ; round++ {
		// Generate, stamp and route this round's chunks.
		more := false
		for s := range src {
			sender := s*run.par + w
			n := src[s].next(buf)
			route(buf[:n], run.routed[round%2][sender], run.parts)
			if n > 0 {
				wm[s] = timeMs(buf[n-1].Seq, run.stride) - 1
				more = true
			}
			run.wms[round%2][sender] = wm[s]
		}
		// Window what every sender routed here last round.
		if round > 0 {
			prev := (round - 1) % 2
			for sender, senderWm := range run.wms[prev] {
				op.add(run.routed[prev][sender][w], sender)
				op.watermark(sender, senderWm, l)
			}
		}
		if !run.bar.wait(round, more) {
			break // no source produced anything this round
		}
	}
	op.finish(l)
}

// route appends each record of recs to out[j] of the subtask j that owns
// its key group, after emptying out.
func route(recs []Record, out [][]Record, parts *keygroups.Partitioner) {
	for j := range out {
		out[j] = out[j][:0]
	}
	for i := range recs {
		j := parts.Subtask(keygroups.HashUint64(recs[i].Key))
		out[j] = append(out[j], recs[i])
	}
}

// fusedCounts is one subtask's window count, each open window's counts in
// a countPane.
//
// NB: with gomap, each open window is a Go map of counts by key, as in the
// baseline: counts[key]++ is one probe of the map, which holds the count
// in the slot it finds the key in (no second lookup and no second cache
// line, as a map to an index into a slice of counts would have). The
// newest sample time goes in a map of its own, as one record in
// SampleEvery has one. A fired window's panes are cleared and reused by a
// later window, so they stop growing after the first window, where the
// baseline allocates and grows new maps for every window. A Go map rather
// than an open-addressing array of our own, because that is the table a
// Go programmer would reach for and the one the baseline uses;
// BenchmarkKeyedCountCeiling shows what a flat array gains on counts.
type fusedCounts struct {
	clock   eventClock
	stride  uint64              // records per ms of event time
	newPane func() countPane    // a table for a window's counts
	open    []*fusedCountWindow // in no order; rarely more than two
	free    []*fusedCountWindow // fired and cleared, to reuse
	late    uint64
}

type fusedCountWindow struct {
	start int64
	pane  countPane
}

// countPane holds one window's counts; its methods take a run of records
// of the window at a time.
type countPane interface {
	add(recs []Record)
	// each calls f with every key's count and newest sample time.
	each(f func(key uint64, n, sample int64))
	clear()
}

func newFusedCounts(senders int, stride uint64, newPane func() countPane) *fusedCounts {
	return &fusedCounts{clock: newEventClock(senders), stride: stride, newPane: newPane}
}

func (w *fusedCounts) add(recs []Record, _ int) {
	for len(recs) > 0 {
		start := windowStart(timeMs(recs[0].Seq, w.stride))
		n := 1
		for n < len(recs) && windowStart(timeMs(recs[n].Seq, w.stride)) == start {
			n++
		}
		if w.clock.late(start) {
			w.late += uint64(n)
		} else {
			w.window(start).pane.add(recs[:n])
		}
		recs = recs[n:]
	}
}

// window returns the open window starting at start, opening it if need be.
func (w *fusedCounts) window(start int64) *fusedCountWindow {
	for _, win := range w.open {
		if win.start == start {
			return win
		}
	}
	var win *fusedCountWindow
	if n := len(w.free); n > 0 {
		win, w.free = w.free[n-1], w.free[:n-1]
	} else {
		win = &fusedCountWindow{pane: w.newPane()}
	}
	win.start = start
	w.open = append(w.open, win)
	return win
}

func (w *fusedCounts) watermark(sender int, wm int64, l *lane) {
	if w.clock.advance(sender, wm) {
		w.fire(w.clock.wm, l)
	}
}

func (w *fusedCounts) finish(l *lane) { w.fire(math.MaxInt64, l) }

// fire emits into l, and recycles, every window the watermark wm has
// passed.
func (w *fusedCounts) fire(wm int64, l *lane) {
	open := w.open[:0]
	for _, win := range w.open {
		if win.start+windowSizeMs-1 > wm {
			open = append(open, win)
			continue
		}
		win.pane.each(func(k uint64, n, sample int64) { l.add(digestWindow(k, win.start, n), sample) })
		win.pane.clear()
		w.free = append(w.free, win)
	}
	clear(w.open[len(open):])
	w.open = open
}

type goMapPane struct{ counts, samples map[uint64]int64 }

func (p *goMapPane) add(recs []Record) {
	for i := range recs {
		r := &recs[i]
		p.counts[r.Key]++
		if r.SrcNanos != 0 {
			p.samples[r.Key] = max(p.samples[r.Key], r.SrcNanos)
		}
	}
}

func (p *goMapPane) each(f func(key uint64, n, sample int64)) {
	for k, n := range p.counts {
		f(k, n, p.samples[k])
	}
}

func (p *goMapPane) clear() { clear(p.counts); clear(p.samples) }

type goMap16Pane struct{ m map[uint64]WindowCount }

func (p goMap16Pane) add(recs []Record) {
	for i := range recs {
		r := &recs[i]
		acc := p.m[r.Key]
		acc.Count++
		acc.SrcNanos = max(acc.SrcNanos, r.SrcNanos)
		p.m[r.Key] = acc
	}
}

func (p goMap16Pane) each(f func(key uint64, n, sample int64)) {
	for k, acc := range p.m {
		f(k, acc.Count, acc.SrcNanos)
	}
}

func (p goMap16Pane) clear() { clear(p.m) }

// cowPane hashes a run's keys (the engine carries them from the keyed
// edge; this loop's route hashed them there too), prefetches their
// entries and updates them, 1024 records at a time.
type cowPane struct {
	m      *cow.Map[uint64, WindowCount]
	hashes [1024]uint64
}

func (p *cowPane) add(recs []Record) {
	for lo := 0; lo < len(recs); lo += len(p.hashes) {
		run := recs[lo:min(lo+len(p.hashes), len(recs))]
		hs := p.hashes[:len(run)]
		for i := range run {
			hs[i] = keygroups.HashUint64(run[i].Key)
		}
		for i := range run {
			r := &run[i]
			p.m.PrefetchAhead(hs, i)
			acc, _, err := p.m.UpsertHashedNew(hs[i], r.Key)
			if err != nil {
				panic(err)
			}
			acc.Count++
			acc.SrcNanos = max(acc.SrcNanos, r.SrcNanos)
		}
	}
}

func (p *cowPane) each(f func(key uint64, n, sample int64)) {
	kgs := p.m.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		for k, acc := range p.m.All(kg) {
			f(k, acc.Count, acc.SrcNanos)
		}
	}
}

func (p *cowPane) clear() { p.m.Clear() }

// fusedJoin is one subtask's window join. Senders below left are left
// source instances, the others right ones.
//
// NB: each open window keeps the records of each side in one slice, in
// arrival order, and links the records of one key and side into a list
// through a parallel slice of indices; a Go map takes a key to the heads
// of its two lists, held in the map's slot. So buffering a record appends
// to two slices and reads and writes back one map slot (the second probe
// finds the slot the first brought into cache), and allocates nothing
// once the slices have grown, where the baseline's map of slices per key
// and side allocates a slice for every key of every window. The map and
// slices of a fired window are cleared and reused. A Go map, as for the
// window count (see fusedCounts).
type fusedJoin struct {
	clock  eventClock
	stride uint64 // records per ms of event time
	left   int
	open   []*fusedJoinWindow // in no order; rarely more than two
	free   []*fusedJoinWindow // fired and cleared, to reuse
	last   *fusedJoinWindow   // the window of the previous record
	late   uint64
}

type fusedJoinWindow struct {
	start       int64
	heads       map[uint64]joinHeads
	left, right joinSide
}

// joinHeads is a key's two lists in a window: index+1 of the newest
// record of the key on each side (0: none yet).
type joinHeads struct{ left, right int32 }

// joinSide holds one side's records of a window; next[i] is index+1 of
// the record of the same key before recs[i] (0: none).
type joinSide struct {
	recs []Record
	next []int32
}

// push appends r to the list whose head is *head.
func (s *joinSide) push(r *Record, head *int32) {
	s.recs = append(s.recs, *r)
	s.next = append(s.next, *head)
	*head = int32(len(s.recs))
}

func (s *joinSide) reset() { s.recs, s.next = s.recs[:0], s.next[:0] }

func newFusedJoin(senders, left int, stride uint64) *fusedJoin {
	return &fusedJoin{clock: newEventClock(senders), stride: stride, left: left}
}

func (j *fusedJoin) add(recs []Record, sender int) {
	isLeft := sender < j.left
	for i := range recs {
		r := &recs[i]
		start := windowStart(timeMs(r.Seq, j.stride))
		if j.last == nil || start != j.last.start {
			if j.clock.late(start) {
				j.late++
				continue
			}
			j.last = j.window(start)
		}
		win := j.last
		h := win.heads[r.Key]
		if isLeft {
			win.left.push(r, &h.left)
		} else {
			win.right.push(r, &h.right)
		}
		win.heads[r.Key] = h
	}
}

// window returns the open window starting at start, opening it if need be.
func (j *fusedJoin) window(start int64) *fusedJoinWindow {
	for _, win := range j.open {
		if win.start == start {
			return win
		}
	}
	var win *fusedJoinWindow
	if n := len(j.free); n > 0 {
		win, j.free = j.free[n-1], j.free[:n-1]
	} else {
		win = &fusedJoinWindow{heads: make(map[uint64]joinHeads)}
	}
	win.start = start
	j.open = append(j.open, win)
	return win
}

func (j *fusedJoin) watermark(sender int, wm int64, l *lane) {
	if j.clock.advance(sender, wm) {
		j.fire(j.clock.wm, l)
	}
}

func (j *fusedJoin) finish(l *lane) { j.fire(math.MaxInt64, l) }

// fire joins, emits into l and recycles every window the watermark wm has
// passed.
func (j *fusedJoin) fire(wm int64, l *lane) {
	open := j.open[:0]
	for _, win := range j.open {
		if win.start+windowSizeMs-1 > wm {
			open = append(open, win)
			continue
		}
		win.emit(l)
		clear(win.heads)
		win.left.reset()
		win.right.reset()
		j.free = append(j.free, win)
		if win == j.last {
			j.last = nil
		}
	}
	clear(j.open[len(open):])
	j.open = open
}

// emit digests into l every pair of a left and a right record of one key
// in the window.
func (win *fusedJoinWindow) emit(l *lane) {
	left, right := &win.left, &win.right
	for _, h := range win.heads {
		for a := h.left; a != 0; a = left.next[a-1] {
			for b := h.right; b != 0; b = right.next[b-1] {
				p := joinPair(left.recs[a-1], right.recs[b-1])
				l.add(digestJoined(&p), p.SrcNanos)
			}
		}
	}
}

// TestFusedWindowed checks the window and join ceilings' loop against the
// channel baseline, so that the benchmarks measure the real work.
func TestFusedWindowed(t *testing.T) {
	for _, run := range []struct{ pipeline, table string }{{"window", "gomap"}, {"window", "gomap16"}, {"window", "cow16"}, {"join", ""}} {
		for _, par := range []int{1, 2, 3} {
			c := Config{Pipeline: run.pipeline, Records: 300_001, Parallelism: par, Keys: 5000}.withDefaults()
			res, err := RunBaseline(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			ls := newLanes(c)
			if _, err := fusedWindowed(c, run.table, ls); err != nil {
				t.Fatal(err)
			}
			n, sum := ls.total(new(Histogram))
			if n != res.SinkRecords || sum != res.Checksum {
				t.Errorf("%s %s, parallelism %d: %d records, checksum %#x; the baseline: %d, %#x",
					run.pipeline, run.table, par, n, sum, res.SinkRecords, res.Checksum)
			}
			if n == 0 {
				t.Errorf("%s %s, parallelism %d: no output", run.pipeline, run.table, par)
			}
		}
	}
}
