package snapshot

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind says what an entry of a checkpoint holds. The store treats every
// entry's bytes as opaque; the kind only decides how the entry is addressed.
type Kind uint8

const (
	// KindKeyGroup is the keyed state of one key group of one operator,
	// addressed by (operator, key group): a base, optionally followed by a
	// chain of deltas the restorer applies in order.
	KindKeyGroup Kind = 1 + iota
	// KindSourcePosition is a source subtask's position, addressed by
	// (operator, subtask).
	KindSourcePosition
	// KindChannelState is the in-flight bytes of one input channel of one
	// subtask recorded by an unaligned checkpoint, addressed by (operator,
	// subtask, channel).
	KindChannelState
	// KindTimers is a subtask's timers, addressed by (operator, subtask).
	KindTimers
	// KindSinkTxn is a sink subtask's pending (pre-committed) transactions,
	// addressed by (operator, subtask).
	KindSinkTxn

	kindEnd // one past the last valid kind
)

func (k Kind) String() string {
	switch k {
	case KindKeyGroup:
		return "keygroup"
	case KindSourcePosition:
		return "source-position"
	case KindChannelState:
		return "channel-state"
	case KindTimers:
		return "timers"
	case KindSinkTxn:
		return "sink-txn"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindKeyGroup && k < kindEnd }

// Limits on what a checkpoint may hold. They bound every length the decoder
// reads, so a corrupted length can never make it allocate without limit.
const (
	// OperatorIDMaxLen is the longest operator id, in bytes.
	OperatorIDMaxLen = 255
	// BlobMaxBytes is the largest single entry.
	BlobMaxBytes = 1 << 30
	// MaxParallelismLimit is the largest maxParallelism (as in Flink).
	MaxParallelismLimit = 1 << 15
	// DeltaChainMax is the longest chain of deltas on one key group's base;
	// a writer should write a new base well before reaching it.
	DeltaChainMax = 1 << 16
	// entriesMax bounds the number of entries of one manifest.
	entriesMax = 1 << 24
)

// entryKey addresses one entry of a checkpoint. For KindKeyGroup, a is the
// key group and b the position in its chain (0 the base, i >= 1 the i-th
// delta); otherwise a is the subtask. b is the input channel for
// KindChannelState and zero for every other kind.
type entryKey struct {
	kind Kind
	op   string
	a, b uint32
}

func (k entryKey) String() string {
	switch k.kind {
	case KindKeyGroup:
		if k.b > 0 {
			return fmt.Sprintf("%s op=%q kg=%d delta=%d", k.kind, k.op, k.a, k.b)
		}
		return fmt.Sprintf("%s op=%q kg=%d", k.kind, k.op, k.a)
	case KindChannelState:
		return fmt.Sprintf("%s op=%q subtask=%d channel=%d", k.kind, k.op, k.a, k.b)
	}
	return fmt.Sprintf("%s op=%q subtask=%d", k.kind, k.op, k.a)
}

// checkOperatorID reports why op is not a usable operator id, or nil.
func checkOperatorID(op string) error {
	switch {
	case op == "":
		return fmt.Errorf("snapshot: empty operator id")
	case len(op) > OperatorIDMaxLen:
		return fmt.Errorf("snapshot: operator id %.20q... is %d bytes, longer than %d",
			op, len(op), OperatorIDMaxLen)
	case !utf8.ValidString(op):
		return fmt.Errorf("snapshot: operator id %q is not valid UTF-8", op)
	}
	return nil
}

// Pebble key layout (see doc.go):
//
//	'b' | origin id (8, big endian) | entry key   -> blob bytes
//	'm' | checkpoint id (8, big endian)           -> manifest
//	'q' | checkpoint id (8, big endian)           -> quarantined manifest bytes
//
// entry key = kind (1) | len(op) (1) | op | a (4, BE) | b (4, BE)
const (
	prefixBlob       = 'b'
	prefixManifest   = 'm'
	prefixQuarantine = 'q'

	entryKeyFixedLen = 1 + 1 + 4 + 4
)

// appendEntryKey appends the encoding of k. Its byte order is the order of
// entries in a manifest and of blobs in the sstable that carries them.
func appendEntryKey(dst []byte, k entryKey) []byte {
	dst = append(dst, byte(k.kind), byte(len(k.op)))
	dst = append(dst, k.op...)
	dst = binary.BigEndian.AppendUint32(dst, k.a)
	return binary.BigEndian.AppendUint32(dst, k.b)
}

// decodeEntryKey decodes an entry key that fills all of src.
func decodeEntryKey(src []byte) (entryKey, error) {
	if len(src) < entryKeyFixedLen {
		return entryKey{}, fmt.Errorf("entry key of %d bytes is too short", len(src))
	}
	opLen := int(src[1])
	if len(src) != entryKeyFixedLen+opLen {
		return entryKey{}, fmt.Errorf("entry key of %d bytes, want %d for an operator id of %d bytes",
			len(src), entryKeyFixedLen+opLen, opLen)
	}
	k := entryKey{kind: Kind(src[0]), op: string(src[2 : 2+opLen])}
	k.a = binary.BigEndian.Uint32(src[2+opLen:])
	k.b = binary.BigEndian.Uint32(src[6+opLen:])
	return k, nil
}

// compareEntryKeys orders entry keys as bytes.Compare orders their
// encodings (appendEntryKey), field by field, without encoding them (a
// manifest's validation compares every pair of neighbours, on a worker's
// thread).
func compareEntryKeys(x, y entryKey) int {
	if x.kind != y.kind {
		return cmp.Compare(x.kind, y.kind)
	}
	// The encoding puts the id's length (one byte) before the id itself.
	if lx, ly := uint8(len(x.op)), uint8(len(y.op)); lx != ly {
		return cmp.Compare(lx, ly)
	}
	if c := strings.Compare(x.op, y.op); c != 0 {
		return c
	}
	if x.a != y.a {
		return cmp.Compare(x.a, y.a)
	}
	return cmp.Compare(x.b, y.b)
}

func blobKey(origin uint64, k entryKey) []byte {
	dst := make([]byte, 0, 9+entryKeyFixedLen+len(k.op))
	dst = append(dst, prefixBlob)
	dst = binary.BigEndian.AppendUint64(dst, origin)
	return appendEntryKey(dst, k)
}

func idKey(prefix byte, id uint64) []byte {
	dst := make([]byte, 9)
	dst[0] = prefix
	binary.BigEndian.PutUint64(dst[1:], id)
	return dst
}

// decodeIDKey returns the id of a manifest or quarantine key.
func decodeIDKey(key []byte) (uint64, bool) {
	if len(key) != 9 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:]), true
}

// decodeBlobKeyOrigin returns the origin id of a blob key.
func decodeBlobKeyOrigin(key []byte) (uint64, bool) {
	if len(key) < 9+entryKeyFixedLen || key[0] != prefixBlob {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:9]), true
}
