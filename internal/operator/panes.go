package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/ringflow/ringflow/snapshot/cow"
)

// Panes: window state, window first
//
// The window operators of tumbling and sliding windows keep their state
// window first: one pane per open window, each a cow.Map from the record's
// key to its value in that window. A record finds its pane (almost always
// the previous record's) and then its key in it, as a keyed operator finds
// its key: one hash of the key, the hash the edge partitioned by, and a
// table that holds only the keys of one window, so that the entries are
// small and the table a window's size. Firing a window reads its pane in
// order and drops it whole: no timer per key and window, no lookup or
// deletion per entry. The panes are ordered by window end, which is all
// the timers a window operator needs.
//
// A checkpoint freezes every open pane (O(panes × key groups)) and writes,
// per key group, the key group of every pane that has entries in it, each
// prefixed with its window; restore rebuilds the panes from them. Each
// checkpoint writes its key groups whole: a pane is rewritten as records
// reach it, and dropped when it fires, so a chain of deltas would rarely
// outlive its window.

// pane is the state of one window.
type pane[K comparable, V any] struct {
	win Window
	m   *cow.Map[K, V]
	// fired: the watermark has passed the window's end and its result was
	// emitted; the pane stays for the allowed lateness.
	fired bool
}

// panes is the window-first state of one operator (see Panes).
type panes[K comparable, V any] struct {
	ctx   *Context
	name  string
	cfg   cow.Config[K, V]
	err   error         // why the panes cannot be checkpointed, if they cannot
	open  []*pane[K, V] // by window end, then start
	last  *pane[K, V]   // the pane the last get returned
	ahead int           // the pane copyAhead looks at next
	// sizes are the entries per key group of the last pane dropped: a new
	// pane reserves as much (cow.Map.Reserve), for windows mostly hold
	// the keys of the window before them.
	sizes []int
	// spare are the maps of dropped panes, cleared, for the next panes:
	// their pages are reused rather than mapped and faulted in afresh.
	spare []*cow.Map[K, V]
	// bufs are the buffers of the last snapshot written out, for the
	// next; taken and given back atomically, as a snapshot may be written
	// out on another goroutine.
	bufs atomic.Pointer[panesBufs]
}

// panesBufs are a snapshot's buffers: the key group blob being written and
// one pane's part of it.
type panesBufs struct{ buf, tmp []byte }

// panesVersion is the first byte of a key group blob of panes.
const panesVersion = 1

// newPanes declares the state name for ctx's instance and returns its
// panes; hash is the key's hash, the one the operator's input is
// partitioned by.
func newPanes[K comparable, V any](ctx *Context, name string, hash func(K) uint64) *panes[K, V] {
	layout := "window panes: " + keyedLayout(reflect.TypeFor[K](), Layout(reflect.TypeFor[V]()))
	if err := ctx.Declare(name, layout); err != nil {
		Fail(ctx, err)
	}
	p := &panes[K, V]{ctx: ctx, name: name,
		cfg: cow.Config[K, V]{Hash: hash, MaxParallelism: ctx.MaxParallelism, KeyGroups: ctx.KeyGroups, HugePages: ctx.HugePages}}
	kc, err1 := CodecFor[K]()
	vc, err2 := CodecFor[V]()
	if err := errors.Join(err1, err2); err != nil {
		p.err = fmt.Errorf("state %q cannot be checkpointed: %w", name, err)
	} else {
		p.cfg.KeyCodec, p.cfg.ValueCodec = newCowCodec(kc), newCowCodec(vc)
	}
	ctx.closers = append(ctx.closers, p.close)
	if ctx.Checkpoints {
		ctx.idleWork = append(ctx.idleWork, p.copyAhead)
	}
	return p
}

// get returns the pane of window w, making it if there is none.
func (p *panes[K, V]) get(w Window) *pane[K, V] {
	if l := p.last; l != nil && l.win == w {
		return l
	}
	i, found := p.search(w)
	if !found {
		var m *cow.Map[K, V]
		if n := len(p.spare); n > 0 {
			m, p.spare = p.spare[n-1], p.spare[:n-1]
		} else {
			var err error
			if m, err = cow.New(p.cfg); err != nil {
				Fail(p.ctx, fmt.Errorf("window state %q: %w", p.name, err))
			}
		}
		kgs := m.KeyGroups()
		for i, n := range p.sizes {
			if n > 0 {
				m.Reserve(kgs.Start+i, n)
			}
		}
		p.open = slices.Insert(p.open, i, &pane[K, V]{win: w, m: m})
		if p.ahead > i {
			p.ahead++
		}
	}
	p.last = p.open[i]
	return p.last
}

// find returns the pane of window w, or nil.
func (p *panes[K, V]) find(w Window) *pane[K, V] {
	if l := p.last; l != nil && l.win == w {
		return l
	}
	if i, found := p.search(w); found {
		return p.open[i]
	}
	return nil
}

func (p *panes[K, V]) search(w Window) (int, bool) {
	return slices.BinarySearchFunc(p.open, w, func(pn *pane[K, V], w Window) int {
		if pn.win.End != w.End {
			return cmpInt64(pn.win.End, w.End)
		}
		return cmpInt64(pn.win.Start, w.Start)
	})
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// drop removes pn, which must be open; its map is cleared for a pane to
// come, or closed (its memory is given back once the snapshots of it that
// checkpoints still write out are released).
func (p *panes[K, V]) drop(pn *pane[K, V]) {
	i := slices.Index(p.open, pn)
	p.open = slices.Delete(p.open, i, i+1)
	if p.ahead > i {
		p.ahead--
	}
	if p.last == pn {
		p.last = nil
	}
	kgs := pn.m.KeyGroups()
	if p.sizes == nil {
		p.sizes = make([]int, kgs.Len())
	}
	for i := range p.sizes {
		p.sizes[i] = pn.m.KeyGroupLen(kgs.Start + i)
	}
	if len(p.spare) < maxSparePanes {
		pn.m.Clear()
		p.spare = append(p.spare, pn.m)
	} else {
		pn.m.Close()
	}
}

// all calls f for every entry of pn, key group by key group.
func (pn *pane[K, V]) all(f func(K, V)) {
	kgs := pn.m.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		if pn.m.KeyGroupLen(kg) == 0 {
			continue
		}
		for k, v := range pn.m.All(kg) {
			f(k, v)
		}
	}
}

// copyAhead makes one page copy of the writes after a pane's last
// snapshot ahead of them (cow.Map.CopyAhead), trying each pane in turn,
// and reports whether there was one to make.
func (p *panes[K, V]) copyAhead() bool {
	for range p.open {
		if p.ahead >= len(p.open) {
			p.ahead = 0
		}
		if p.open[p.ahead].m.CopyAhead(1) > 0 {
			return true
		}
		p.ahead++
	}
	return false
}

// maxSparePanes is the number of cleared maps panes keep: one is enough
// for tumbling windows, whose panes end one at a time.
const maxSparePanes = 2

func (p *panes[K, V]) close() {
	for _, pn := range p.open {
		pn.m.Close()
	}
	for _, m := range p.spare {
		m.Close()
	}
	p.open, p.last, p.spare = nil, nil, nil
}

// frozenPane is a pane as a checkpoint froze it.
type frozenPane[K comparable, V any] struct {
	win   Window
	fired bool
	snap  *cow.Snapshot[K, V]
}

// panesSnapshot is the panes of one checkpoint, written out off the task
// thread.
type panesSnapshot[K comparable, V any] struct {
	name  string
	panes []frozenPane[K, V]
	panesBufs
	home *atomic.Pointer[panesBufs] // where the buffers go back after the write-out
}

// freeze is the synchronous part of a checkpoint of the panes.
func (p *panes[K, V]) freeze() (StateSnapshot, error) {
	if p.err != nil {
		return nil, p.err
	}
	s := &panesSnapshot[K, V]{name: p.name, panes: make([]frozenPane[K, V], len(p.open)), home: &p.bufs}
	for i, pn := range p.open {
		s.panes[i] = frozenPane[K, V]{win: pn.win, fired: pn.fired, snap: pn.m.Freeze()}
	}
	if b := p.bufs.Swap(nil); b != nil {
		s.panesBufs = *b
	}
	return s, nil
}

func (s *panesSnapshot[K, V]) WriteTo(w StateWriter) error {
	defer func() {
		b := panesBufs{s.buf[:0], s.tmp[:0]}
		s.panesBufs = panesBufs{}
		s.home.Store(&b)
	}()
	if len(s.panes) == 0 {
		return nil
	}
	kgs := s.panes[0].snap.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		buf := append(s.buf[:0], panesVersion)
		n := 0
		for _, fp := range s.panes {
			if fp.snap.Len(kg) > 0 {
				n++
			}
		}
		if n == 0 {
			continue
		}
		buf = binary.AppendUvarint(buf, uint64(n))
		for _, fp := range s.panes {
			if fp.snap.Len(kg) == 0 {
				continue
			}
			blob, err := fp.snap.AppendKeyGroupPausing(s.tmp[:0], kg, w.Pause)
			if err != nil {
				return fmt.Errorf("state %q window [%d,%d) key group %d: %w", s.name, fp.win.Start, fp.win.End, kg, err)
			}
			s.tmp = blob
			buf = binary.AppendVarint(buf, fp.win.Start)
			buf = binary.AppendVarint(buf, fp.win.End)
			fired := byte(0)
			if fp.fired {
				fired = 1
			}
			buf = append(buf, fired)
			buf = binary.AppendUvarint(buf, uint64(len(blob)))
			buf = append(buf, blob...)
		}
		s.buf = buf
		if err := w.PutKeyGroup(s.name, kg, buf); err != nil {
			return err
		}
	}
	return nil
}

func (s *panesSnapshot[K, V]) Release() {
	for _, fp := range s.panes {
		fp.snap.Release()
	}
	s.panes = nil
}

// restore loads the panes of the key groups the instance holds from r.
func (p *panes[K, V]) restore(r StateReader) error {
	kgs := p.ctx.KeyGroups
	for kg := kgs.Start; kg < kgs.End; kg++ {
		base, deltas, ok := r.KeyGroup(p.name, kg)
		if !ok {
			continue
		}
		if p.err != nil {
			return p.err
		}
		if len(deltas) > 0 {
			return fmt.Errorf("state %q key group %d: %d deltas after a blob of panes, which has none", p.name, kg, len(deltas))
		}
		if err := p.load(base); err != nil {
			return fmt.Errorf("state %q key group %d: %w", p.name, kg, err)
		}
	}
	return nil
}

// load adds the panes of one key group blob.
func (p *panes[K, V]) load(b []byte) error {
	if len(b) == 0 || b[0] != panesVersion {
		return fmt.Errorf("not a blob of window panes (version byte %v, want %d)", b[:min(len(b), 1)], panesVersion)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("window panes: truncated count")
	}
	b = b[k:]
	for i := range n {
		start, k1 := binary.Varint(b)
		if k1 <= 0 {
			return fmt.Errorf("window pane %d: truncated start", i)
		}
		end, k2 := binary.Varint(b[k1:])
		if k2 <= 0 || len(b) < k1+k2+1 {
			return fmt.Errorf("window pane %d: truncated end", i)
		}
		b = b[k1+k2:]
		fired := b[0]
		size, k3 := binary.Uvarint(b[1:])
		if k3 <= 0 || fired > 1 || uint64(len(b)-1-k3) < size || end <= start {
			return fmt.Errorf("window pane %d [%d,%d): bad header or truncated", i, start, end)
		}
		b = b[1+k3:]
		pn := p.get(Window{start, end})
		pn.fired = pn.fired || fired == 1
		if _, err := pn.m.LoadKeyGroup(b[:size]); err != nil {
			return fmt.Errorf("window [%d,%d): %w", start, end, err)
		}
		b = b[size:]
	}
	if len(b) != 0 {
		return fmt.Errorf("window panes: %d bytes after the last pane", len(b))
	}
	return nil
}

// restoreKeyed reads state name, kept by a keyedTable of K and V (the
// layout of an earlier version of an operator), from r, and calls f for
// each of its entries in the instance's key groups. It lets an operator
// whose state moved to another layout restore the checkpoints and
// savepoints of the old one.
func restoreKeyed[K comparable, V any](ctx *Context, r StateReader, name string, hash func(K) uint64, f func(K, V)) error {
	kgs := ctx.KeyGroups
	var m *cow.Map[K, V]
	defer func() {
		if m != nil {
			m.Close()
		}
	}()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		base, deltas, ok := r.KeyGroup(name, kg)
		if !ok {
			continue
		}
		if m == nil {
			kc, err1 := CodecFor[K]()
			vc, err2 := CodecFor[V]()
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("state %q: %w", name, err)
			}
			var err error
			m, err = cow.New(cow.Config[K, V]{Hash: hash, MaxParallelism: ctx.MaxParallelism, KeyGroups: kgs,
				KeyCodec: newCowCodec(kc), ValueCodec: newCowCodec(vc)})
			if err != nil {
				return fmt.Errorf("state %q: %w", name, err)
			}
		}
		if _, err := m.LoadKeyGroup(base); err != nil {
			return fmt.Errorf("state %q key group %d: %w", name, kg, err)
		}
		for i, d := range deltas {
			if _, err := m.ApplyKeyGroupDelta(d); err != nil {
				return fmt.Errorf("state %q key group %d delta %d: %w", name, kg, i, err)
			}
		}
		for k, v := range m.All(kg) {
			f(k, v)
		}
	}
	return nil
}
