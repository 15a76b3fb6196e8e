package cow

import (
	"encoding/binary"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/ringflow/ringflow/internal/intbits"
)

// VarintCodec is implemented by a Codec of an integer type that writes a
// value exactly as encoding/binary does its 64-bit widening: AppendVarint
// of the value sign-extended when VarintSigned reports true, AppendUvarint
// of it zero-extended when false. When both of a Map's codecs say so, its
// snapshots write a page's entries in a loop of their own, with no call
// through the codecs per key and value. The bytes are the same either way,
// and Decode still reads them.
//
// A key group's write-out is most of a checkpoint's background work at
// millions of keys: with every key of a 1M-key count changed, 31 ns an
// entry through the codecs and 17 ns in the loop (BenchmarkWriteOutVarint).
type VarintCodec interface {
	VarintSigned() bool
}

// VarintSigned implements VarintCodec.
func (Int64Codec) VarintSigned() bool { return true }

// varintForm says how a snapshot writes its pages: through the codecs, or,
// when on, as varints of keys and values of fixed-size integer types.
type varintForm struct {
	on                   bool
	keySigned, valSigned bool
}

// varintFormOf returns the varint form for codecs kc and vc of K and V: on
// if both are VarintCodecs of integer types of 1, 2, 4 or 8 bytes.
func varintFormOf[K comparable, V any](kc Codec[K], vc Codec[V]) varintForm {
	kv, ok1 := kc.(VarintCodec)
	vv, ok2 := vc.(VarintCodec)
	if !ok1 || !ok2 || !isInteger(reflect.TypeFor[K]()) || !isInteger(reflect.TypeFor[V]()) {
		return varintForm{}
	}
	return varintForm{on: true, keySigned: kv.VarintSigned(), valSigned: vv.VarintSigned()}
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// appendVarintPage is appendPage's loop for the varint form f.
func appendVarintPage[K comparable, V any](dst []byte, r *pageRef[K, V], dirtyOnly bool, f varintForm) []byte {
	for w, word := range r.occ {
		if dirtyOnly {
			word &= r.dirty[w]
		}
		for ; word != 0; word &= word - 1 {
			sl := r.slot(uint64(w*64 + bits.TrailingZeros64(word)))
			k := intbits.Load(unsafe.Pointer(&sl.key), unsafe.Sizeof(sl.key), f.keySigned)
			v := intbits.Load(unsafe.Pointer(&sl.val), unsafe.Sizeof(sl.val), f.valSigned)
			dst = binary.AppendUvarint(dst, zigzag(k, f.keySigned))
			dst = binary.AppendUvarint(dst, zigzag(v, f.valSigned))
		}
	}
	return dst
}

// zigzag returns x zig-zag encoded if signed (as binary.AppendVarint
// writes an int64), else x.
func zigzag(x uint64, signed bool) uint64 {
	if signed {
		return x<<1 ^ uint64(int64(x)>>63)
	}
	return x
}
