package ringflow

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
)

// cutReader is the source of a cut edge's downstream operator in one
// process: it reads its share of the process's partitions, decodes the
// records and keeps, per partition and producer (a channel), the latest
// watermark and whether the producer ended. Its watermark is the lowest
// of its channels'; it ends when every channel has. Its position is the
// exchange source's with the channels', so that a restored reader needs
// no marker twice.
//
// The channels of a partition are those of the producers of one layout
// generation. A partition holds every record of an older generation
// before any of a newer one: the processes of a layout write only after
// those of the one before have stopped, and each of their records is
// appended after everything the old ones wrote (committed later or not).
// So the first record of a newer generation in a partition says that the
// older producers have written their last there: the reader drops their
// channels and keeps those of the new generation's producers, each from
// no watermark, until each says its own.
type cutReader[T any] struct {
	spec  *cutSpec
	codec operator.Codec[T]
	inner SourceFunc[ExchangeRecord]

	parts []int32 // this subtask's partitions, ascending
	chans []cutChannels
	// gens gives the producers of each layout generation a partition may
	// still see: those its channels are of, and the later ones, the
	// current included.
	gens  map[uint64]int
	nDone int // partitions whose every channel ended

	raw []ExchangeRecord
	ts  []int64
}

// cutChannels are the channels of one partition: one per producer of
// generation gen.
type cutChannels struct {
	gen    uint64
	wms    []int64
	ended  []bool
	idle   []bool
	nEnded int
}

func newCutChannels(gen uint64, producers int) cutChannels {
	c := cutChannels{gen: gen, wms: make([]int64, producers), ended: make([]bool, producers), idle: make([]bool, producers)}
	for i := range c.wms {
		c.wms[i] = MinWatermark
	}
	return c
}

func (c *cutChannels) done() bool { return c.nEnded == len(c.ended) }

var (
	_ SourceFunc[int] = (*cutReader[int])(nil)
	_ EventTimeSource = (*cutReader[int])(nil)
	_ SplitSource     = (*cutReader[int])(nil)
)

// partsOf returns the partitions of the process that subtask of
// parallelism reads.
func (r *cutReader[T]) partsOf(subtask, parallelism int) []int32 {
	var parts []int32
	for k, p := range r.spec.mine {
		if k%parallelism == subtask {
			parts = append(parts, p)
		}
	}
	return parts
}

// Open implements SourceFunc.
func (r *cutReader[T]) Open(subtask, parallelism int, pos []byte) error {
	r.parts = r.partsOf(subtask, parallelism)
	gen := r.spec.generation()
	r.gens = map[uint64]int{gen: r.spec.producers}
	r.chans, r.nDone = make([]cutChannels, len(r.parts)), 0
	for i := range r.chans {
		r.chans[i] = newCutChannels(gen, r.spec.producers)
	}
	var innerPos []byte
	if pos != nil {
		var err error
		if innerPos, err = r.restore(pos); err != nil {
			return fmt.Errorf("repartition topic %s: %w", r.spec.topic, err)
		}
	}
	return r.inner.Open(subtask, parallelism, innerPos)
}

// Read implements SourceFunc.
func (r *cutReader[T]) Read(buf []T) (int, error) {
	if r.nDone == len(r.chans) {
		return 0, io.EOF // every producer ended, or the subtask owns no partition
	}
	if cap(r.raw) < len(buf) {
		r.raw, r.ts = make([]ExchangeRecord, len(buf)), make([]int64, len(buf))
	}
	n, err := r.inner.Read(r.raw[:len(buf)])
	out := 0
	for _, x := range r.raw[:n] {
		h, body, perr := parseCutHeader(x.Value)
		var ch *cutChannels
		c := 0
		if perr == nil {
			ch, c, perr = r.channel(x.Partition, h)
		}
		if perr != nil {
			return out, fmt.Errorf("repartition topic %s partition %d: %w", r.spec.topic, x.Partition, perr)
		}
		switch h.kind {
		case cutData:
			if _, derr := r.codec.Decode(body, &buf[out]); derr != nil {
				return out, fmt.Errorf("repartition topic %s partition %d: decode: %w", r.spec.topic, x.Partition, derr)
			}
			r.ts[out] = h.t
			ch.idle[c] = false
			out++
		case cutWatermark:
			ch.wms[c] = max(ch.wms[c], h.t)
			ch.idle[c] = false
		case cutIdle:
			ch.idle[c] = true
		case cutEnd:
			if !ch.ended[c] {
				ch.ended[c] = true
				ch.nEnded++
				if ch.done() {
					r.nDone++
				}
			}
			ch.wms[c] = MaxWatermark
		default:
			return out, fmt.Errorf("repartition topic %s partition %d: %w: kind %q", r.spec.topic, x.Partition, errCutRecord, h.kind)
		}
	}
	clear(r.raw[:n])
	if err == nil && r.nDone == len(r.chans) {
		err = io.EOF
	}
	return out, err
}

// channel returns the channels of part and the index among them of the
// producer of h, after moving part on to h's generation if it is newer.
func (r *cutReader[T]) channel(part int32, h cutHeader) (*cutChannels, int, error) {
	i, ok := slices.BinarySearch(r.parts, part)
	if !ok {
		return nil, 0, fmt.Errorf("a record of partition %d, which is not this subtask's", part)
	}
	ch := &r.chans[i]
	switch {
	case h.gen < ch.gen:
		return nil, 0, fmt.Errorf("%w: a record of layout generation %d after one of generation %d: "+
			"a process of an earlier layout still writes (stop every process of a layout before its successors start)",
			ErrCluster, h.gen, ch.gen)
	case h.gen > ch.gen:
		producers, ok := r.gens[h.gen]
		if !ok {
			return nil, 0, fmt.Errorf("%w: a record of layout generation %d, which this process does not know (it runs generation %d): "+
				"a process of a later layout writes", ErrCluster, h.gen, r.spec.generation())
		}
		if ch.done() {
			r.nDone--
		}
		*ch = newCutChannels(h.gen, producers)
		for g := range r.gens {
			if g < r.minGen() {
				delete(r.gens, g)
			}
		}
	}
	if h.producer >= len(ch.wms) {
		return nil, 0, fmt.Errorf("a record of producer %d of %d", h.producer, len(ch.wms))
	}
	return ch, h.producer, nil
}

// minGen returns the oldest generation of the reader's channels.
func (r *cutReader[T]) minGen() uint64 {
	g := r.spec.generation()
	for i := range r.chans {
		g = min(g, r.chans[i].gen)
	}
	return g
}

// Timestamps implements EventTimeSource.
func (r *cutReader[T]) Timestamps(ts []int64) { copy(ts, r.ts) }

// Watermark implements EventTimeSource: the lowest watermark of the
// channels that are not idle; idle if all are (or there are none).
func (r *cutReader[T]) Watermark(time.Time) (int64, bool) {
	wm, active := int64(MaxWatermark), false
	for i := range r.chans {
		ch := &r.chans[i]
		for c, w := range ch.wms {
			if !ch.idle[c] {
				wm, active = min(wm, w), true
			}
		}
	}
	if !active {
		return MinWatermark, true
	}
	return wm, false
}

// Position implements SourceFunc:
//
//	version byte (2), uvarint len(inner), inner,
//	uvarint generations, generations × { uvarint generation, uvarint producers },
//	uvarint partitions, partitions × { uvarint partition, uvarint generation,
//	  uvarint channels, channels × { varint watermark, byte flags (1 ended, 2 idle) } }
//
// Each partition's channels are of its own, so that a rescaled reader
// can take over any partition from any old reader's position. Version 1,
// of generation 0 only, had the channels of all partitions, partition
// after partition, after the inner position.
func (r *cutReader[T]) Position() []byte {
	inner := r.inner.Position()
	b := []byte{2}
	b = binary.AppendUvarint(b, uint64(len(inner)))
	b = append(b, inner...)
	gens := slices.Sorted(maps.Keys(r.gens))
	b = binary.AppendUvarint(b, uint64(len(gens)))
	for _, g := range gens {
		b = binary.AppendUvarint(b, g)
		b = binary.AppendUvarint(b, uint64(r.gens[g]))
	}
	b = binary.AppendUvarint(b, uint64(len(r.parts)))
	for i, p := range r.parts {
		b = appendCutChannels(b, p, &r.chans[i])
	}
	return b
}

func appendCutChannels(b []byte, part int32, ch *cutChannels) []byte {
	b = binary.AppendUvarint(b, uint64(part))
	b = binary.AppendUvarint(b, ch.gen)
	b = binary.AppendUvarint(b, uint64(len(ch.wms)))
	for c, wm := range ch.wms {
		b = binary.AppendVarint(b, wm)
		flags := byte(0)
		if ch.ended[c] {
			flags |= 1
		}
		if ch.idle[c] {
			flags |= 2
		}
		b = append(b, flags)
	}
	return b
}

// cutPosition is a decoded reader position.
type cutPosition struct {
	inner []byte
	gens  map[uint64]int
	parts map[int32]cutChannels
}

var errCutPosition = fmt.Errorf("%w: corrupt position", errCutRecord)

// posReader consumes an encoded position; the first bad read sets bad.
type posReader struct {
	b   []byte
	bad bool
}

func (p *posReader) uvarint(limit uint64) uint64 {
	v, k := binary.Uvarint(p.b)
	if k <= 0 || v > limit {
		p.bad = true
		return 0
	}
	p.b = p.b[k:]
	return v
}

func (p *posReader) varint() int64 {
	v, k := binary.Varint(p.b)
	if k <= 0 {
		p.bad = true
		return 0
	}
	p.b = p.b[k:]
	return v
}

func (p *posReader) byte() byte {
	if len(p.b) == 0 {
		p.bad = true
		return 0
	}
	v := p.b[0]
	p.b = p.b[1:]
	return v
}

func (p *posReader) channels(gen uint64, n int) cutChannels {
	ch := newCutChannels(gen, n)
	for c := range n {
		wm, flags := p.varint(), p.byte()
		ch.wms[c], ch.ended[c], ch.idle[c] = wm, flags&1 != 0, flags&2 != 0
		if ch.ended[c] {
			ch.nEnded++
		}
	}
	return ch
}

// decodeCutPosition decodes a position of version 2; one of version 1 is
// decoded with parts, the partitions its reader read, of producers each.
func decodeCutPosition(b []byte, parts []int32, producers int) (*cutPosition, error) {
	if len(b) == 0 || b[0] != 1 && b[0] != 2 {
		return nil, errCutPosition
	}
	version := b[0]
	p := &posReader{b: b[1:]}
	l := p.uvarint(uint64(len(p.b)))
	if p.bad || l > uint64(len(p.b)) {
		return nil, errCutPosition
	}
	// NB: an empty inner position is none (a source never opened).
	pos := &cutPosition{gens: map[uint64]int{}, parts: map[int32]cutChannels{}}
	if l > 0 {
		pos.inner = slices.Clone(p.b[:l])
	}
	p.b = p.b[l:]
	if version == 1 {
		n := p.uvarint(uint64(len(p.b)))
		if p.bad {
			return nil, errCutPosition
		}
		if parts == nil || n != uint64(len(parts)*producers) {
			return nil, fmt.Errorf("%w: the position has %d channels, the plan %d (partitions × producers): "+
				"a distributed job restores only with its processes, partitions and parallelism, or rescaled (Cluster.RestoreFrom)",
				ErrCluster, n, len(parts)*producers)
		}
		pos.gens[0] = producers
		for _, part := range parts {
			pos.parts[part] = p.channels(0, producers)
		}
	} else {
		ng := p.uvarint(uint64(len(p.b)))
		for range ng {
			g := p.uvarint(1 << 62)
			pos.gens[g] = int(p.uvarint(1 << 30))
		}
		np := p.uvarint(uint64(len(p.b)))
		for range np {
			if p.bad {
				break
			}
			part := int32(p.uvarint(1<<31 - 1))
			g := p.uvarint(1 << 62)
			n := p.uvarint(uint64(len(p.b)))
			if _, ok := pos.gens[g]; !ok || pos.gens[g] != int(n) {
				return nil, fmt.Errorf("%w: partition %d has %d channels of generation %d, which has %d producers",
					errCutPosition, part, n, g, pos.gens[g])
			}
			if _, dup := pos.parts[part]; dup {
				return nil, fmt.Errorf("%w: partition %d twice", errCutPosition, part)
			}
			pos.parts[part] = p.channels(g, int(n))
		}
	}
	if p.bad || len(p.b) != 0 {
		return nil, errCutPosition
	}
	return pos, nil
}

// restore reads a position of this reader's partitions into the channels
// and returns the inner one.
func (r *cutReader[T]) restore(b []byte) ([]byte, error) {
	pos, err := decodeCutPosition(b, r.parts, r.spec.producers)
	if err != nil {
		return nil, err
	}
	if len(pos.parts) != len(r.parts) {
		return nil, fmt.Errorf("%w: the position has %d partitions, the subtask reads %d: "+
			"a distributed job restores only with its processes, partitions and parallelism, or rescaled (Cluster.RestoreFrom)",
			ErrCluster, len(pos.parts), len(r.parts))
	}
	gen := r.spec.generation()
	for g, n := range pos.gens {
		switch {
		case g > gen:
			return nil, fmt.Errorf("%w: the position is of layout generation %d, the process runs %d", ErrCluster, g, gen)
		case g == gen && n != r.spec.producers:
			return nil, fmt.Errorf("%w: the position has %d producers of layout generation %d, the plan %d: "+
				"a distributed job restores only with its processes, partitions and parallelism, or rescaled (Cluster.RestoreFrom)",
				ErrCluster, n, g, r.spec.producers)
		}
		r.gens[g] = n
	}
	for i, part := range r.parts {
		ch, ok := pos.parts[part]
		if !ok {
			return nil, fmt.Errorf("%w: the position lacks partition %d, which the subtask reads: "+
				"a distributed job restores only with its processes, partitions and parallelism, or rescaled (Cluster.RestoreFrom)",
				ErrCluster, part)
		}
		r.chans[i] = ch
		if ch.done() {
			r.nDone++
		}
	}
	return pos.inner, nil
}

// RescalePosition implements SplitSource, for a reader of a process
// restored from the savepoints of another layout's processes (old holds
// the positions of every reader subtask of every old process): each of
// this subtask's partitions comes with the channels of the old reader
// that had it, and the exchange's source shares out their offsets.
func (r *cutReader[T]) RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, error) {
	parts := r.partsOf(subtask, parallelism)
	gens := map[uint64]int{}
	found := map[int32]cutChannels{}
	inners := make([][]byte, len(old))
	for i, b := range old {
		if b == nil {
			return nil, fmt.Errorf("old reader %d has no position", i)
		}
		pos, err := decodeCutPosition(b, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("position of old reader %d: %w", i, err)
		}
		inners[i] = pos.inner
		for g, n := range pos.gens {
			if m, ok := gens[g]; ok && m != n {
				return nil, fmt.Errorf("old readers disagree on the producers of layout generation %d: %d and %d", g, m, n)
			}
			gens[g] = n
		}
		for part, ch := range pos.parts {
			if _, dup := found[part]; dup {
				return nil, fmt.Errorf("partition %d is in two old readers' positions", part)
			}
			found[part] = ch
		}
	}
	split, ok := r.inner.(SplitSource)
	if !ok {
		return nil, fmt.Errorf("the exchange's source (a %T) cannot share its partitions out anew (it is no SplitSource)", r.inner)
	}
	inner, err := split.RescalePosition(subtask, parallelism, inners)
	if err != nil {
		return nil, err
	}
	b := []byte{2}
	b = binary.AppendUvarint(b, uint64(len(inner)))
	b = append(b, inner...)
	ks := slices.Sorted(maps.Keys(gens))
	b = binary.AppendUvarint(b, uint64(len(ks)))
	for _, g := range ks {
		b = binary.AppendUvarint(b, g)
		b = binary.AppendUvarint(b, uint64(gens[g]))
	}
	b = binary.AppendUvarint(b, uint64(len(parts)))
	var missing []int32
	for _, p := range parts {
		ch, ok := found[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		b = appendCutChannels(b, p, &ch)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no old reader's position has partitions %v", missing)
	}
	return b, nil
}

// Close implements SourceFunc.
func (r *cutReader[T]) Close() error { return r.inner.Close() }
