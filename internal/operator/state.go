package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/ringflow/ringflow/internal/intbits"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// Checkpointed is implemented by operators with state. A task calls
// SnapshotState on its own thread when a checkpoint reaches the operator
// (the synchronous part: it must be quick, O(key groups)); the returned
// snapshot is written out later by a background writer.
type Checkpointed interface {
	SnapshotState(id uint64) (StateSnapshot, error)
	// RestoreState loads the state of the key groups the instance owns, and
	// its subtask state, from a complete checkpoint.
	RestoreState(r StateReader) error
}

// CheckpointListener is implemented by operators that act when a
// checkpoint completes or is aborted (two-phase-commit sinks), and may be
// implemented by user code: a Source, a TwoPhaseSink or a ProcessFunc that
// implements it is told too (after the operator running it has acted, so a
// sink's transactions are committed by then).
//
// Notifications come on the task's thread, from its mailbox between two
// batches, never during a call of the operator's other methods and never
// per record; a task handles them in the order the coordinator sent them,
// so completed ids increase. They must be quick: the task processes no
// records meanwhile. As in Flink, a notification may be missed when the job
// fails or ends first: NotifyComplete(id) says that id and every
// checkpoint before it are complete. An error from NotifyComplete, or a
// panic, fails the job.
type CheckpointListener interface {
	NotifyComplete(id uint64) error
	NotifyAborted(id uint64)
}

// StateSnapshot is the frozen state of one operator instance for one
// checkpoint.
type StateSnapshot interface {
	// WriteTo serializes the state; it runs in the background, while the
	// task goes on (on the task's worker, between its steps, or on another
	// thread), and calls w.Pause every few microseconds of work.
	WriteTo(w StateWriter) error
	// Release frees what the snapshot holds; WriteTo may not run after it.
	Release()
}

// StateWriter receives an operator instance's state for one checkpoint.
// Names are the operator's state names; the writer scopes them by operator.
// A blob is the caller's again when the call returns (the caller reuses its
// buffer): the writer copies what it keeps.
type StateWriter interface {
	PutKeyGroup(state string, kg int, blob []byte) error
	// ReuseKeyGroup makes kg refer to its blobs in checkpoint from.
	ReuseKeyGroup(state string, kg int, from uint64) error
	// AppendKeyGroupDelta extends kg's chain (after a reuse) with a delta;
	// it fails once the chain is as long as the store allows.
	AppendKeyGroupDelta(state string, kg int, blob []byte) error
	// PutSubtask stores state that belongs to the subtask, not to a key
	// group (a sink's pending transactions).
	PutSubtask(state string, blob []byte) error
	// BeforeCommit hands over work that must succeed before the
	// checkpoint commits and that waits on I/O rather than computing (a
	// sink making its transaction durable: an fsync). It starts at once,
	// on a thread that no task waits for, alongside the rest of the
	// write-out; if it fails, so does the checkpoint.
	BeforeCommit(fn func() error)
	// Pause lets the writer's thread do other work (step the worker's
	// tasks) if the write has run long enough; call it between small pieces
	// of work. An error means the write is abandoned: return it.
	Pause() error
}

// EarlyBeforeCommit is implemented by a StateSnapshot whose BeforeCommit
// work may start as soon as the synchronous part has ended, before the
// snapshot is written out. The coordinator takes it then: a transactional
// sink's sync of its pre-committed output otherwise waited for the
// write-out of the chain's state before it, and that write-out for its
// worker's time, which at half load on two cores began up to 100 ms after
// the barrier. TakeBeforeCommit returns the work, or nil, and WriteTo
// then leaves it out.
type EarlyBeforeCommit interface {
	TakeBeforeCommit() func() error
}

// StateReader gives an operator instance its state from a checkpoint.
type StateReader interface {
	// KeyGroup returns kg's base blob and deltas, ok false if the state has
	// no entry for kg (it was empty).
	KeyGroup(state string, kg int) (base []byte, deltas [][]byte, ok bool)
	// Subtask returns the subtask state stored under state for every
	// subtask of the operator's previous run (there may have been a
	// different number of them).
	Subtask(state string) [][]byte
	// Checkpoint returns the id of the checkpoint being restored.
	Checkpoint() uint64
}

// keyedTable is one named cow.Map of an operator, with what incremental
// checkpoints need to know about its last persisted snapshot.
type keyedTable[K comparable, V any] struct {
	name string
	m    *cow.Map[K, V]
	err  error // why the table cannot be serialized, if it cannot

	taken     map[uint64]*tableSnapshot[K, V] // by checkpoint id, not yet complete
	persisted struct {
		valid               bool
		version, checkpoint uint64
		chain               []int8 // see tableSnapshot
	}
	// encodeBuf is the blob buffer of the last snapshot written out, for
	// the next one: grown afresh each checkpoint, it cost page faults and
	// garbage in every write-out. Taken and given back atomically, since a
	// snapshot may be written out on another goroutine.
	encodeBuf atomic.Pointer[[]byte]
}

// newTable makes a keyed state table of ctx's key groups, declared with
// the layouts of K and V.
func newTable[K comparable, V any](ctx *Context, name string, hash func(K) uint64) *keyedTable[K, V] {
	return newTableAs[K, V](ctx, name, hash, keyedLayout(reflect.TypeFor[K](), Layout(reflect.TypeFor[V]())))
}

// keyedLayout is the declared layout of keyed state: its key's and its
// value's.
func keyedLayout(key reflect.Type, value string) string {
	return "key " + Layout(key) + ", value " + value
}

// newTableAs is newTable declaring the given layout, for tables whose V
// wraps the user's type.
func newTableAs[K comparable, V any](ctx *Context, name string, hash func(K) uint64, layout string) *keyedTable[K, V] {
	if err := ctx.Declare(name, layout); err != nil {
		Fail(ctx, err)
	}
	cfg := cow.Config[K, V]{Hash: hash, MaxParallelism: ctx.MaxParallelism, KeyGroups: ctx.KeyGroups, HugePages: ctx.HugePages}
	// NB: sized so that its first insert, inside the first checkpoint's
	// synchronous part, writes memory the map set up here.
	t := &keyedTable[K, V]{name: name, taken: make(map[uint64]*tableSnapshot[K, V], maxTaken)}
	kc, err1 := CodecFor[K]()
	vc, err2 := CodecFor[V]()
	if err := errors.Join(err1, err2); err != nil {
		t.err = fmt.Errorf("state %q cannot be checkpointed: %w", name, err)
	} else {
		cfg.KeyCodec, cfg.ValueCodec = newCowCodec(kc), newCowCodec(vc)
	}
	m, err := cow.New(cfg)
	if err != nil {
		Fail(ctx, fmt.Errorf("keyed state %q: %w", name, err))
	}
	t.m = m
	ctx.closers = append(ctx.closers, m.Close)
	if ctx.Checkpoints {
		ctx.idleWork = append(ctx.idleWork, t.copyAhead)
	}
	return t
}

// copyAhead makes one of the page copies the writes after the table's
// last snapshot would make, or completes one page they copied in part
// (cow.Map.CopyAhead), and reports whether there was one to make.
func (t *keyedTable[K, V]) copyAhead() bool { return t.m.CopyAhead(1) > 0 }

// cowCodec adapts a Codec to the interface cow.Map serializes with.
type cowCodec[T any] struct{ c Codec[T] }

// newCowCodec returns the adapter for c: varints for the built-in integer
// types, rawCowCodec for the raw copy of other plain types.
func newCowCodec[T any](c Codec[T]) cow.Codec[T] {
	var zero T
	switch any(zero).(type) {
	case int, int8, int16, int32, int64:
		return varintCowCodec[T]{signed: true}
	case uint, uint8, uint16, uint32, uint64, uintptr:
		return varintCowCodec[T]{}
	}
	if _, ok := c.(rawCodec[T]); ok {
		return rawCowCodec[T]{cowCodec[T]{c}}
	}
	return cowCodec[T]{c}
}

// varintCowCodec writes a built-in integer type in checkpoints as a varint
// (zig-zag for signed types): keys, counts and sums are mostly small, and a
// key group of 8-byte keys and counts took ~3 times the bytes as raw copies
// — bytes every checkpoint writes, syncs and ingests. Rings still carry the
// raw copy, which costs nothing to encode.
type varintCowCodec[T any] struct{ signed bool }

func (c varintCowCodec[T]) Append(dst []byte, v T) []byte {
	x := intbits.Load(unsafe.Pointer(&v), unsafe.Sizeof(v), c.signed)
	if c.signed {
		return binary.AppendVarint(dst, int64(x))
	}
	return binary.AppendUvarint(dst, x)
}

// VarintSigned implements cow.VarintCodec: a snapshot of a table whose
// keys and values both use this codec writes its pages without calling it.
func (c varintCowCodec[T]) VarintSigned() bool { return c.signed }

func (c varintCowCodec[T]) Decode(src []byte) (T, int, error) {
	var v T
	bits := 8 * unsafe.Sizeof(v)
	var x uint64
	var n int
	var fits bool
	if c.signed {
		var sx int64
		sx, n = binary.Varint(src)
		x, fits = uint64(sx), bits == 64 || -1<<(bits-1) <= sx && sx < 1<<(bits-1)
	} else {
		x, n = binary.Uvarint(src)
		fits = bits == 64 || x < 1<<bits
	}
	switch {
	case n <= 0:
		return v, 0, fmt.Errorf("%T: bad varint (%d bytes left)", v, len(src))
	case !fits && c.signed:
		return v, 0, fmt.Errorf("%T: %d out of range", v, int64(x))
	case !fits:
		return v, 0, fmt.Errorf("%T: %d out of range", v, x)
	}
	intbits.Store(unsafe.Pointer(&v), unsafe.Sizeof(v), x)
	return v, n, nil
}

// NB: passing &v through the Codec interface moves v to the heap: one
// allocation per key and per value written out (~2M per checkpoint at 1M
// keys), and the GC cycles they cost ran on the workers' cores.
// rawCowCodec.Append copies the bytes itself and allocates nothing.
func (a cowCodec[T]) Append(dst []byte, v T) []byte { return a.c.Append(dst, &v) }

// rawCowCodec is cowCodec for rawCodec, whose encoding it repeats.
type rawCowCodec[T any] struct{ cowCodec[T] }

func (rawCowCodec[T]) Append(dst []byte, v T) []byte {
	return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v))...)
}

func (a cowCodec[T]) Decode(src []byte) (T, int, error) {
	var v T
	n, err := a.c.Decode(src, &v)
	return v, n, err
}

// stateTable is the untyped face of a keyedTable.
type stateTable interface {
	snapshotState(id uint64) (StateSnapshot, error)
	restore(r StateReader) error
	complete(id uint64)
}

func (t *keyedTable[K, V]) snapshotState(id uint64) (StateSnapshot, error) { return t.freeze(id) }

// maxTaken is the number of incomplete snapshots a table's map holds
// without growing.
const maxTaken = 4

// snapshotTables freezes every table; on failure it releases what it took.
func snapshotTables(id uint64, tables []stateTable) (StateSnapshot, error) {
	var ss snapshots
	for _, t := range tables {
		s, err := t.snapshotState(id)
		if err != nil {
			ss.Release()
			return nil, err
		}
		ss = append(ss, s)
	}
	return ss, nil
}

// freeze is the synchronous part of a checkpoint of the table: O(key
// groups).
func (t *keyedTable[K, V]) freeze(id uint64) (*tableSnapshot[K, V], error) {
	if t.err != nil {
		return nil, t.err
	}
	snap := t.m.Freeze()
	n := snap.KeyGroups().Len()
	s := &tableSnapshot[K, V]{name: t.name, snap: snap, chain: make([]int8, n), bufHome: &t.encodeBuf}
	if b := t.encodeBuf.Swap(nil); b != nil {
		s.buf = *b
	}
	if t.persisted.valid && t.persisted.version == snap.Version()-1 {
		s.incremental, s.base = true, t.persisted.checkpoint
		s.prev = append([]int8(nil), t.persisted.chain...)
	}
	t.taken[id] = s
	return s, nil
}

// complete records that checkpoint id, and so the snapshot taken for it,
// is durable: the next snapshot may build on it.
func (t *keyedTable[K, V]) complete(id uint64) {
	if s, ok := t.taken[id]; ok {
		t.persisted.valid, t.persisted.version, t.persisted.checkpoint = true, s.snap.Version(), id
		t.persisted.chain = s.chain
	}
	for k := range t.taken {
		if k <= id {
			delete(t.taken, k)
		}
	}
}

// restore loads the key groups the table holds from r. The restored state
// is version 0 of the table, persisted in r's checkpoint, so the next
// checkpoint can reuse its blobs and add deltas. (With rescaling, a key
// group's blobs are still its own: key groups move whole.)
func (t *keyedTable[K, V]) restore(r StateReader) error {
	kgs := t.m.KeyGroups()
	chain := make([]int8, kgs.Len())
	defer func() {
		t.persisted.valid, t.persisted.version, t.persisted.checkpoint = true, 0, r.Checkpoint()
		t.persisted.chain = chain
	}()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		base, deltas, ok := r.KeyGroup(t.name, kg)
		chain[kg-kgs.Start] = int8(min(len(deltas), maxDeltas))
		if !ok {
			chain[kg-kgs.Start] = -1
			continue
		}
		if t.err != nil {
			return t.err
		}
		if _, err := t.m.LoadKeyGroup(base); err != nil {
			return fmt.Errorf("state %q key group %d: %w", t.name, kg, err)
		}
		for i, d := range deltas {
			if _, err := t.m.ApplyKeyGroupDelta(d); err != nil {
				return fmt.Errorf("state %q key group %d delta %d: %w", t.name, kg, i, err)
			}
		}
	}
	return nil
}

// tableSnapshot is a frozen table, written out off the task thread.
type tableSnapshot[K comparable, V any] struct {
	name        string
	snap        *cow.Snapshot[K, V]
	incremental bool   // the previous snapshot is persisted in base
	base        uint64 // checkpoint holding the previous snapshot
	// prev and chain describe, per key group, what the base checkpoint and
	// this one hold: -1 no entry, n >= 0 a full blob and n deltas.
	prev    []int8
	chain   []int8
	buf     []byte                  // blob being encoded
	bufHome *atomic.Pointer[[]byte] // where buf goes back after the write-out
}

// maxDeltas is how long a key group's delta chain may grow before the
// writer writes a full blob again; the store allows longer chains.
const maxDeltas = 8

func (s *tableSnapshot[K, V]) WriteTo(w StateWriter) error {
	defer s.returnBuf()
	kgs := s.snap.KeyGroups()
	for kg := kgs.Start; kg < kgs.End; kg++ {
		if err := s.writeKeyGroup(w, kg, kg-kgs.Start); err != nil {
			return fmt.Errorf("state %q key group %d: %w", s.name, kg, err)
		}
	}
	return nil
}

// writeKeyGroup writes one key group: a reference to the base's blobs if
// it did not change, those plus a delta if few of its keys did, else a full
// blob (nothing if it is empty).
func (s *tableSnapshot[K, V]) writeKeyGroup(w StateWriter, kg, i int) error {
	if s.incremental && s.prev[i] >= 0 {
		changed := s.snap.ChangedSince(kg, s.snap.Version()-1)
		if !changed && w.ReuseKeyGroup(s.name, kg, s.base) == nil {
			s.chain[i] = s.prev[i]
			return nil
		}
		if changed && s.prev[i] < maxDeltas {
			delta, err := s.snap.AppendKeyGroupDeltaPausing(s.buf[:0], kg, w.Pause)
			switch {
			case err == nil:
				s.buf = delta
				if w.ReuseKeyGroup(s.name, kg, s.base) == nil {
					if err := w.AppendKeyGroupDelta(s.name, kg, delta); err != nil {
						return err
					}
					s.chain[i] = s.prev[i] + 1
					return nil
				}
			case !errors.Is(err, cow.ErrNoDelta):
				return err
			}
		}
	}
	if s.snap.Len(kg) == 0 {
		s.chain[i] = -1
		return nil
	}
	blob, err := s.snap.AppendKeyGroupPausing(s.buf[:0], kg, w.Pause)
	if err != nil {
		return err
	}
	s.buf = blob
	s.chain[i] = 0
	return w.PutKeyGroup(s.name, kg, blob)
}

// returnBuf hands the blob buffer back to the table for the next snapshot.
func (s *tableSnapshot[K, V]) returnBuf() {
	if s.bufHome != nil && cap(s.buf) > 0 {
		b := s.buf[:0]
		s.buf = nil
		s.bufHome.Store(&b)
	}
}

func (s *tableSnapshot[K, V]) Release() { s.snap.Release() }

// snapshots collects the table snapshots of an operator into one.
type snapshots []StateSnapshot

func (ss snapshots) WriteTo(w StateWriter) error {
	for _, s := range ss {
		if err := s.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}

func (ss snapshots) Release() {
	for _, s := range ss {
		s.Release()
	}
}
