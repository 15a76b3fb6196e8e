package operator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/ring"
)

// keyed is a fixed-size record with a key.
type keyed struct{ K, V uint64 }

func keyedHasher() KeyHasher[keyed] {
	return KeyHasher[keyed]{
		One: func(r *keyed) uint64 { return keygroups.HashUint64(r.K) },
		All: func(recs []keyed, hs []uint64) {
			for i := range recs {
				hs[i] = keygroups.HashUint64(recs[i].K)
			}
		},
	}
}

// hashedSink records what a channel pushes into it, and whether the key
// hashes came with the records.
type hashedSink struct {
	recs    []keyed
	ts      []int64
	hashes  []uint64
	hashed  int // batches that came with hashes
	without int // batches that came without
}

func (s *hashedSink) Push(recs []keyed, ts []int64) {
	s.without++
	s.add(recs, ts, nil)
}

func (s *hashedSink) PushHashed(recs []keyed, ts []int64, hashes []uint64) {
	s.hashed++
	s.add(recs, ts, hashes)
}

func (s *hashedSink) add(recs []keyed, ts []int64, hashes []uint64) {
	s.recs = append(s.recs, recs...)
	s.ts = append(s.ts, ts...)
	for i := range recs {
		h := keygroups.HashUint64(recs[i].K)
		if hashes != nil {
			h = hashes[i]
		}
		s.hashes = append(s.hashes, h)
	}
}

// hashGate returns a gate whose one Hash edge writes into parallelism new
// rings, with timed records and frames of frameBytes.
func hashGate(t *testing.T, parallelism, frameBytes int) (*Gate[keyed], []*ring.Ring, *keygroups.Partitioner) {
	t.Helper()
	part, err := keygroups.NewPartitioner(parallelism, 128)
	if err != nil {
		t.Fatal(err)
	}
	var rings []*ring.Ring
	var writers []*ring.Writer
	for range parallelism {
		r, err := ring.New(ring.Options{Capacity: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rings, writers = append(rings, r), append(writers, r.Writer())
	}
	codec, err := CodecFor[keyed]()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate(codec, GateOptions{Timed: true, FrameBytes: frameBytes},
		[]EdgeOut{{Partitioning: Hash, Writers: writers, KeyHash: keyedHasher(), Partitioner: part}})
	if err != nil {
		t.Fatal(err)
	}
	return g, rings, part
}

// drainInto pushes every DATA frame of r through a channel into in, and
// returns the frames' payloads (copied) with their counts.
func drainInto(t *testing.T, r *ring.Ring, in Input[keyed]) (frames [][]byte, counts []int) {
	t.Helper()
	codec, _ := CodecFor[keyed]()
	c := NewChannel(nil, codec, true /* timed */, in, nil)
	rd := r.Reader()
	for {
		f, err := rd.Next()
		if errors.Is(err, ring.ErrEmpty) {
			return frames, counts
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == ring.FrameData {
			frames, counts = append(frames, slices.Clone(f.Payload)), append(counts, f.Count)
			if err := c.push(f); err != nil {
				t.Fatal(err)
			}
		}
		rd.Release(f)
	}
}

// TestHashEdgeCarriesKeyHashes: records crossing a Hash edge reach a
// HashedInput with their key hashes, in full frames and in frames closed
// part-way (whose columns the gate compacts), each at the subtask owning
// its key group, with its timestamp.
func TestHashEdgeCarriesKeyHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	g, rings, part := hashGate(t, 2, 1024)
	var sent []keyed
	for len(sent) < 5000 {
		n := 1 + rng.IntN(300)
		recs := make([]keyed, n)
		ts := make([]int64, n)
		for i := range recs {
			recs[i] = keyed{K: rng.Uint64N(1000), V: uint64(len(sent) + i)}
			ts[i] = int64(recs[i].V) * 3
		}
		g.Push(recs, ts)
		sent = append(sent, recs...)
		if rng.IntN(3) == 0 {
			for _, p := range g.Ports() {
				p.Flush() // closes the open frames part-way
			}
		}
	}
	for _, p := range g.Ports() {
		p.Flush()
	}
	seen := 0
	for sub, r := range rings {
		var sink hashedSink
		drainInto(t, r, &sink)
		if sink.without != 0 {
			t.Errorf("subtask %d: %d batches came without key hashes", sub, sink.without)
		}
		for i, rec := range sink.recs {
			if want := keygroups.HashUint64(rec.K); sink.hashes[i] != want {
				t.Fatalf("subtask %d: record %v came with hash %#x, want %#x", sub, rec, sink.hashes[i], want)
			}
			if got := part.Subtask(sink.hashes[i]); got != sub {
				t.Fatalf("record %v reached subtask %d, its key group is subtask %d's", rec, sub, got)
			}
			if sink.ts[i] != int64(rec.V)*3 {
				t.Fatalf("record %v came with timestamp %d", rec, sink.ts[i])
			}
		}
		seen += len(sink.recs)
	}
	if seen != len(sent) {
		t.Fatalf("%d records reached the subtasks, %d were sent", seen, len(sent))
	}
}

// TestHashedFramesReplayWithAndWithout: channel state holds frames as the
// ring carried them — with key hashes from a Hash edge, without from
// before hashes were carried or from other edges — and both replay; the
// tail of a frame cut part-way (an unaligned snapshot inside a frame)
// keeps every column.
func TestHashedFramesReplayWithAndWithout(t *testing.T) {
	g, rings, _ := hashGate(t, 1, 1<<16)
	recs := make([]keyed, 37)
	ts := make([]int64, len(recs))
	for i := range recs {
		recs[i], ts[i] = keyed{K: uint64(i * 7), V: uint64(i)}, int64(100+i)
	}
	g.Push(recs, ts)
	g.Ports()[0].Flush()
	var sink hashedSink
	frames, counts := drainInto(t, rings[0], &sink)
	if len(frames) != 1 || counts[0] != len(recs) || sink.hashed != 1 {
		t.Fatalf("%d frames of %v records, %d with hashes; want one of %d with hashes", len(frames), counts, sink.hashed, len(recs))
	}
	codec, _ := CodecFor[keyed]()

	// The tail from record 10 on, as an unaligned snapshot records it.
	d := newFixedFrames[keyed](codec.Size(), true, &hashedSink{})
	n, err := d.open(ring.Frame{Type: ring.FrameData, Count: counts[0], Payload: frames[0]})
	if err != nil || n != len(recs) {
		t.Fatalf("open: %d, %v", n, err)
	}
	tailCount, tail := d.tail(nil, 10)
	var fromTail hashedSink
	replay := NewChannel(nil, codec, true, Input[keyed](&fromTail), nil)
	if err := replay.push(ring.Frame{Type: ring.FrameData, Count: tailCount, Payload: tail}); err != nil {
		t.Fatal(err)
	}
	if fromTail.hashed != 1 || !slices.Equal(fromTail.recs, recs[10:]) || !slices.Equal(fromTail.ts, ts[10:]) ||
		!slices.Equal(fromTail.hashes, sink.hashes[10:]) {
		t.Fatalf("the tail replayed %v at %v with hashes %x", fromTail.recs, fromTail.ts, fromTail.hashes)
	}

	// The same frame without its hash column: the records and timestamps
	// replay, and the operator hashes the keys itself.
	bare := frames[0][:len(frames[0])-8*len(recs)]
	var fromBare hashedSink
	replay = NewChannel(nil, codec, true, Input[keyed](&fromBare), nil)
	if err := replay.push(ring.Frame{Type: ring.FrameData, Count: len(recs), Payload: bare}); err != nil {
		t.Fatal(err)
	}
	if fromBare.without != 1 || !slices.Equal(fromBare.recs, recs) || !slices.Equal(fromBare.hashes, sink.hashes) {
		t.Fatalf("the frame without hashes replayed %v (%d batches with hashes)", fromBare.recs, fromBare.hashed)
	}

	// Any other length is corrupt, and the error says what was expected.
	err = replay.push(ring.Frame{Type: ring.FrameData, Count: len(recs), Payload: frames[0][:len(frames[0])-8]})
	if !errors.Is(err, ring.ErrCorrupt) {
		t.Fatalf("a frame one hash short: %v, want ErrCorrupt", err)
	}
}

// TestKeyedOperatorTakesCarriedHashes: a keyed operator pushed records with
// their hashes does not hash the keys again, and keeps the same state as
// when it hashes them itself.
func TestKeyedOperatorTakesCarriedHashes(t *testing.T) {
	hashCalls := 0
	keys := KeyFuncs[uint64, keyed]{
		Key:  func(r keyed) uint64 { return r.K },
		Hash: func(k uint64) uint64 { hashCalls++; return keygroups.HashUint64(k) },
	}
	run := func(carry bool) ([]int64, int) {
		hashCalls = 0
		var out collectInput[int64]
		op := NewMapWithState(keys, func(n *int64, r keyed) int64 { *n += int64(r.V); return *n }, Input[int64](&out))
		ctx := &Context{Operator: "sum", Parallelism: 1, MaxParallelism: 128, KeyGroups: keygroups.Range{Start: 0, End: 128}}
		if err := op.Open(ctx); err != nil {
			t.Fatal(err)
		}
		for b := range 20 {
			recs := make([]keyed, 50)
			hs := make([]uint64, len(recs))
			for i := range recs {
				recs[i] = keyed{K: uint64((b*50 + i) % 13), V: uint64(i)}
				hs[i] = keygroups.HashUint64(recs[i].K)
			}
			if carry {
				op.PushHashed(recs, nil, hs)
			} else {
				op.Push(recs, nil)
			}
		}
		return out.recs, hashCalls
	}
	want, calls := run(false)
	if calls == 0 {
		t.Fatal("the operator did not hash the keys of records that came without hashes")
	}
	got, calls := run(true)
	if !slices.Equal(got, want) {
		t.Fatalf("with carried hashes the operator emitted %v, without %v", got, want)
	}
	if calls != 0 && !invariants.Enabled { // the invariant checks hash to compare
		t.Fatalf("the operator hashed %d keys that came with their hashes", calls)
	}
}

// BenchmarkKeyedEdge is the keyed-count pipeline's keyed edge on one
// thread: a gate partitions batches of 32-byte records over 100k keys into
// two rings, and each ring's frames are pushed into a counting
// MapWithState of its subtask. carry=false is the edge as it was before
// frames carried key hashes: the gate writes none and the operator hashes
// every key again. Time per record covers the whole edge.
func BenchmarkKeyedEdge(b *testing.B) {
	for _, carry := range []bool{false, true} {
		b.Run(fmt.Sprintf("carry=%v", carry), func(b *testing.B) { benchKeyedEdge(b, carry) })
	}
}

func benchKeyedEdge(b *testing.B, carry bool) {
	const keys, batchLen, stream, parallelism = 100_000, 1024, 1 << 20, 2
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]benchRec, stream)
	for i := range recs {
		recs[i] = benchRec{Seq: uint64(i), Key: rng.Uint64N(keys), Value: 1}
	}
	hasher := KeyHasher[benchRec]{
		One: func(r *benchRec) uint64 { return keygroups.HashUint64(r.Key) },
		All: func(recs []benchRec, hs []uint64) {
			for i := range recs {
				hs[i] = keygroups.HashUint64(recs[i].Key)
			}
		},
	}
	kf := KeyFuncs[uint64, benchRec]{Key: func(r benchRec) uint64 { return r.Key }, Hash: keygroups.HashUint64,
		KeyAll: func(recs []benchRec, keys []uint64, hs []uint64) {
			for i := range recs {
				keys[i] = recs[i].Key
				if hs != nil {
					hs[i] = keygroups.HashUint64(recs[i].Key)
				}
			}
		}}
	part, _ := keygroups.NewPartitioner(parallelism, 128)
	codec, _ := CodecFor[benchRec]()
	var writers []*ring.Writer
	var readers []*ring.Reader
	var chans []*Channel
	var sum int64
	for sub := range parallelism {
		r, err := ring.New(ring.Options{Capacity: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		writers, readers = append(writers, r.Writer()), append(readers, r.Reader())
		sink := NewSink(func(_ context.Context, r benchRec) error { sum += r.Value; return nil })
		op := NewMapWithState(kf, func(n *int64, r benchRec) benchRec { *n += r.Value; r.Value = *n; return r }, Input[benchRec](sink))
		kgs, _ := keygroups.RangeOf(sub, parallelism, 128)
		ctx := &Context{Operator: "count", Subtask: sub, Parallelism: parallelism, MaxParallelism: 128, KeyGroups: kgs}
		sink.Ctx = ctx
		if err := op.Open(ctx); err != nil {
			b.Fatal(err)
		}
		var in Input[benchRec] = op
		if !carry {
			in = plainInput[benchRec]{op}
		}
		chans = append(chans, NewChannel(nil, codec, false, in, nil))
	}
	g, err := NewGate(codec, GateOptions{FrameBytes: 32 << 10},
		[]EdgeOut{{Partitioning: Hash, Writers: writers, KeyHash: hasher, Partitioner: part}})
	if err != nil {
		b.Fatal(err)
	}
	if !carry {
		for _, o := range g.all {
			o.hashed, o.per = false, o.size
			o.fit()
			o.n = o.capN
		}
	}
	off := 0
	for b.Loop() {
		g.Push(recs[off:off+batchLen], nil)
		off = (off + batchLen) & (stream - 1)
		if off&(16<<10-1) != 0 {
			continue
		}
		for _, p := range g.Ports() {
			p.Flush()
		}
		for i, rd := range readers {
			for {
				f, err := rd.Next()
				if errors.Is(err, ring.ErrEmpty) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if f.Type == ring.FrameData {
					if err := chans[i].push(f); err != nil {
						b.Fatal(err)
					}
				}
				rd.Release(f)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchLen), "ns/rec")
}

// plainInput hides an operator's PushHashed.
type plainInput[T any] struct{ in Input[T] }

func (p plainInput[T]) Push(recs []T, ts []int64) { p.in.Push(recs, ts) }
