package pipelines

import (
	"math/bits"
	"time"
)

// Record is what every source generates; see the package doc for its
// fields' values.
type Record struct {
	Seq      uint64 // sequence number within its source
	Key      uint64 // in [0, Keys)
	Value    int64  // 1 from the generator
	TimeMs   int64  // event time (epoch ms) in event-time pipelines, else 0
	SrcNanos int64  // Unix ns at generation for sampled records, else 0
}

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

// sampleMask selects the sampled records: those whose hash has its low ten
// bits zero, one in 1024.
const sampleMask = 1<<10 - 1

// Seeds of the sources: every pipeline's only source (and the join's
// left one) uses seedMain, the join's right one seedRight.
const (
	seedMain  = 1
	seedRight = 2
)

// gen generates the records of one source.
type gen struct {
	keys   uint64
	stride uint64 // event time advances 1 ms every stride records; 0: no event time
	seed   uint64
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
	h := mix64(g.seed + (seq+1)*0x9e3779b97f4a7c15)
	key, _ := bits.Mul64(h, g.keys)
	r := Record{Seq: seq, Key: key, Value: 1}
	if g.stride > 0 {
		r.TimeMs = int64(seq / g.stride)
	}
	if h&sampleMask == 0 {
		r.SrcNanos = time.Now().UnixNano()
	}
	return r
}

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
