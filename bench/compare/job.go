package compare

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
)

// Record is the plain 32-byte record every source generates: no pointers,
// so rings move it by raw copy.
type Record struct {
	Key   uint64
	Seq   uint64
	Value uint64
	TsMs  int64 // event time, epoch milliseconds
}

// JoinPair is one output of the join pipeline.
type JoinPair struct {
	Key      uint64
	LeftSeq  uint64
	RightSeq uint64
}

// hotKey is the key a fraction Config.Skew of the records carry.
const hotKey = 0

// restoreTsMs is the event time of a restore source's record: past every
// window a run opens (the join's sources, the fastest in event time, would
// have to emit 10^16 records to reach it) and far from overflowing a
// window's end.
const restoreTsMs = 1 << 60

// skewScale is the resolution of the skew fraction.
const skewScale = 1 << 20

// gen computes records of one source; it is a pure function of seq.
type gen struct {
	seed     uint64
	keys     uint64 // keys other than the hot one: 1..keys
	hotBelow uint64 // h mod skewScale below this: the hot key
	tsMul    uint64 // event time of seq: seq·tsMul/tsDiv ms
	tsDiv    uint64
}

func newGen(cfg Config, seed uint64) gen {
	mul, div := cfg.eventTimeStep()
	return gen{seed: seed, keys: cfg.Keys, hotBelow: uint64(cfg.Skew * skewScale), tsMul: mul, tsDiv: div}
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (g gen) record(seq uint64) Record {
	h := splitmix64(g.seed*0x632be59bd9b4e019 + seq)
	key := uint64(hotKey)
	if h%skewScale >= g.hotBelow {
		key = 1 + (h>>20)%g.keys
	}
	return Record{Key: key, Seq: seq, Value: 1, TsMs: int64(seq * g.tsMul / g.tsDiv)}
}

// source is one subtask's share of a generator: sequence numbers sub,
// sub+par, sub+2·par, ... Its position is the count of records it has
// returned. A restore source returns one record past its restored position
// and then ends, so that a restored job finishes at once. That record
// carries the hot key and the event time restoreTsMs, so the restore runs
// of every pipeline emit: the join's two sides meet in one window, whatever
// windows the checkpoint left open.
type source struct {
	g       gen
	restore bool
	sub     uint64
	par     uint64
	emitted uint64
	limit   uint64 // with restore: the end
}

func (s *source) Open(subtask, parallelism int, pos []byte) error {
	s.sub, s.par = uint64(subtask), uint64(parallelism)
	if pos != nil {
		if len(pos) != 8 {
			return fmt.Errorf("compare source: position of %d bytes, want 8", len(pos))
		}
		s.emitted = binary.LittleEndian.Uint64(pos)
	}
	s.limit = s.emitted + 1
	return nil
}

func (s *source) Read(buf []Record) (int, error) {
	n := len(buf)
	if s.restore {
		if s.emitted >= s.limit {
			return 0, io.EOF
		}
		n = min(n, int(s.limit-s.emitted))
	}
	for i := range buf[:n] {
		r := s.g.record(s.sub + (s.emitted+uint64(i))*s.par)
		if s.restore {
			r.Key, r.TsMs = hotKey, restoreTsMs
		}
		buf[i] = r
	}
	s.emitted += uint64(n)
	return n, nil
}

func (s *source) Position() []byte { return binary.LittleEndian.AppendUint64(nil, s.emitted) }

func (s *source) Close() error { return nil }

// sink counts what reaches it and busy-waits per record. A busy wait, not a
// sleep: the sink's worker stays occupied, so backpressure is steady.
type sink struct {
	slow    time.Duration
	records atomic.Int64
	first   atomic.Int64 // Unix ns of the first record, 0 before
}

func (s *sink) consume() {
	if s.records.Add(1) == 1 {
		s.first.CompareAndSwap(0, time.Now().UnixNano())
	}
	if s.slow > 0 {
		for start := time.Now(); time.Since(start) < s.slow; {
		}
	}
}

type countAgg struct{}

func (countAgg) Create() uint64                  { return 0 }
func (countAgg) Add(acc uint64, r Record) uint64 { return acc + r.Value }
func (countAgg) Result(acc uint64) uint64        { return acc }
func (countAgg) Merge(a, b uint64) uint64        { return a + b }

// windowSize is the event-time window of the window and join pipelines.
const windowSize = time.Second

// buildJob builds cfg's pipeline on rcfg, with restore sources if restore.
func buildJob(cfg Config, rcfg ringflow.Config, restore bool, out *sink) *ringflow.Job {
	job := ringflow.NewJob(rcfg)
	src := func(name string, seed uint64) ringflow.Stream[Record] {
		g := newGen(cfg, seed)
		newSrc := func() ringflow.SourceFunc[Record] { return &source{g: g, restore: restore} }
		if cfg.Pipeline == "keyed-count" {
			return ringflow.Source(job, name, newSrc)
		}
		ws := ringflow.WatermarkStrategy[Record]{Timestamp: func(r Record) int64 { return r.TsMs }}
		return ringflow.SourceWithEventTime(job, name, newSrc, ws)
	}
	byKey := func(r Record) uint64 { return r.Key }
	switch cfg.Pipeline {
	case "keyed-count":
		counts := ringflow.Reduce(ringflow.KeyBy(src("source", 1), byKey), "count",
			func(acc, r Record) Record { r.Value += acc.Value; return r })
		ringflow.Sink(counts, "sink", func(context.Context, Record) error { out.consume(); return nil })
	case "window":
		wins := ringflow.Window(ringflow.KeyBy(src("source", 1), byKey), "window",
			ringflow.TumblingWindows(windowSize), ringflow.AggregateFunc[Record, uint64, uint64](countAgg{}))
		ringflow.Sink(wins, "sink", func(context.Context, ringflow.WindowResult[uint64, uint64]) error { out.consume(); return nil })
	case "join":
		left, right := ringflow.KeyBy(src("left", 1), byKey), ringflow.KeyBy(src("right", 2), byKey)
		pairs := ringflow.WindowJoin(left, right, "join", ringflow.TumblingWindows(windowSize),
			func(l, r Record) JoinPair { return JoinPair{Key: l.Key, LeftSeq: l.Seq, RightSeq: r.Seq} })
		ringflow.Sink(pairs, "sink", func(context.Context, JoinPair) error { out.consume(); return nil })
	}
	if cfg.OnJob != nil {
		cfg.OnJob(job)
	}
	return job
}

// ringCount is the number of rings between tasks in cfg's pipeline: every
// keyBy edge is one ring per (upstream, downstream) subtask pair; the sink
// is chained to the keyed operator (a forward edge of equal parallelism).
func ringCount(cfg Config) int {
	p := cfg.Parallelism
	if cfg.Pipeline == "join" {
		return 2 * p * p
	}
	return p * p
}
