package operator

import (
	"fmt"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// KeyFuncs extract and hash the key of a record. The hash decides the key
// group, so it must be the one the edge into the operator partitions by.
type KeyFuncs[K comparable, T any] struct {
	Key  func(T) K
	Hash func(K) uint64
	// KeyAll, if not nil, is Key and Hash for a batch: it sets keys[i] to
	// Key(recs[i]) (unless keys is nil) and hashes[i] to its Hash (unless
	// hashes is nil). It saves the keyed operators two indirect calls per
	// record.
	KeyAll func(recs []T, keys []K, hashes []uint64)
}

// KeyHasher hashes the keys of records of type T, one at a time or a batch
// at once (hashes[i] = One(&recs[i])); it is what a Hash edge partitions by.
type KeyHasher[T any] struct {
	One func(*T) uint64
	All func(recs []T, hashes []uint64)
}

// upsert returns the state slot of a key, failing the job with a clear error
// if the key does not belong to this instance (a partitioning bug).
func upsert[K comparable, V any](ctx *Context, m *cow.Map[K, V], h uint64, k K) *V {
	p, err := m.UpsertHashed(h, k)
	if err != nil {
		Fail(ctx, fmt.Errorf("keyed state for key %v: %w", k, err))
	}
	return p
}

// rolling is what the rolling keyed operators (Reduce, Aggregate,
// MapWithState) share: the key functions, one value of type V per key in a
// checkpointed state table, and the keys and hashes of the batch at hand.
// It implements Open, Checkpointed and CheckpointListener for them.
type rolling[K comparable, T, V any] struct {
	Base
	keys   KeyFuncs[K, T]
	name   string // the state's name in checkpoints
	table  *keyedTable[K, V]
	state  *cow.Map[K, V]
	klist  []K
	hashes []uint64 // the batch's key hashes: carried, or in own
	own    []uint64
	// carried holds the key hashes the Hash edge brought with the batch
	// being pushed (PushHashed), else nil.
	carried []uint64
	ahead   aheadChoice // whether the state is prefetched
}

// Open implements Operator.
func (o *rolling[K, T, V]) Open(ctx *Context) error {
	o.Ctx = ctx
	o.table = newTable[K, V](ctx, o.name, o.keys.Hash)
	o.state = o.table.m
	return nil
}

// SnapshotState implements Checkpointed.
func (o *rolling[K, T, V]) SnapshotState(id uint64) (StateSnapshot, error) { return o.table.freeze(id) }

// RestoreState implements Checkpointed.
func (o *rolling[K, T, V]) RestoreState(sr StateReader) error { return o.table.restore(sr) }

// NotifyComplete implements CheckpointListener.
func (o *rolling[K, T, V]) NotifyComplete(id uint64) error { o.table.complete(id); return nil }

// NotifyAborted implements CheckpointListener.
func (o *rolling[K, T, V]) NotifyAborted(uint64) {}

// prepare hashes the keys of a batch and begins its lookups; done ends
// them.
func (o *rolling[K, T, V]) prepare(recs []T) {
	o.ahead.begin()
	o.hashes = hashKeys(o.keys, recs, o.carried, &o.klist, &o.own)
}

func (o *rolling[K, T, V]) done(recs []T) { o.ahead.end(len(recs)) }

// upsert returns the state of record i of the batch prepare saw, and
// whether it was just inserted (holds the zero V). It is called for each
// record in turn, and asks for the state of the records a group ahead
// (cow.Map.PrefetchAhead) when the prefetch policy says so.
func (o *rolling[K, T, V]) upsert(i int) (*V, bool) {
	if o.ahead.on {
		o.state.PrefetchAhead(o.hashes, i)
	}
	p, inserted, err := o.state.UpsertHashedNew(o.hashes[i], o.klist[i])
	if err != nil {
		Fail(o.Ctx, fmt.Errorf("keyed state for key %v: %w", o.klist[i], err))
	}
	return p, inserted
}

// Reduce keeps, per key, the reduction of every record so far with f, and
// emits the new value after each record (a rolling reduce, as Flink's).
type Reduce[K comparable, T any] struct {
	rolling[K, T, T]
	f    func(acc, rec T) T
	next Input[T]
	out  []T
}

// NewReduce returns a keyed reduce operator feeding next.
func NewReduce[K comparable, T any](keys KeyFuncs[K, T], f func(acc, rec T) T, next Input[T]) *Reduce[K, T] {
	return &Reduce[K, T]{rolling: rolling[K, T, T]{keys: keys, name: "reduce"}, f: f, next: next}
}

// PushHashed implements HashedInput.
func (r *Reduce[K, T]) PushHashed(recs []T, ts []int64, hashes []uint64) {
	r.carried = hashes
	r.Push(recs, ts)
	r.carried = nil
}

// Push implements Input.
func (r *Reduce[K, T]) Push(recs []T, ts []int64) {
	defer Guard(r.Ctx)
	r.prepare(recs)
	out := r.out[:0]
	for i := range recs {
		p, inserted := r.upsert(i)
		if inserted {
			*p = recs[i]
		} else {
			*p = r.f(*p, recs[i])
		}
		out = append(out, *p)
	}
	r.done(recs)
	r.out = out
	r.next.Push(out, ts)
}

// hashKeys extracts the keys of a batch into *keys, a reused slice, and
// returns their hashes: carried, the hashes the Hash edge brought with the
// batch (see HashedInput), if not nil, else computed into *hashes.
func hashKeys[K comparable, T any](kf KeyFuncs[K, T], recs []T, carried []uint64, keys *[]K, hashes *[]uint64) []uint64 {
	if carried != nil {
		extractKeys(kf, recs, keys)
		if invariants.Enabled {
			checkCarried(kf, *keys, carried)
		}
		return carried
	}
	if kf.KeyAll != nil {
		if cap(*keys) < len(recs) {
			*keys = make([]K, len(recs))
		}
		if cap(*hashes) < len(recs) {
			*hashes = make([]uint64, len(recs))
		}
		*keys, *hashes = (*keys)[:len(recs)], (*hashes)[:len(recs)]
		kf.KeyAll(recs, *keys, *hashes)
		return *hashes
	}
	ks, hs := (*keys)[:0], (*hashes)[:0]
	for i := range recs {
		k := kf.Key(recs[i])
		ks = append(ks, k)
		hs = append(hs, kf.Hash(k))
	}
	*keys, *hashes = ks, hs
	return hs
}

// extractKeys sets *keys, a reused slice, to the keys of a batch.
func extractKeys[K comparable, T any](kf KeyFuncs[K, T], recs []T, keys *[]K) {
	if kf.KeyAll != nil {
		if cap(*keys) < len(recs) {
			*keys = make([]K, len(recs))
		}
		*keys = (*keys)[:len(recs)]
		kf.KeyAll(recs, *keys, nil)
		return
	}
	ks := (*keys)[:0]
	for i := range recs {
		ks = append(ks, kf.Key(recs[i]))
	}
	*keys = ks
}

// checkCarried panics unless the hashes an edge carried are the keys'.
func checkCarried[K comparable, T any](kf KeyFuncs[K, T], keys []K, carried []uint64) {
	if len(carried) != len(keys) {
		panic(fmt.Sprintf("ringflow: %d carried key hashes for %d records", len(carried), len(keys)))
	}
	for i, k := range keys {
		if h := kf.Hash(k); h != carried[i] {
			panic(fmt.Sprintf("ringflow: key %v carried hash %#x, its hash is %#x", k, carried[i], h))
		}
	}
}

// AggregateFunc folds records of type T into an accumulator of type A and
// turns it into a result of type O, as Flink's AggregateFunction.
type AggregateFunc[T, A, O any] interface {
	// Create returns a new, empty accumulator.
	Create() A
	// Add folds a record into an accumulator and returns the result.
	Add(acc A, rec T) A
	// Result turns an accumulator into the output.
	Result(acc A) O
	// Merge combines two accumulators (used when session windows merge).
	Merge(a, b A) A
}

// AddPtrFunc is what an AggregateFunc implements to fold records in place:
// AddPtr(acc, rec) must leave *acc as Add(*acc, *rec) returns it. Each
// aggregating operator calls it in Add's place where the function has it,
// which saves copying the record and the accumulator into and out of
// every call.
type AddPtrFunc[T, A any] interface {
	AddPtr(acc *A, rec *T)
}

// adder folds records into accumulators with an AggregateFunc: through its
// AddPtr if it has one, else through Add.
type adder[T, A, O any] struct {
	agg AggregateFunc[T, A, O]
	ptr AddPtrFunc[T, A]
}

func newAdder[T, A, O any](agg AggregateFunc[T, A, O]) adder[T, A, O] {
	ptr, _ := agg.(AddPtrFunc[T, A])
	return adder[T, A, O]{agg: agg, ptr: ptr}
}

func (a *adder[T, A, O]) add(acc *A, rec *T) {
	if a.ptr != nil {
		a.ptr.AddPtr(acc, rec)
		return
	}
	*acc = a.agg.Add(*acc, *rec)
}

// Aggregate keeps, per key, an accumulator of every record so far, and
// emits its result after each record.
type Aggregate[K comparable, T, A, O any] struct {
	rolling[K, T, A]
	agg   AggregateFunc[T, A, O]
	adder adder[T, A, O]
	next  Input[O]
	out   []O
}

// NewAggregate returns a keyed rolling-aggregate operator feeding next.
func NewAggregate[K comparable, T, A, O any](keys KeyFuncs[K, T], agg AggregateFunc[T, A, O], next Input[O]) *Aggregate[K, T, A, O] {
	return &Aggregate[K, T, A, O]{rolling: rolling[K, T, A]{keys: keys, name: "aggregate"}, agg: agg, adder: newAdder(agg), next: next}
}

// PushHashed implements HashedInput.
func (a *Aggregate[K, T, A, O]) PushHashed(recs []T, ts []int64, hashes []uint64) {
	a.carried = hashes
	a.Push(recs, ts)
	a.carried = nil
}

// Push implements Input.
func (a *Aggregate[K, T, A, O]) Push(recs []T, ts []int64) {
	defer Guard(a.Ctx)
	a.prepare(recs)
	out := a.out[:0]
	for i := range recs {
		p, inserted := a.upsert(i)
		if inserted {
			*p = a.agg.Create()
		}
		a.adder.add(p, &recs[i])
		out = append(out, a.agg.Result(*p))
	}
	a.done(recs)
	a.out = out
	a.next.Push(out, ts)
}

// MapWithState applies f to every record together with a pointer to its
// key's state, a value of type S that f reads and updates in place, and
// emits what f returns. A key's state starts as the zero S. It is the
// cheapest keyed operator: one probe per record, no copy of the state, and
// state as small as S (a rolling count keeps one int64 per key, as a Go map
// of counts would).
//
// The pointer is valid only during the call: f must not keep it.
type MapWithState[K comparable, T, S, U any] struct {
	rolling[K, T, S]
	f    func(state *S, rec T) U
	next Input[U]
	out  []U
}

// NewMapWithState returns a keyed map-with-state operator feeding next.
func NewMapWithState[K comparable, T, S, U any](keys KeyFuncs[K, T], f func(state *S, rec T) U, next Input[U]) *MapWithState[K, T, S, U] {
	return &MapWithState[K, T, S, U]{rolling: rolling[K, T, S]{keys: keys, name: "state"}, f: f, next: next}
}

// PushHashed implements HashedInput.
func (m *MapWithState[K, T, S, U]) PushHashed(recs []T, ts []int64, hashes []uint64) {
	m.carried = hashes
	m.Push(recs, ts)
	m.carried = nil
}

// Push implements Input.
func (m *MapWithState[K, T, S, U]) Push(recs []T, ts []int64) {
	defer Guard(m.Ctx)
	m.prepare(recs)
	if cap(m.out) < len(recs) {
		m.out = make([]U, len(recs))
	}
	out := m.out[:len(recs)]
	for i := range recs {
		p, _ := m.upsert(i)
		out[i] = m.f(p, recs[i])
	}
	m.done(recs)
	m.next.Push(out, ts)
}
