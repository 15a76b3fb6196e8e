package operator

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/snapshot/cow"
)

// roundTrip encodes vs with the state codec newCowCodec picks for T and
// checks each decodes to itself, using the bytes it took.
func roundTrip[T comparable](t *testing.T, vs ...T) []byte {
	t.Helper()
	c := newCowCodec[T](rawCodec[T]{})
	if _, ok := c.(varintCowCodec[T]); !ok {
		t.Fatalf("%T: state codec %T, want varints", *new(T), c)
	}
	// The cow package writes pages of such state in a loop of its own
	// (cow.VarintCodec), which must give the bytes Append gives.
	vc, ok := c.(cow.VarintCodec)
	if !ok {
		t.Fatalf("%T: state codec %T is not a cow.VarintCodec", *new(T), c)
	}
	var buf []byte
	for _, v := range vs {
		b := c.Append(nil, v)
		var want []byte
		if rv := reflect.ValueOf(v); vc.VarintSigned() {
			want = binary.AppendVarint(nil, rv.Int())
		} else {
			want = binary.AppendUvarint(nil, rv.Uint())
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("%T %v: appended % x, want % x (VarintSigned %v)", v, v, b, want, vc.VarintSigned())
		}
		buf = append(buf, b...)
	}
	src := buf
	for _, want := range vs {
		got, n, err := c.Decode(src)
		if err != nil || got != want {
			t.Fatalf("%T: decoded %v, %v; want %v", want, got, err, want)
		}
		src = src[n:]
	}
	if len(src) != 0 {
		t.Fatalf("%T: %d bytes left over", *new(T), len(src))
	}
	return buf
}

// TestStateVarints checks that keyed state of built-in integer types is
// checkpointed as varints that round-trip every value, extremes included;
// that small values take a byte; and that a value too large for the type
// is an error naming it, not a silent truncation.
func TestStateVarints(t *testing.T) {
	roundTrip(t, int8(math.MinInt8), int8(-1), int8(0), int8(math.MaxInt8))
	roundTrip(t, int16(math.MinInt16), int16(300), int16(math.MaxInt16))
	roundTrip(t, int32(math.MinInt32), int32(-70000), int32(math.MaxInt32))
	roundTrip(t, int64(math.MinInt64), int64(-1), int64(1<<40), int64(math.MaxInt64))
	roundTrip(t, int(math.MinInt), int(5), int(math.MaxInt))
	roundTrip(t, uint8(0), uint8(math.MaxUint8))
	roundTrip(t, uint16(math.MaxUint16))
	roundTrip(t, uint32(math.MaxUint32))
	roundTrip(t, uint64(0), uint64(127), uint64(math.MaxUint64))
	roundTrip(t, uint(math.MaxUint))
	roundTrip(t, uintptr(1<<20))
	if b := append(roundTrip(t, int64(-64), int64(63)), roundTrip(t, uint64(127))...); len(b) != 3 {
		t.Fatalf("small values took %d bytes, want 1 each", len(b))
	}

	big := newCowCodec[uint64](rawCodec[uint64]{}).Append(nil, 1<<20)
	if _, _, err := newCowCodec[uint16](rawCodec[uint16]{}).Decode(big); err == nil || !strings.Contains(err.Error(), "uint16") {
		t.Fatalf("decoding 2^20 as a uint16: %v; want an out-of-range error naming uint16", err)
	}
	neg := newCowCodec[int64](rawCodec[int64]{}).Append(nil, -40000)
	if _, _, err := newCowCodec[int8](rawCodec[int8]{}).Decode(neg); err == nil || !strings.Contains(err.Error(), "int8: -40000") {
		t.Fatalf("decoding -40000 as an int8: %v; want an out-of-range error naming int8", err)
	}
	if _, _, err := newCowCodec[uint32](rawCodec[uint32]{}).Decode([]byte{0x80, 0x80}); err == nil {
		t.Fatal("a truncated varint decoded")
	}
}
