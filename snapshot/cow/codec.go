package cow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A Codec serialises keys or values of type T when a key group is written
// out, and decodes them on restore. Codecs are called only at write-out and
// restore time, never on the per-record path, so an interface is fine here.
//
// Encodings must be self-delimiting: Decode reads one value from the front
// of src and says how many bytes it used. A key must encode to at least one
// byte (blob readers bound counts by the bytes present). Decode must not keep a reference
// to src (the caller may reuse the buffer).
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(src []byte) (v T, n int, err error)
}

var errShort = errors.New("truncated")

// Uint64Codec encodes a uint64 as 8 little-endian bytes.
type Uint64Codec struct{}

// Append implements Codec.
func (Uint64Codec) Append(dst []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, v)
}

// Decode implements Codec.
func (Uint64Codec) Decode(src []byte) (uint64, int, error) {
	if len(src) < 8 {
		return 0, 0, fmt.Errorf("uint64: %w: %d bytes left, need 8", errShort, len(src))
	}
	return binary.LittleEndian.Uint64(src), 8, nil
}

// Int64Codec encodes an int64 as a zig-zag varint (1 byte for |v| < 64), the
// compact choice for counters.
type Int64Codec struct{}

// Append implements Codec.
func (Int64Codec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// Decode implements Codec.
func (Int64Codec) Decode(src []byte) (int64, int, error) {
	v, n := binary.Varint(src)
	if n <= 0 {
		return 0, 0, fmt.Errorf("int64: bad varint (%d bytes left)", len(src))
	}
	return v, n, nil
}

// StringCodec encodes a string as a uvarint length and its bytes.
type StringCodec struct{}

// Append implements Codec.
func (StringCodec) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// Decode implements Codec.
func (StringCodec) Decode(src []byte) (string, int, error) {
	b, n, err := decodeLenPrefixed(src)
	if err != nil {
		return "", 0, fmt.Errorf("string: %w", err)
	}
	return string(b), n, nil
}

// BytesCodec encodes a byte slice as a uvarint length and its bytes. Decode
// returns a copy.
type BytesCodec struct{}

// Append implements Codec.
func (BytesCodec) Append(dst []byte, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// Decode implements Codec.
func (BytesCodec) Decode(src []byte) ([]byte, int, error) {
	b, n, err := decodeLenPrefixed(src)
	if err != nil {
		return nil, 0, fmt.Errorf("bytes: %w", err)
	}
	return append([]byte(nil), b...), n, nil
}

func decodeLenPrefixed(src []byte) ([]byte, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 {
		return nil, 0, fmt.Errorf("bad length varint (%d bytes left)", len(src))
	}
	if l > uint64(len(src)-n) {
		return nil, 0, fmt.Errorf("%w: length %d, %d bytes left", errShort, l, len(src)-n)
	}
	end := n + int(l)
	return src[n:end], end, nil
}
