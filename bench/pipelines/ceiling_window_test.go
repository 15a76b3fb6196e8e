package pipelines

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow/keygroups"
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
func BenchmarkWindowCeiling(b *testing.B) {
	benchCeiling(b, "window", fusedWindowed)
}

// BenchmarkJoinCeiling: see BenchmarkWindowCeiling.
func BenchmarkJoinCeiling(b *testing.B) {
	benchCeiling(b, "join", fusedWindowed)
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
// on c.Parallelism goroutines (see BenchmarkWindowCeiling) and returns its
// seconds.
func fusedWindowed(c Config, ls *lanes) (float64, error) {
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
		op := newWindowOp(c, senders)
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.subtask(w, op, &ls.l[w])
		}()
	}
	wg.Wait()
	return time.Since(start).Seconds(), nil
}

// newWindowOp returns one subtask of c's windowed operator, with senders
// senders.
func newWindowOp(c Config, senders int) windowOp {
	if c.Pipeline == "join" {
		return newFusedJoin(senders, c.Parallelism, c.EventStride)
	}
	return newFusedCounts(senders, c.EventStride)
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

// fusedCounts is one subtask's window count.
//
// NB: each open window is a Go map of counts by key, as in the baseline:
// counts[key]++ is one probe of the map, which holds the count in the slot
// it finds the key in (no second lookup and no second cache line, as a
// map to an index into a slice of counts would have). The newest sample
// time goes in a map of its own, as one record in SampleEvery has one. A
// fired window's maps are cleared and reused by a later window, so they
// stop growing after the first window, where the baseline allocates and
// grows new maps for every window. A Go map rather than an
// open-addressing array of our own, because that is the table a Go
// programmer would reach for and the one the baseline uses;
// BenchmarkKeyedCountCeiling shows what a flat array gains on counts.
type fusedCounts struct {
	clock  eventClock
	stride uint64              // records per ms of event time
	open   []*fusedCountWindow // in no order; rarely more than two
	free   []*fusedCountWindow // fired and cleared, to reuse
	last   *fusedCountWindow   // the window of the previous record
	late   uint64
}

type fusedCountWindow struct {
	start   int64
	counts  map[uint64]int64
	samples map[uint64]int64 // the newest SrcNanos of each key that has one
}

func newFusedCounts(senders int, stride uint64) *fusedCounts {
	return &fusedCounts{clock: newEventClock(senders), stride: stride}
}

func (w *fusedCounts) add(recs []Record, _ int) {
	for i := range recs {
		r := &recs[i]
		start := windowStart(timeMs(r.Seq, w.stride))
		if w.last == nil || start != w.last.start {
			if w.clock.late(start) {
				w.late++
				continue
			}
			w.last = w.window(start)
		}
		w.last.counts[r.Key]++
		if r.SrcNanos != 0 {
			w.last.samples[r.Key] = max(w.last.samples[r.Key], r.SrcNanos)
		}
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
		win = &fusedCountWindow{counts: make(map[uint64]int64), samples: make(map[uint64]int64)}
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
		for k, n := range win.counts {
			l.add(digestWindow(k, win.start, n), win.samples[k])
		}
		clear(win.counts)
		clear(win.samples)
		w.free = append(w.free, win)
		if win == w.last {
			w.last = nil
		}
	}
	clear(w.open[len(open):])
	w.open = open
}

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
	for _, pipeline := range []string{"window", "join"} {
		for _, par := range []int{1, 2, 3} {
			c := Config{Pipeline: pipeline, Records: 300_001, Parallelism: par, Keys: 5000}.withDefaults()
			res, err := RunBaseline(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			ls := newLanes(c)
			if _, err := fusedWindowed(c, ls); err != nil {
				t.Fatal(err)
			}
			n, sum := ls.total(new(Histogram))
			if n != res.SinkRecords || sum != res.Checksum {
				t.Errorf("%s, parallelism %d: %d records, checksum %#x; the baseline: %d, %#x",
					pipeline, par, n, sum, res.SinkRecords, res.Checksum)
			}
			if n == 0 {
				t.Errorf("%s, parallelism %d: no output", pipeline, par)
			}
		}
	}
}
