package cow

import (
	"fmt"
	"runtime"
)

// LoadKeyGroup restores one key group from a full blob written by
// AppendKeyGroup, possibly by a Map with another key-group range
// (rescaling), and returns its key group. The key group must be in this
// Map's range and empty. On any error nothing is changed. See ChangedSince
// for how a restored key group counts.
func (m *Map[K, V]) LoadKeyGroup(b []byte) (int, error) {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if m.keys == nil || m.vals == nil {
		return -1, ErrNoCodec
	}
	kg, rest, err := openBlob(b, fullMagic, int(m.maxP))
	if err != nil {
		return -1, fmt.Errorf("load key group: %w", err)
	}
	if !m.kgs.Contains(kg) {
		return kg, fmt.Errorf("load key group %d: %w: this map holds %v", kg, ErrKeyGroupNotOwned, m.kgs)
	}
	t := &m.tables[kg-m.kgs.Start]
	if t.n != 0 {
		return kg, fmt.Errorf("load key group %d: %w: holds %d entries", kg, ErrNotEmpty, t.n)
	}
	nt, err := m.decodeTable(kg, rest)
	if err != nil {
		for _, r := range nt.dir {
			m.freePage(r.p)
		}
		return kg, fmt.Errorf("load key group %d: %w", kg, err)
	}
	for _, r := range t.dir {
		m.drop(r)
	}
	nt.deleted, nt.deletedVer, nt.deltaLost = t.deleted, t.deletedVer, t.deltaLost
	m.slots += nt.capacity() - t.capacity()
	*t = nt
	m.n += t.n
	m.restored(t)
	return kg, nil
}

// restored settles the change tracking of a key group just restored: before
// the first Freeze it is the initial state (version 0, nothing written);
// afterwards every entry counts as written now.
func (m *Map[K, V]) restored(t *table[K, V]) {
	if m.stats.Freezes == 0 {
		for i := range t.dir {
			t.dir[i].dirty = [occWords]uint64{}
		}
		t.written, t.deleted, t.deltaLost = 0, nil, 0
		return
	}
	for i := range t.dir {
		r := &t.dir[i]
		if r.ver != m.version {
			m.touchPage(t, uint64(i), 0, true)
		}
		r = &t.dir[i]
		r.dirty = r.occ
	}
	t.written = m.version
}

// decodeTable builds a private table from a full blob's body, checking that
// every key belongs to key group kg and appears once.
func (m *Map[K, V]) decodeTable(kg int, body []byte) (table[K, V], error) {
	count, rest, err := readCount(body, "entries")
	if err != nil {
		return table[K, V]{}, err
	}
	capacity := capacityFor(count)
	nt := table[K, V]{dir: make([]pageRef[K, V], capacity/pageSlots), dirVer: m.version}
	nt.setGeometry(capacity)
	for i := range nt.dir {
		p := m.allocPage()
		*p = page[K, V]{}
		nt.dir[i] = pageRef[K, V]{p: p, ver: m.version}
	}
	for e := range count {
		var k K
		var h uint64
		var v V
		if k, h, rest, err = m.decodeKey(rest, kg, e); err != nil {
			return nt, err
		}
		if v, rest, err = m.decodeValue(rest, e); err != nil {
			return nt, err
		}
		if _, dup := nt.find(h, k); dup {
			return nt, fmt.Errorf("%w: entry %d key %v appears twice", ErrCorrupt, e, k)
		}
		nt.insertNew(h, k, v)
	}
	if len(rest) != 0 {
		return nt, fmt.Errorf("%w: %d bytes after the %d entries", ErrCorrupt, len(rest), count)
	}
	return nt, nil
}

// delta is a decoded, validated delta blob.
type delta[K comparable, V any] struct {
	kg        int
	deleted   []K
	delHashes []uint64
	keys      []K
	hashes    []uint64
	vals      []V
	seen      map[K]struct{} // decodeDelta's, to find keys given twice
}

// reset empties d for the next delta, keeping its memory but no
// references to keys or values.
func (d *delta[K, V]) reset() {
	clear(d.deleted)
	clear(d.keys)
	clear(d.vals)
	clear(d.seen)
	d.kg = 0
	d.deleted, d.delHashes = d.deleted[:0], d.delHashes[:0]
	d.keys, d.hashes, d.vals = d.keys[:0], d.hashes[:0], d.vals[:0]
}

// ApplyKeyGroupDelta applies a delta written by AppendKeyGroupDelta to the
// key group it names, which must be in this Map's range and hold the state
// of the delta's base. Restore a key group by loading its full blob and
// then applying the deltas after it in order. On any error nothing is
// changed. Before the first Freeze the result counts as the initial state,
// as with LoadKeyGroup.
func (m *Map[K, V]) ApplyKeyGroupDelta(b []byte) (int, error) {
	defer runtime.KeepAlive(m) // see keepAlive in slab.go
	if m.keys == nil || m.vals == nil {
		return -1, ErrNoCodec
	}
	d, err := m.decodeDelta(b)
	defer d.reset()
	if err != nil {
		return d.kg, fmt.Errorf("apply key group delta: %w", err)
	}
	if !m.kgs.Contains(d.kg) {
		return d.kg, fmt.Errorf("apply key group %d delta: %w: this map holds %v", d.kg, ErrKeyGroupNotOwned, m.kgs)
	}
	for i, k := range d.deleted {
		m.DeleteHashed(d.delHashes[i], k)
	}
	for i, k := range d.keys {
		if err := m.PutHashed(d.hashes[i], k, d.vals[i]); err != nil {
			return d.kg, fmt.Errorf("apply key group %d delta: %w", d.kg, err) // unreachable: kg checked
		}
	}
	if m.stats.Freezes == 0 {
		m.restored(&m.tables[d.kg-m.kgs.Start])
	}
	return d.kg, nil
}

// decodeDelta decodes b into the Map's delta scratch, which the caller
// resets once it has applied it. NB: a restore applies a chain of deltas
// to every key group; decoded into fresh slices and a fresh map of keys
// seen each time, a restore of 1M keys allocated hundreds of MB.
func (m *Map[K, V]) decodeDelta(b []byte) (*delta[K, V], error) {
	d := &m.scratch
	var err error
	var rest []byte
	if d.kg, rest, err = openBlob(b, deltaMagic, int(m.maxP)); err != nil {
		return d, err
	}
	nDel, rest, err := readCount(rest, "deleted keys")
	if err != nil {
		return d, err
	}
	for e := range nDel {
		var k K
		var h uint64
		if k, h, rest, err = m.decodeKey(rest, d.kg, e); err != nil {
			return d, err
		}
		d.deleted, d.delHashes = append(d.deleted, k), append(d.delHashes, h)
	}
	nPut, rest, err := readCount(rest, "entries")
	if err != nil {
		return d, err
	}
	if d.seen == nil {
		d.seen = make(map[K]struct{}, nPut)
	}
	seen := d.seen
	for e := range nPut {
		var k K
		var h uint64
		var v V
		if k, h, rest, err = m.decodeKey(rest, d.kg, e); err != nil {
			return d, err
		}
		if v, rest, err = m.decodeValue(rest, e); err != nil {
			return d, err
		}
		if _, dup := seen[k]; dup {
			return d, fmt.Errorf("%w: entry %d key %v appears twice", ErrCorrupt, e, k)
		}
		seen[k] = struct{}{}
		d.keys, d.hashes, d.vals = append(d.keys, k), append(d.hashes, h), append(d.vals, v)
	}
	if len(rest) != 0 {
		return d, fmt.Errorf("%w: %d bytes after the %d entries", ErrCorrupt, len(rest), nPut)
	}
	return d, nil
}
