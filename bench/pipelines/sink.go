package pipelines

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/keygroups"
)

// counters counts the records each source instance produced, one padded
// slot per instance so that instances on different cores do not share a
// cache line.
type counters struct {
	slots []counter
}

type counter struct {
	n atomic.Uint64
	_ [120]byte
}

func newCounters(n int) *counters { return &counters{slots: make([]counter, n)} }

func (c *counters) slot(i int) *atomic.Uint64 { return &c.slots[i].n }

func (c *counters) sum() uint64 {
	var s uint64
	for i := range c.slots {
		s += c.slots[i].n.Load()
	}
	return s
}

// lanes are a sink's accumulators: each is written by one sink instance
// only (see the package doc for how ringflow's sink picks its lane), and
// read after the run.
type lanes struct {
	l       []lane
	p       uint64 // parallelism
	mask    uint64 // p-1 when p is a power of two, else 0
	windows windows
}

// windows says which checkpoint window (Config.CheckpointWindows) a sample
// generated at a Unix ns time falls in. Even windows, from the first, run
// with checkpoints paused, odd ones with checkpoints; the first settle ns
// of each count in neither.
type windows struct {
	start, length, settle int64 // Unix ns, ns, ns; length 0: no windows
}

// Window kinds.
const (
	windowNone = iota // before the first window or settling: counts in neither
	windowWithout
	windowWith
)

// of returns the kind of window a sample generated at genNanos falls in.
func (w windows) of(genNanos int64) int {
	d := genNanos - w.start
	if w.length == 0 || d < 0 || d%w.length < w.settle {
		return windowNone
	}
	if (d/w.length)%2 == 0 {
		return windowWithout
	}
	return windowWith
}

// pausedIn reports whether checkpoints are paused in window k (0, 1, ...).
func pausedIn(k int64) bool { return k%2 == 0 }

// lane accumulates what one sink instance saw.
type lane struct {
	count   uint64
	sum     uint64
	hist    *Histogram     // allocated at the first sample
	sampled int64          // samples generated at or before this Unix ns are not recorded
	kept    *[]Sample      // every sample, when the run keeps them (Config.KeepSamples)
	live    *LiveHistogram // Config.LiveLatency, or nil
	win     *windows       // the run's checkpoint windows, if it has them
	with    *Histogram     // samples in windows with checkpoints, and
	without *Histogram     // without (both allocated at the first windowed sample)
	_       [56]byte       // a lane per 128 bytes: no two writers share a line
}

func newLanes(c Config) *lanes {
	p := uint64(max(c.Parallelism, 1))
	ls := &lanes{l: make([]lane, MaxParallelism), p: p}
	for i := range ls.l {
		ls.l[i].live = c.LiveLatency
	}
	if p&(p-1) == 0 {
		ls.mask = p - 1
	}
	return ls
}

// bySeq returns the lane of the forward-pipeline sink instance that
// receives record seq: the source subtask that generated it.
func (ls *lanes) bySeq(seq uint64) *lane {
	if ls.mask != 0 || ls.p == 1 {
		return &ls.l[seq&ls.mask]
	}
	return &ls.l[seq%ls.p]
}

// byKey returns the lane of key's key group, which one ringflow subtask
// owns.
func (ls *lanes) byKey(key uint64) *lane {
	return &ls.l[keygroups.HashUint64(key)%MaxParallelism]
}

// add counts one output record with digest d, sampled at srcNanos if that
// is not zero (and after the warm-up).
func (l *lane) add(d uint64, srcNanos int64) {
	l.count++
	l.sum += d
	if srcNanos > l.sampled {
		l.sample(srcNanos)
	}
}

func (l *lane) sample(srcNanos int64) {
	if l.hist == nil {
		l.hist = new(Histogram)
	}
	lat := time.Now().UnixNano() - srcNanos
	l.hist.Record(lat)
	if l.live != nil {
		l.live.Record(lat)
	}
	if l.win != nil {
		l.sampleWindow(srcNanos, lat)
	}
	if l.kept != nil {
		*l.kept = append(*l.kept, Sample{GenUnixNano: srcNanos, LatencyNanos: lat})
	}
}

// sampleWindow records a sample in the histogram of its checkpoint
// window's kind.
func (l *lane) sampleWindow(srcNanos, lat int64) {
	if l.with == nil {
		l.with, l.without = new(Histogram), new(Histogram)
	}
	switch l.win.of(srcNanos) {
	case windowWith:
		l.with.Record(lat)
	case windowWithout:
		l.without.Record(lat)
	}
}

// startWindows starts checkpoint windows of the given length now, each
// settling for settle (see windows).
func (ls *lanes) startWindows(length, settle time.Duration) {
	ls.windows = windows{start: time.Now().UnixNano(), length: int64(length), settle: int64(settle)}
	for i := range ls.l {
		ls.l[i].win = &ls.windows
	}
}

// totalWindows merges every lane's samples by checkpoint window into with
// and without.
func (ls *lanes) totalWindows(with, without *Histogram) {
	for i := range ls.l {
		if l := &ls.l[i]; l.with != nil {
			with.Merge(l.with)
			without.Merge(l.without)
		}
	}
}

// startSampling makes the lanes record only the samples generated after
// warmup from now, and keep each of them if keep is set.
func (ls *lanes) startSampling(warmup time.Duration, keep bool) {
	from := time.Now().Add(warmup).UnixNano()
	for i := range ls.l {
		ls.l[i].sampled = from
		if keep {
			ls.l[i].kept = new([]Sample)
		}
	}
}

// kept returns every lane's kept samples in the order they were generated.
func (ls *lanes) kept() []Sample {
	var all []Sample
	for i := range ls.l {
		if k := ls.l[i].kept; k != nil {
			all = append(all, *k...)
		}
	}
	slices.SortFunc(all, func(a, b Sample) int { return cmp.Compare(a.GenUnixNano, b.GenUnixNano) })
	return all
}

// total returns the count and checksum over every lane, and merges their
// latencies into hist.
func (ls *lanes) total(hist *Histogram) (count, sum uint64) {
	for i := range ls.l {
		l := &ls.l[i]
		count += l.count
		sum += l.sum
		if l.hist != nil {
			hist.Merge(l.hist)
		}
	}
	return count, sum
}
