package pipelines

import (
	"math/bits"
	"time"
)

// Record is what every source generates; see the package doc for its
// fields' values. Its event time, in the pipelines that have one, is
// timeMs(Seq, stride).
//
// NB: Record is 32 bytes on purpose. The Go compiler copies a struct of more
// than 32 bytes through memory with overlapping 16-byte moves, which stall
// on store forwarding after a field is written: a map function returning a
// 40-byte record measured 8 times slower per record than one returning 32
// bytes (go1.26, AMD EPYC).
type Record struct {
	Seq      uint64 // sequence number within its source
	Key      uint64 // in [0, Keys)
	Value    int64  // 1 from the generator
	SrcNanos int64  // Unix ns at generation for sampled records, else 0
}

// timeMs returns the event time (epoch ms) of record seq of a source whose
// event time advances 1 ms every stride records.
func timeMs(seq, stride uint64) int64 { return int64(seq / stride) }

// WindowCount is the window pipeline's accumulator and result: the number
// of records of a key in a window, and the newest SrcNanos among them.
type WindowCount struct {
	Count    int64
	SrcNanos int64
}

// Joined is one result of the join pipeline: a left and a right record of
// one key in one window.
type Joined struct {
	Key      uint64
	LeftSeq  uint64
	RightSeq uint64
	SrcNanos int64 // the newer of the two records' SrcNanos
}

// Seeds of the sources: every pipeline's only source (and the join's
// left one) uses seedMain, the join's right one seedRight.
const (
	seedMain  = 1
	seedRight = 2
)

// gen generates the records of one source.
type gen struct {
	keys uint64
	seed uint64
	hot  uint64 // Config.HotKeys
	// sampleMask selects the sampled records: those whose hash has these
	// bits zero, one in Config.SampleEvery.
	sampleMask uint64
}

// mix64 is splitmix64's finalizer: a bijection that spreads every input
// bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// record returns the source's record seq.
func (g gen) record(seq uint64) Record {
	var r [1]Record
	g.fill(r[:], seq, 1)
	return r[0]
}

// fill sets buf[i] to record seq + i·step. NB: the loop body is written out
// rather than calling record, which is too big to inline: a call per record
// returning a 40-byte struct costs several times the work itself.
func (g gen) fill(buf []Record, seq, step uint64) {
	if g.hot != 0 {
		g.fillHot(buf, seq, step)
		return
	}
	for i := range buf {
		h := mix64(g.seed + (seq+1)*0x9e3779b97f4a7c15)
		key, _ := bits.Mul64(h, g.keys)
		buf[i] = Record{Seq: seq, Key: key, Value: 1}
		if h&g.sampleMask == 0 {
			buf[i].SrcNanos = nowNanos()
		}
		seq += step
	}
}

// fillHot is fill with Config.HotKeys: record seq takes key seq while seq
// is below keys, and then a key below hot, uniformly.
func (g gen) fillHot(buf []Record, seq, step uint64) {
	for i := range buf {
		h := mix64(g.seed + (seq+1)*0x9e3779b97f4a7c15)
		key := seq
		if seq >= g.keys {
			key, _ = bits.Mul64(h, g.hot)
		}
		buf[i] = Record{Seq: seq, Key: key, Value: 1}
		if h&g.sampleMask == 0 {
			buf[i].SrcNanos = nowNanos()
		}
		seq += step
	}
}

// nowNanos is the wall clock in Unix ns, kept out of line so that the
// generator's common path stays small.
//
//go:noinline
func nowNanos() int64 { return time.Now().UnixNano() }

// digest is the checksum contribution of one output record, made of the
// three fields that identify it.
func digest(a, b, c uint64) uint64 {
	return mix64(a*0x9e3779b97f4a7c15 ^ b*0xc2b2ae3d27d4eb4f ^ c*0x165667b19e3779f9)
}

// Digests of each pipeline's output records.
func digestRecord(r *Record) uint64 { return digest(r.Seq, r.Key, uint64(r.Value)) }
func digestCount(r *Record) uint64  { return digest(r.Key, uint64(r.Value), 0) }
func digestWindow(key uint64, start int64, count int64) uint64 {
	return digest(key, uint64(start), uint64(count))
}
func digestJoined(j *Joined) uint64 { return digest(j.Key, j.LeftSeq, j.RightSeq) }

// joinPair makes the join pipeline's result for a pair.
func joinPair(l, r Record) Joined {
	return Joined{Key: l.Key, LeftSeq: l.Seq, RightSeq: r.Seq, SrcNanos: max(l.SrcNanos, r.SrcNanos)}
}

// mapValue and keepValue are the map-filter pipeline's functions.
func mapValue(r Record) Record { r.Value += int64(r.Key); return r }
func keepValue(r Record) bool  { return r.Value&1 == 1 }

// windowSizeMs is the size of the window and join pipelines' tumbling
// windows.
const windowSizeMs = 1000

// windowStart returns the start of the tumbling window holding ts.
func windowStart(ts int64) int64 {
	s := ts - ts%windowSizeMs
	if ts < 0 && ts%windowSizeMs != 0 {
		s -= windowSizeMs
	}
	return s
}
