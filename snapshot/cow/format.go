package cow

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Key-group blob format (see the package documentation).
const (
	blobMagic   = "RFKG"
	blobVersion = 1
	crcLen      = 4
	minBlobLen  = len(blobMagic) + 1 + 3 + crcLen // magic, version, three 1-byte uvarints, crc
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendKeyGroup appends key group kg, as frozen, to dst in the blob format
// LoadKeyGroup reads. It may run on any goroutine, concurrently with writes
// to the Map.
func (s *Snapshot[K, V]) AppendKeyGroup(dst []byte, kg int) ([]byte, error) {
	if s.keys == nil || s.vals == nil {
		return dst, ErrNoCodec
	}
	t, err := s.table(kg)
	if err != nil {
		return dst, fmt.Errorf("append key group %d: %w", kg, err)
	}
	start := len(dst)
	dst = append(dst, blobMagic...)
	dst = append(dst, blobVersion)
	dst = binary.AppendUvarint(dst, uint64(s.maxP))
	dst = binary.AppendUvarint(dst, uint64(kg))
	dst = binary.AppendUvarint(dst, uint64(t.n))
	t.all(func(k K, v V) bool {
		dst = s.keys.Append(dst, k)
		dst = s.vals.Append(dst, v)
		return true
	})
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// blobHeader is the validated fixed part of a blob.
type blobHeader struct {
	kg, count int
	entries   []byte // the encoded entries
}

// parseBlob checks the checksum, magic, version and max parallelism and
// splits off the entries. It trusts nothing in b.
func parseBlob(b []byte, maxP int) (blobHeader, error) {
	var h blobHeader
	if len(b) < minBlobLen {
		return h, fmt.Errorf("%w: %d bytes, shorter than any key group blob (%d)", ErrCorrupt, len(b), minBlobLen)
	}
	body := b[:len(b)-crcLen]
	if want, got := binary.LittleEndian.Uint32(b[len(body):]), crc32.Checksum(body, castagnoli); got != want {
		return h, fmt.Errorf("%w: checksum %#08x, blob says %#08x", ErrCorrupt, got, want)
	}
	if string(body[:len(blobMagic)]) != blobMagic {
		return h, fmt.Errorf("%w: magic %q, want %q", ErrCorrupt, body[:len(blobMagic)], blobMagic)
	}
	if v := body[len(blobMagic)]; v != blobVersion {
		return h, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, v, blobVersion)
	}
	rest := body[len(blobMagic)+1:]
	var fields [3]uint64 // maxP, kg, count
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return h, fmt.Errorf("%w: bad header varint %d", ErrCorrupt, i)
		}
		fields[i], rest = v, rest[n:]
	}
	if fields[0] != uint64(maxP) {
		return h, fmt.Errorf("%w: written with max parallelism %d, this map has %d", ErrCorrupt, fields[0], maxP)
	}
	if fields[1] >= uint64(maxP) {
		return h, fmt.Errorf("%w: key group %d not below max parallelism %d", ErrCorrupt, fields[1], maxP)
	}
	if fields[2] > uint64(len(rest)) { // every entry takes at least one byte
		return h, fmt.Errorf("%w: %d entries claimed in %d bytes", ErrCorrupt, fields[2], len(rest))
	}
	return blobHeader{kg: int(fields[1]), count: int(fields[2]), entries: rest}, nil
}

// LoadKeyGroup restores one key group from a blob written by AppendKeyGroup,
// possibly by a Map with another key-group range (rescaling), and returns
// its key group. The key group must be in this Map's range and empty. On
// any error nothing is changed. See ChangedSince for how a restored key
// group counts.
func (m *Map[K, V]) LoadKeyGroup(b []byte) (int, error) {
	if m.keys == nil || m.vals == nil {
		return -1, ErrNoCodec
	}
	h, err := parseBlob(b, int(m.maxP))
	if err != nil {
		return -1, fmt.Errorf("load key group: %w", err)
	}
	if !m.kgs.Contains(h.kg) {
		return h.kg, fmt.Errorf("load key group %d: %w: this map holds %v", h.kg, ErrKeyGroupNotOwned, m.kgs)
	}
	t := &m.tables[h.kg-m.kgs.Start]
	if t.n != 0 {
		return h.kg, fmt.Errorf("load key group %d: %w: holds %d entries", h.kg, ErrNotEmpty, t.n)
	}
	nt, err := m.decodeTable(h)
	if err != nil {
		return h.kg, fmt.Errorf("load key group %d: %w", h.kg, err)
	}
	for _, r := range t.dir {
		m.drop(r)
	}
	*t = nt
	if m.stats.Freezes > 0 {
		t.written = m.version
	}
	m.n += t.n
	return h.kg, nil
}

// decodeTable builds a private table from a blob's entries, checking that
// every key belongs to the blob's key group and appears once.
func (m *Map[K, V]) decodeTable(h blobHeader) (table[K, V], error) {
	capacity := capacityFor(h.count)
	nt := table[K, V]{dir: make([]pageRef[K, V], capacity/pageSlots), dirVer: m.version}
	nt.setGeometry(capacity)
	for i := range nt.dir {
		nt.dir[i] = pageRef[K, V]{p: new(page[K, V]), ver: m.version}
	}
	rest := h.entries
	for e := range h.count {
		k, n, err := m.keys.Decode(rest)
		if err != nil {
			return nt, fmt.Errorf("%w: entry %d key: %w", ErrCorrupt, e, err)
		}
		rest = rest[n:]
		v, n, err := m.vals.Decode(rest)
		if err != nil {
			return nt, fmt.Errorf("%w: entry %d value: %w", ErrCorrupt, e, err)
		}
		rest = rest[n:]
		kh := m.hash(k)
		if kg := m.KeyGroupOf(kh); kg != h.kg {
			return nt, fmt.Errorf("%w: entry %d key %v hashes to key group %d", ErrCorrupt, e, k, kg)
		}
		if _, dup := nt.find(kh, k); dup {
			return nt, fmt.Errorf("%w: entry %d key %v appears twice", ErrCorrupt, e, k)
		}
		nt.insertNew(kh, k, v)
	}
	if len(rest) != 0 {
		return nt, fmt.Errorf("%w: %d bytes after the %d entries", ErrCorrupt, len(rest), h.count)
	}
	return nt, nil
}
