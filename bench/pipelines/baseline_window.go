package pipelines

import "math"

// eventClock tracks the watermark of a baseline window instance: the
// minimum of its senders' watermarks.
type eventClock struct {
	wms []int64
	wm  int64
}

func newEventClock(senders int) eventClock {
	c := eventClock{wms: make([]int64, senders), wm: math.MinInt64}
	for i := range c.wms {
		c.wms[i] = math.MinInt64
	}
	return c
}

// advance records sender from's watermark and reports whether the minimum
// moved.
func (c *eventClock) advance(from int, wm int64) bool {
	c.wms[from] = wm
	m := c.wms[0]
	for _, w := range c.wms[1:] {
		m = min(m, w)
	}
	if m <= c.wm {
		return false
	}
	c.wm = m
	return true
}

// late reports whether the window starting at start has already fired.
func (c *eventClock) late(start int64) bool { return start+windowSizeMs-1 <= c.wm }

// emitter batches a stage's output.
type emitter[T any] struct {
	out chan<- *batch[T]
	bp  *pool[T]
	cur *batch[T]
}

func (e *emitter[T]) emit(v T) {
	if e.cur == nil {
		e.cur = e.bp.get()
	}
	e.cur.recs = append(e.cur.recs, v)
	if len(e.cur.recs) == batchLen {
		e.flush()
	}
}

func (e *emitter[T]) flush() {
	if e.cur != nil && len(e.cur.recs) > 0 {
		e.out <- e.cur
		e.cur = nil
	}
}

// chanWindows is one instance of the baseline's window count.
type chanWindows struct {
	clock     eventClock
	stride    uint64                 // records per ms of event time
	open      map[int64]*countWindow // by start
	last      *countWindow           // the window of the previous record
	lastStart int64
	late      uint64
	emitter[winResult]
}

// countWindow is the state of one window: a count per key, and the newest
// sample time of the keys that had a sampled record.
type countWindow struct {
	counts  map[uint64]int64
	samples map[uint64]int64
}

func newChanWindows(senders int, stride uint64, out chan<- *batch[winResult], bp *pool[winResult]) *chanWindows {
	return &chanWindows{clock: newEventClock(senders), stride: stride, open: make(map[int64]*countWindow),
		emitter: emitter[winResult]{out: out, bp: bp}}
}

func (w *chanWindows) run(in <-chan *batch[Record], bp *pool[Record]) {
	defer close(w.out)
	for b := range in {
		for i := range b.recs {
			w.add(&b.recs[i])
		}
		if w.clock.advance(b.from, b.wm) {
			w.fire(w.clock.wm)
		}
		bp.put(b)
	}
	w.fire(math.MaxInt64)
}

func (w *chanWindows) add(r *Record) {
	start := windowStart(timeMs(r.Seq, w.stride))
	if w.last == nil || start != w.lastStart {
		if w.clock.late(start) {
			w.late++
			return
		}
		win := w.open[start]
		if win == nil {
			win = &countWindow{counts: make(map[uint64]int64), samples: make(map[uint64]int64)}
			w.open[start] = win
		}
		w.last, w.lastStart = win, start
	}
	w.last.counts[r.Key]++
	if r.SrcNanos != 0 {
		w.last.samples[r.Key] = max(w.last.samples[r.Key], r.SrcNanos)
	}
}

// fire emits and drops every window the watermark wm has passed.
func (w *chanWindows) fire(wm int64) {
	for start, win := range w.open {
		if start+windowSizeMs-1 > wm {
			continue
		}
		for k, n := range win.counts {
			w.emit(winResult{Key: k, Start: start, Count: n, SrcNanos: win.samples[k]})
		}
		delete(w.open, start)
		if win == w.last {
			w.last = nil
		}
	}
	w.flush()
}

// chanJoin is one instance of the baseline's window join. Senders below
// left are left sources, the others right ones.
type chanJoin struct {
	clock     eventClock
	stride    uint64 // records per ms of event time
	left      int
	open      map[int64]*joinWindow
	last      *joinWindow
	lastStart int64
	late      uint64
	emitter[Joined]
}

// joinWindow buffers the records of one window, per key and side.
type joinWindow struct {
	left, right map[uint64][]Record
}

func newChanJoin(p int, stride uint64, out chan<- *batch[Joined], bp *pool[Joined]) *chanJoin {
	return &chanJoin{clock: newEventClock(2 * p), stride: stride, left: p, open: make(map[int64]*joinWindow),
		emitter: emitter[Joined]{out: out, bp: bp}}
}

func (j *chanJoin) run(in <-chan *batch[Record], bp *pool[Record]) {
	defer close(j.out)
	for b := range in {
		isLeft := b.from < j.left
		for i := range b.recs {
			j.add(&b.recs[i], isLeft)
		}
		if j.clock.advance(b.from, b.wm) {
			j.fire(j.clock.wm)
		}
		bp.put(b)
	}
	j.fire(math.MaxInt64)
}

func (j *chanJoin) add(r *Record, isLeft bool) {
	start := windowStart(timeMs(r.Seq, j.stride))
	if j.last == nil || start != j.lastStart {
		if j.clock.late(start) {
			j.late++
			return
		}
		win := j.open[start]
		if win == nil {
			win = &joinWindow{left: make(map[uint64][]Record), right: make(map[uint64][]Record)}
			j.open[start] = win
		}
		j.last, j.lastStart = win, start
	}
	side := j.last.right
	if isLeft {
		side = j.last.left
	}
	side[r.Key] = append(side[r.Key], *r)
}

// fire joins, emits and drops every window the watermark wm has passed.
func (j *chanJoin) fire(wm int64) {
	for start, win := range j.open {
		if start+windowSizeMs-1 > wm {
			continue
		}
		for k, ls := range win.left {
			rs := win.right[k]
			for _, l := range ls {
				for _, r := range rs {
					j.emit(joinPair(l, r))
				}
			}
		}
		delete(j.open, start)
		if win == j.last {
			j.last = nil
		}
	}
	j.flush()
}
