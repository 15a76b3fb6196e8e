package cow

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// varintOf is a VarintCodec of any integer type, written the plain way.
type varintOf[T integer] struct{}

func (varintOf[T]) signed() bool { return ^T(0) < 0 }

func (c varintOf[T]) Append(dst []byte, v T) []byte {
	if c.signed() {
		return binary.AppendVarint(dst, int64(v))
	}
	return binary.AppendUvarint(dst, uint64(v))
}

func (c varintOf[T]) Decode(src []byte) (T, int, error) {
	if c.signed() {
		v, n := binary.Varint(src)
		return T(v), n, nil
	}
	v, n := binary.Uvarint(src)
	return T(v), n, nil
}

func (c varintOf[T]) VarintSigned() bool { return c.signed() }

// hidden hides a codec's VarintCodec method: a Map with it writes its pages
// through Append.
type hidden[T any] struct{ c Codec[T] }

func (h hidden[T]) Append(dst []byte, v T) []byte     { return h.c.Append(dst, v) }
func (h hidden[T]) Decode(src []byte) (T, int, error) { return h.c.Decode(src) }

// TestVarintPagesMatchCodec drives two Maps with the same random writes and
// deletes, one whose codecs are VarintCodecs and one whose codecs hide it,
// and checks that their full blobs and deltas are the same bytes, for key
// and value types of every size and signedness.
func TestVarintPagesMatchCodec(t *testing.T) {
	seed := seeds.Seed(t)
	t.Run("uint64-int64", func(t *testing.T) { varintPagesMatch[uint64, int64](t, seed) })
	t.Run("int32-uint16", func(t *testing.T) { varintPagesMatch[int32, uint16](t, seed) })
	t.Run("uint8-int8", func(t *testing.T) { varintPagesMatch[uint8, int8](t, seed) })
	t.Run("int-uint32", func(t *testing.T) { varintPagesMatch[int, uint32](t, seed) })
	t.Run("int16-int", func(t *testing.T) { varintPagesMatch[int16, int](t, seed) })
	t.Run("Int64Codec", func(t *testing.T) {
		fast := newVarintMap[uint64, int64](t, varintOf[uint64]{}, Int64Codec{})
		if !fast.varint.on || !fast.varint.valSigned {
			t.Fatalf("Int64Codec values: varint form %+v, want on and signed", fast.varint)
		}
	})
	t.Run("fixed-width key", func(t *testing.T) {
		m := newVarintMap[uint64, int64](t, Uint64Codec{}, Int64Codec{})
		if m.varint.on {
			t.Fatal("Uint64Codec keys (8 raw bytes) took the varint form")
		}
	})
}

func newVarintMap[K, V integer](t *testing.T, kc Codec[K], vc Codec[V]) *Map[K, V] {
	t.Helper()
	m, err := New(Config[K, V]{
		Hash:           func(k K) uint64 { return keygroups.HashUint64(uint64(k)) },
		MaxParallelism: 8,
		KeyCodec:       kc,
		ValueCodec:     vc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func varintPagesMatch[K, V integer](t *testing.T, seed uint64) {
	fast := newVarintMap[K, V](t, varintOf[K]{}, varintOf[V]{})
	slow := newVarintMap[K, V](t, hidden[K]{varintOf[K]{}}, hidden[V]{varintOf[V]{}})
	if !fast.varint.on || slow.varint.on {
		t.Fatalf("varint forms %+v and %+v: want on, then off", fast.varint, slow.varint)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for round := range 4 {
		for range 3000 {
			k, v := K(r.Uint64()), V(r.Uint64())
			if r.IntN(8) == 0 {
				fast.Delete(k)
				slow.Delete(k)
				continue
			}
			if err := fast.Put(k, v); err != nil {
				t.Fatal(err)
			}
			if err := slow.Put(k, v); err != nil {
				t.Fatal(err)
			}
		}
		fs, ss := fast.Freeze(), slow.Freeze()
		for kg := range 8 {
			fb, err1 := fs.AppendKeyGroup(nil, kg)
			sb, err2 := ss.AppendKeyGroup(nil, kg)
			if err1 != nil || err2 != nil || !bytes.Equal(fb, sb) {
				t.Fatalf("seed %d round %d key group %d: full blobs differ (%d and %d bytes; %v, %v)",
					seed, round, kg, len(fb), len(sb), err1, err2)
			}
			fd, err1 := fs.AppendKeyGroupDelta(nil, kg)
			sd, err2 := ss.AppendKeyGroupDelta(nil, kg)
			if (err1 == nil) != (err2 == nil) || !bytes.Equal(fd, sd) {
				t.Fatalf("seed %d round %d key group %d: deltas differ (%d and %d bytes; %v, %v)",
					seed, round, kg, len(fd), len(sd), err1, err2)
			}
		}
		fs.Release()
		ss.Release()
	}
}
