package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"
)

// Codec encodes records of type T into ring frames and decodes them back.
//
// A codec whose Size is positive is a fixed-size codec: every value is
// exactly Size bytes, copied as they lie in memory, and a frame of such
// records is read in place, without decoding. Such codecs exist only for
// plain types (see Plain). Every other codec encodes each value into a
// self-delimiting run of bytes.
type Codec[T any] interface {
	// Size returns the encoded size of every value, or 0 if it varies.
	Size() int
	// Append appends the encoding of *v to dst.
	Append(dst []byte, v *T) []byte
	// Decode decodes one value from the front of src into *v and returns
	// the bytes it used. It must copy what it keeps: src is ring memory.
	Decode(src []byte, v *T) (int, error)
}

// ErrNoCodec is wrapped by CodecFor's error for types it cannot encode.
var ErrNoCodec = errors.New("no codec")

// CodecFor returns the built-in codec for T: a raw copy for plain types, and
// a field-by-field encoding for strings, byte slices, and arrays and structs
// of those and of plain types. Other types (pointers, maps, channels,
// functions, interfaces, slices of anything but bytes) have none: supply a
// Codec for them.
func CodecFor[T any]() (Codec[T], error) {
	t := reflect.TypeFor[T]()
	if Plain(t) {
		if t.Size() == 0 {
			return nil, fmt.Errorf("%w for %s: a type of size 0 carries nothing", ErrNoCodec, t)
		}
		return rawCodec[T]{}, nil
	}
	enc, dec, err := fieldCodec(t)
	if err != nil {
		return nil, fmt.Errorf("%w for %s: %v", ErrNoCodec, t, err)
	}
	return reflectCodec[T]{enc: enc, dec: dec}, nil
}

// Plain reports whether values of t hold no pointers, so that their bytes
// are the whole value and may be copied into shared memory. Alignment above
// 8 bytes is not plain either: ring frames are 8-byte aligned.
func Plain(t reflect.Type) bool {
	if t.Align() > 8 {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return Plain(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !Plain(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// rawCodec copies plain values byte for byte.
type rawCodec[T any] struct{}

func (rawCodec[T]) Size() int { return int(unsafe.Sizeof(*new(T))) }

func (rawCodec[T]) Append(dst []byte, v *T) []byte {
	return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))...)
}

func (rawCodec[T]) Decode(src []byte, v *T) (int, error) {
	n := int(unsafe.Sizeof(*v))
	if len(src) < n {
		return 0, fmt.Errorf("%d bytes left, need %d", len(src), n)
	}
	*v = *(*T)(unsafe.Pointer(unsafe.SliceData(src)))
	return n, nil
}

type (
	encodeFunc func(dst []byte, p unsafe.Pointer) []byte
	decodeFunc func(src []byte, p unsafe.Pointer) (int, error)
)

// reflectCodec encodes a value with functions built once, by reflection,
// for its type: no reflection happens per record.
type reflectCodec[T any] struct {
	enc encodeFunc
	dec decodeFunc
}

func (reflectCodec[T]) Size() int { return 0 }

func (c reflectCodec[T]) Append(dst []byte, v *T) []byte { return c.enc(dst, unsafe.Pointer(v)) }

func (c reflectCodec[T]) Decode(src []byte, v *T) (int, error) { return c.dec(src, unsafe.Pointer(v)) }

var errTruncated = errors.New("truncated record")

func fieldCodec(t reflect.Type) (encodeFunc, decodeFunc, error) {
	switch {
	case Plain(t):
		n := int(t.Size())
		return func(dst []byte, p unsafe.Pointer) []byte {
				return append(dst, unsafe.Slice((*byte)(p), n)...)
			}, func(src []byte, p unsafe.Pointer) (int, error) {
				if len(src) < n {
					return 0, errTruncated
				}
				copy(unsafe.Slice((*byte)(p), n), src)
				return n, nil
			}, nil
	case t.Kind() == reflect.String:
		return func(dst []byte, p unsafe.Pointer) []byte {
			s := *(*string)(p)
			return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
		}, decodeString, nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return func(dst []byte, p unsafe.Pointer) []byte {
			b := *(*[]byte)(p)
			return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
		}, decodeBytes, nil
	case t.Kind() == reflect.Struct:
		return structCodec(t)
	case t.Kind() == reflect.Array:
		return arrayCodec(t)
	case t.Kind() == reflect.Slice:
		return sliceCodec(t)
	}
	return nil, nil, fmt.Errorf("%s has no built-in encoding", t)
}

func decodeLen(src []byte) (int, int, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) || n > math.MaxInt32 {
		return 0, 0, errTruncated
	}
	return int(n), k, nil
}

func decodeString(src []byte, p unsafe.Pointer) (int, error) {
	n, k, err := decodeLen(src)
	if err != nil {
		return 0, err
	}
	*(*string)(p) = string(src[k : k+n])
	return k + n, nil
}

func decodeBytes(src []byte, p unsafe.Pointer) (int, error) {
	n, k, err := decodeLen(src)
	if err != nil {
		return 0, err
	}
	*(*[]byte)(p) = append([]byte(nil), src[k:k+n]...)
	return k + n, nil
}

func structCodec(t reflect.Type) (encodeFunc, decodeFunc, error) {
	type field struct {
		off uintptr
		enc encodeFunc
		dec decodeFunc
	}
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		enc, dec, err := fieldCodec(f.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("field %s: %v", f.Name, err)
		}
		fields = append(fields, field{f.Offset, enc, dec})
	}
	return func(dst []byte, p unsafe.Pointer) []byte {
			for _, f := range fields {
				dst = f.enc(dst, unsafe.Add(p, f.off))
			}
			return dst
		}, func(src []byte, p unsafe.Pointer) (int, error) {
			used := 0
			for _, f := range fields {
				n, err := f.dec(src[used:], unsafe.Add(p, f.off))
				if err != nil {
					return 0, err
				}
				used += n
			}
			return used, nil
		}, nil
}

func arrayCodec(t reflect.Type) (encodeFunc, decodeFunc, error) {
	enc, dec, err := fieldCodec(t.Elem())
	if err != nil {
		return nil, nil, err
	}
	n, size := t.Len(), t.Elem().Size()
	return func(dst []byte, p unsafe.Pointer) []byte {
			for i := range n {
				dst = enc(dst, unsafe.Add(p, uintptr(i)*size))
			}
			return dst
		}, func(src []byte, p unsafe.Pointer) (int, error) {
			used := 0
			for i := range n {
				k, err := dec(src[used:], unsafe.Add(p, uintptr(i)*size))
				if err != nil {
					return 0, err
				}
				used += k
			}
			return used, nil
		}, nil
}

// sliceCodec encodes a slice as its length and its elements.
func sliceCodec(t reflect.Type) (encodeFunc, decodeFunc, error) {
	enc, dec, err := fieldCodec(t.Elem())
	if err != nil {
		return nil, nil, err
	}
	size := t.Elem().Size()
	return func(dst []byte, p unsafe.Pointer) []byte {
			n := reflect.NewAt(t, p).Elem().Len()
			dst = binary.AppendUvarint(dst, uint64(n))
			base := unsafe.Pointer(unsafe.SliceData(*(*[]byte)(p)))
			for i := range n {
				dst = enc(dst, unsafe.Add(base, uintptr(i)*size))
			}
			return dst
		}, func(src []byte, p unsafe.Pointer) (int, error) {
			n, k := binary.Uvarint(src)
			if k <= 0 || n > uint64(len(src)) { // every element takes at least a byte, or none at all
				if !(k > 0 && size == 0) {
					return 0, errTruncated
				}
			}
			s := reflect.MakeSlice(t, int(n), int(n))
			reflect.NewAt(t, p).Elem().Set(s)
			base := s.UnsafePointer()
			used := k
			for i := range int(n) {
				m, err := dec(src[used:], unsafe.Add(base, uintptr(i)*size))
				if err != nil {
					return 0, err
				}
				used += m
			}
			return used, nil
		}, nil
}

// Layout describes how values of type t are laid out: the kinds, sizes and
// field names of everything a value holds, and nothing else (not the
// type's name, which may change without its bytes changing). Two types with
// the same layout encode alike; a checkpoint records each state's layout,
// so that a restore can tell a changed type from its checkpoint:
//
//	struct{Seq uint64; Key uint64; Value int64}
//	struct{Name string; Tags []uint8; N int64}
func Layout(t reflect.Type) string {
	var b strings.Builder
	writeLayout(&b, t, map[reflect.Type]bool{})
	return b.String()
}

func writeLayout(b *strings.Builder, t reflect.Type, open map[reflect.Type]bool) {
	if open[t] {
		b.WriteString(t.String()) // a recursive type: its name stands for itself
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		fmt.Fprintf(b, "%s%d", strings.TrimSuffix(t.Kind().String(), "ptr"), 8*t.Size())
	case reflect.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		writeLayout(b, t.Elem(), open)
	case reflect.Slice:
		b.WriteString("[]")
		writeLayout(b, t.Elem(), open)
	case reflect.Pointer:
		open[t] = true
		b.WriteString("*")
		writeLayout(b, t.Elem(), open)
		delete(open, t)
	case reflect.Map:
		b.WriteString("map[")
		writeLayout(b, t.Key(), open)
		b.WriteString("]")
		writeLayout(b, t.Elem(), open)
	case reflect.Struct:
		open[t] = true
		b.WriteString("struct{")
		for i := range t.NumField() {
			if i > 0 {
				b.WriteString("; ")
			}
			f := t.Field(i)
			b.WriteString(f.Name)
			b.WriteString(" ")
			writeLayout(b, f.Type, open)
		}
		b.WriteString("}")
		delete(open, t)
	default:
		b.WriteString(t.Kind().String())
	}
}
