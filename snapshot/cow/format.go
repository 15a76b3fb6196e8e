package cow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Key-group blob formats (see the package documentation).
const (
	fullMagic   = "RFKG"
	deltaMagic  = "RFKD"
	blobVersion = 1
	crcLen      = 4
	minBlobLen  = len(fullMagic) + 1 + 3 + crcLen // magic, version, three 1-byte uvarints, crc
)

// ErrNoDelta reports that a snapshot has no delta for a key group: its
// interval deleted more keys than were worth logging. Write the full blob.
var ErrNoDelta = errors.New("cow: no delta for this key group; write it in full")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (s *Snapshot[K, V]) appendHeader(dst []byte, magic string, kg int) []byte {
	dst = append(dst, magic...)
	dst = append(dst, blobVersion)
	dst = binary.AppendUvarint(dst, uint64(s.maxP))
	return binary.AppendUvarint(dst, uint64(kg))
}

// appendCRC closes the blob that starts at dst[start].
func appendCRC(dst []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// AppendKeyGroup appends key group kg, as frozen, to dst in the full blob
// format LoadKeyGroup reads. It may run on any goroutine, concurrently with
// writes to the Map.
func (s *Snapshot[K, V]) AppendKeyGroup(dst []byte, kg int) ([]byte, error) {
	return s.AppendKeyGroupPausing(dst, kg, nil)
}

// AppendKeyGroupPausing is AppendKeyGroup calling pause, if not nil, after
// each page (at most 256 entries) it encodes: a point where the caller may
// hand its thread to other work. An error from pause ends the append with
// that error.
func (s *Snapshot[K, V]) AppendKeyGroupPausing(dst []byte, kg int, pause func() error) ([]byte, error) {
	if s.keys == nil || s.vals == nil {
		return dst, ErrNoCodec
	}
	t, err := s.table(kg)
	if err != nil {
		return dst, fmt.Errorf("append key group %d: %w", kg, err)
	}
	start := len(dst)
	dst = s.appendHeader(dst, fullMagic, kg)
	dst = binary.AppendUvarint(dst, uint64(t.n))
	for ri := range t.dir {
		if dst, err = s.appendPage(dst, &t.dir[ri], false, pause); err != nil {
			return dst, err
		}
	}
	return appendCRC(dst, start), nil
}

// appendPage appends the entries of page r (only those written in its
// interval, if dirtyOnly), then calls pause if it is not nil.
func (s *Snapshot[K, V]) appendPage(dst []byte, r *pageRef[K, V], dirtyOnly bool, pause func() error) ([]byte, error) {
	if s.varint.on {
		dst = appendVarintPage(dst, r, dirtyOnly, s.varint)
	} else {
		dst = s.appendCodecPage(dst, r, dirtyOnly)
	}
	if pause == nil {
		return dst, nil
	}
	return dst, pause()
}

// appendCodecPage appends the entries of page r (only those written in its
// interval, if dirtyOnly) through the codecs.
func (s *Snapshot[K, V]) appendCodecPage(dst []byte, r *pageRef[K, V], dirtyOnly bool) []byte {
	for w, word := range r.occ {
		if dirtyOnly {
			word &= r.dirty[w]
		}
		for ; word != 0; word &= word - 1 {
			sl := r.slot(uint64(w*64 + bits.TrailingZeros64(word)))
			dst = s.keys.Append(dst, sl.key)
			dst = s.vals.Append(dst, sl.val)
		}
	}
	return dst
}

// DeltaBase is the version AppendKeyGroupDelta's deltas start from: the
// previous snapshot's, or 0 (the initial or restored state) for the first.
func (s *Snapshot[K, V]) DeltaBase() uint64 { return s.version - 1 }

// AppendKeyGroupDelta appends the changes to key group kg between snapshot
// DeltaBase() and this one: the keys deleted, then the entries written.
// ApplyKeyGroupDelta on a Map holding kg as of DeltaBase() yields kg as of
// this snapshot. Use it only if DeltaBase()'s key group was persisted;
// otherwise, or on ErrNoDelta, write the full blob.
func (s *Snapshot[K, V]) AppendKeyGroupDelta(dst []byte, kg int) ([]byte, error) {
	return s.AppendKeyGroupDeltaPausing(dst, kg, nil)
}

// AppendKeyGroupDeltaPausing is AppendKeyGroupDelta calling pause, if not
// nil, after each page it visits (see AppendKeyGroupPausing).
func (s *Snapshot[K, V]) AppendKeyGroupDeltaPausing(dst []byte, kg int, pause func() error) ([]byte, error) {
	if s.keys == nil || s.vals == nil {
		return dst, ErrNoCodec
	}
	t, err := s.table(kg)
	if err != nil {
		return dst, fmt.Errorf("append key group %d delta: %w", kg, err)
	}
	if t.deltaLost == s.version {
		return dst, fmt.Errorf("append key group %d delta: %w", kg, ErrNoDelta)
	}
	var deleted []K
	if t.deletedVer == s.version {
		deleted = t.deleted
	}
	start := len(dst)
	dst = s.appendHeader(dst, deltaMagic, kg)
	dst = binary.AppendUvarint(dst, uint64(len(deleted)))
	for _, k := range deleted {
		dst = s.keys.Append(dst, k)
	}
	dst = binary.AppendUvarint(dst, uint64(t.writtenIn(s.version)))
	for ri := range t.dir {
		r := &t.dir[ri]
		if r.ver != s.version {
			continue // not written in this interval
		}
		if dst, err = s.appendPage(dst, r, true, pause); err != nil {
			return dst, err
		}
	}
	return appendCRC(dst, start), nil
}

// writtenIn counts the entries written during interval v.
func (t *table[K, V]) writtenIn(v uint64) int {
	n := 0
	for ri := range t.dir {
		if r := &t.dir[ri]; r.ver == v {
			for w := range r.occ {
				n += bits.OnesCount64(r.occ[w] & r.dirty[w])
			}
		}
	}
	return n
}

// openBlob checks a blob's checksum, magic, version and max parallelism,
// and returns its key group and the bytes after the header. It trusts
// nothing in b.
func openBlob(b []byte, magic string, maxP int) (int, []byte, error) {
	if len(b) < minBlobLen {
		return -1, nil, fmt.Errorf("%w: %d bytes, shorter than any key group blob (%d)", ErrCorrupt, len(b), minBlobLen)
	}
	body := b[:len(b)-crcLen]
	if want, got := binary.LittleEndian.Uint32(b[len(body):]), crc32.Checksum(body, castagnoli); got != want {
		return -1, nil, fmt.Errorf("%w: checksum %#08x, blob says %#08x", ErrCorrupt, got, want)
	}
	if string(body[:len(magic)]) != magic {
		return -1, nil, fmt.Errorf("%w: magic %q, want %q", ErrCorrupt, body[:len(magic)], magic)
	}
	if v := body[len(magic)]; v != blobVersion {
		return -1, nil, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, v, blobVersion)
	}
	rest := body[len(magic)+1:]
	blobMaxP, rest, err := readUvarint(rest, "max parallelism")
	if err != nil {
		return -1, nil, err
	}
	if blobMaxP != uint64(maxP) {
		return -1, nil, fmt.Errorf("%w: written with max parallelism %d, this map has %d", ErrCorrupt, blobMaxP, maxP)
	}
	kg, rest, err := readUvarint(rest, "key group")
	if err != nil {
		return -1, nil, err
	}
	if kg >= uint64(maxP) {
		return -1, nil, fmt.Errorf("%w: key group %d not below max parallelism %d", ErrCorrupt, kg, maxP)
	}
	return int(kg), rest, nil
}

func readUvarint(b []byte, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad %s varint", ErrCorrupt, what)
	}
	return v, b[n:], nil
}

// readCount reads a count of items that each take at least one byte.
func readCount(b []byte, what string) (int, []byte, error) {
	n, rest, err := readUvarint(b, what)
	if err != nil {
		return 0, nil, err
	}
	if n > uint64(len(rest)) {
		return 0, nil, fmt.Errorf("%w: %d %s claimed in %d bytes", ErrCorrupt, n, what, len(rest))
	}
	return int(n), rest, nil
}

// decodeKey decodes one key and checks that it belongs to key group kg.
func (m *Map[K, V]) decodeKey(b []byte, kg int, e int) (K, uint64, []byte, error) {
	k, n, err := m.keys.Decode(b)
	if err != nil {
		return k, 0, nil, fmt.Errorf("%w: entry %d key: %w", ErrCorrupt, e, err)
	}
	h := m.hash(k)
	if got := m.KeyGroupOf(h); got != kg {
		return k, 0, nil, fmt.Errorf("%w: entry %d key %v hashes to key group %d", ErrCorrupt, e, k, got)
	}
	return k, h, b[n:], nil
}

func (m *Map[K, V]) decodeValue(b []byte, e int) (V, []byte, error) {
	v, n, err := m.vals.Decode(b)
	if err != nil {
		return v, nil, fmt.Errorf("%w: entry %d value: %w", ErrCorrupt, e, err)
	}
	return v, b[n:], nil
}
