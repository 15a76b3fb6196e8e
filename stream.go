package ringflow

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
)

// Stream is a stream of records of type T: the output of an operator, or
// the union of several.
type Stream[T any] struct {
	job  *Job
	srcs []streamSrc
}

// streamSrc is one operator output a stream draws from, with the
// partitioning the next edge out of it will use.
type streamSrc struct {
	node    *node
	part    operator.Partitioning
	keyHash any      // operator.KeyHasher[T] for Hash
	side    *sideOut // the side output the stream is; nil: the main output
}

// KeyedStream is a stream partitioned by key: the operators applied to it
// see each key on exactly one subtask and may keep state per key.
type KeyedStream[K comparable, T any] struct {
	Stream[T]
	keys operator.KeyFuncs[K, T]
}

// Collector gathers the records a FlatMap function or a ProcessFunc
// emits for the record or timer at hand, and hands them on once it
// returns. Its methods:
//
//	Emit(v T)             // emits v with the timestamp of the record or timer at hand
//	EmitAt(v T, ts int64) // emits v with event timestamp ts (epoch ms; ignored without event time)
//
// A Collector is valid only during the call it is given to.
type Collector[T any] = operator.Collector[T]

// Codec encodes records of type T into the frames of the rings between
// tasks, and decodes them back; WithCodec gives one to an operator's
// output. Every type has a built-in codec but those holding pointers,
// maps, channels, functions, interfaces or slices of other than bytes:
// plain values (no pointers) are copied as they lie in memory, and
// strings, byte slices, and arrays and structs of them field by field.
// Keyed state (its keys, and the values of MapWithState, NewValueState,
// ...) is checkpointed with the built-in codecs, so its types need one.
//
// A codec whose Size is positive is a fixed-size codec: every value is
// exactly Size bytes, copied as it lies in memory, and a frame of such
// records is read in place, without decoding; only types without pointers
// may have one. Every other codec encodes each value into a
// self-delimiting run of bytes. One Codec serves every subtask of the
// operator, so its methods may be called concurrently.
type Codec[T any] interface {
	// Size returns the encoded size of every value, or 0 if it varies.
	Size() int
	// Append appends the encoding of *v to dst and returns the result.
	Append(dst []byte, v *T) []byte
	// Decode decodes one value from the front of src into *v and returns
	// the number of bytes it used, or an error naming what was wrong. It
	// must copy what it keeps: src is ring memory, reused after the call.
	Decode(src []byte, v *T) (int, error)
}

func (s Stream[T]) timed() bool {
	for _, src := range s.srcs {
		if !src.node.timed {
			return false
		}
	}
	return len(s.srcs) > 0
}

// checkTimed records an error if some of the stream's inputs carry event
// time and others do not.
func (s Stream[T]) checkTimed(name string) bool {
	t := s.timed()
	for _, src := range s.srcs {
		if src.node.timed != t {
			s.job.graphErrorf(ErrEventTime, name, "operator %q: its input mixes streams with and without event time", name)
		}
	}
	return t
}

func newStream[T any](j *Job, n *node, o nodeOptions, timed bool) Stream[T] {
	n.timed = timed
	n.out = typeOf[T](j, n, o.codec)
	return Stream[T]{job: j, srcs: []streamSrc{{node: n}}}
}

// NewSource makes the source of one subtask; each subtask gets its own.
type NewSource[T any] func() SourceFunc[T]

// Source adds a source operator; each subtask reads a source newSrc makes.
func Source[T any](j *Job, name string, newSrc NewSource[T], opts ...Option) Stream[T] {
	return sourceNode(j, name, newSrc, nil, opts)
}

// SourceWithEventTime adds a source whose records carry event time, with
// watermarks as ws says.
func SourceWithEventTime[T any](j *Job, name string, newSrc NewSource[T], ws WatermarkStrategy[T], opts ...Option) Stream[T] {
	if ws.Timestamp == nil && ws.TimestampPtr == nil && ws.Timestamps == nil {
		j.graphErrorf(ErrBadArgument, name, "source %q: watermark strategy without a Timestamp function", name)
	}
	return sourceNode(j, name, newSrc, &ws, opts)
}

// SourceWithOwnEventTime adds a source whose records carry event time
// that the source itself keeps: its SourceFuncs implement EventTimeSource,
// stamping their records and computing their watermarks (per partition of
// a Kafka topic, say), where a WatermarkStrategy would see only a
// subtask's batches. A SourceFunc that does not implement it fails its
// task at open.
func SourceWithOwnEventTime[T any](j *Job, name string, newSrc NewSource[T], opts ...Option) Stream[T] {
	n, o := j.addNode(name, opts)
	batch := j.cfg.BatchSize
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		return nil, operator.NewStampedSourceRunner[T](newSrc(), batch, nil, down.(operator.Input[T]))
	}
	return newStream[T](j, n, o, true)
}

func sourceNode[T any](j *Job, name string, newSrc NewSource[T], ws *WatermarkStrategy[T], opts []Option) Stream[T] {
	n, o := j.addNode(name, opts)
	batch := j.cfg.BatchSize
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		return nil, operator.NewSourceRunner[T](newSrc(), batch, (*operator.WatermarkStrategy[T])(ws), nil, down.(operator.Input[T]))
	}
	return newStream[T](j, n, o, ws != nil)
}

// Map adds an operator that applies f to every record.
func Map[T, U any](s Stream[T], name string, f func(T) U, opts ...Option) Stream[U] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewMap(f, down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](s.job, n, o, s.checkTimed(name))
}

// Filter adds an operator that keeps the records for which keep is true.
func Filter[T any](s Stream[T], name string, keep func(T) bool, opts ...Option) Stream[T] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewFilter(keep, down.(operator.Input[T]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[T](s.job, n, o, s.checkTimed(name))
}

// FlatMap adds an operator that calls f for every record; f emits any number
// of records through the collector.
func FlatMap[T, U any](s Stream[T], name string, f func(T, *Collector[U]), opts ...Option) Stream[U] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewFlatMap(f, down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](s.job, n, o, s.checkTimed(name))
}

// MapPtr is Map with f given a pointer to each record instead of a copy:
// for records of more than a few words, copying each into the call is
// most of what a small f costs (a 400-byte Nexmark event took 49 ns per
// call by value, 4.4 ns by pointer). The pointer is valid only during the
// call, and f may not change the record.
func MapPtr[T, U any](s Stream[T], name string, f func(*T) U, opts ...Option) Stream[U] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewMapPtr(f, down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](s.job, n, o, s.checkTimed(name))
}

// MapBatches is Map a batch at a time: f sets out[i] from in[i] for every
// record of a batch (len(out) == len(in)), one call per batch rather than
// one per record. Each record keeps its timestamp. in and out are valid
// only during the call.
func MapBatches[T, U any](s Stream[T], name string, f func(in []T, out []U), opts ...Option) Stream[U] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewMapBatches(f, down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](s.job, n, o, s.checkTimed(name))
}

// FilterPtr is Filter with keep given a pointer to each record (see
// MapPtr).
func FilterPtr[T any](s Stream[T], name string, keep func(*T) bool, opts ...Option) Stream[T] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewFilterPtr(keep, down.(operator.Input[T]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[T](s.job, n, o, s.checkTimed(name))
}

// FlatMapPtr is FlatMap with f given a pointer to each record (see
// MapPtr).
func FlatMapPtr[T, U any](s Stream[T], name string, f func(*T, *Collector[U]), opts ...Option) Stream[U] {
	n, o := s.job.addNode(name, opts, s.srcs)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewFlatMapPtr(f, down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](s.job, n, o, s.checkTimed(name))
}

// Union merges streams of the same type into one.
// Streams of different jobs cannot be merged: Union records the mistake in
// both jobs, so that Run of either fails, and leaves the other job's
// streams out.
func Union[T any](s Stream[T], more ...Stream[T]) Stream[T] {
	u := Stream[T]{job: s.job, srcs: append([]streamSrc(nil), s.srcs...)}
	for _, m := range more {
		if !sameJob("Union", s.untyped(), m.untyped()) {
			continue
		}
		u.srcs = append(u.srcs, m.srcs...)
	}
	return u
}

// untyped returns the stream without its record type.
func (s Stream[T]) untyped() anyStream { return anyStream{s.job, s.srcs} }

// anyStream is a stream of records of any type, for graph checks.
type anyStream struct {
	job  *Job
	srcs []streamSrc
}

// sameJob reports whether a and b belong to one job; if not, it records a
// graph error naming both streams' operators in each job.
func sameJob(what string, a, b anyStream) bool {
	if a.job == b.job {
		return true
	}
	err := newGraphError(ErrForeignStream, "",
		"%s: the stream of %s and the stream of %s belong to different jobs (%s and %s); a stream can only be combined with streams of its own job",
		what, a.operators(), b.operators(), a.job.describe(), b.job.describe())
	for _, j := range []*Job{a.job, b.job} {
		if j != nil {
			j.errs = append(j.errs, err)
		}
	}
	return false
}

// operators names the operators the stream draws from.
func (s anyStream) operators() string {
	var names []string
	for _, src := range s.srcs {
		names = append(names, strconv.Quote(src.node.name))
	}
	if len(names) == 0 {
		return "no operator"
	}
	return strings.Join(names, ", ")
}

// Rebalance makes the next operator receive the stream's batches spread
// evenly over its subtasks, round robin.
func Rebalance[T any](s Stream[T]) Stream[T] {
	r := Stream[T]{job: s.job}
	for _, src := range s.srcs {
		r.srcs = append(r.srcs, streamSrc{node: src.node, part: operator.Rebalance, side: src.side})
	}
	return r
}

// KeyBy partitions the stream by the key key returns: each key goes to the
// subtask that owns its key group.
func KeyBy[K comparable, T any](s Stream[T], key func(T) K) KeyedStream[K, T] {
	return keyBy(s, key, nil)
}

// KeyByBatch is KeyBy with, besides key, its batch form: keys sets out[i]
// to key(recs[i]) for every i (len(out) == len(recs)), and may keep
// neither slice. The keyed edge and the keyed operator after it then
// extract a batch's keys with one call, where key costs a call through a
// function value per record on each side of the edge; on a pipeline that
// spends a few tens of nanoseconds a record this is worth a few percent
// of its throughput (docs/perf.md). key is still used where one record's
// key is needed, so the two must agree: a build with -tags invariants
// checks every key the batch form gives against key.
func KeyByBatch[K comparable, T any](s Stream[T], key func(T) K, keys func(recs []T, out []K)) KeyedStream[K, T] {
	return keyBy(s, key, keys)
}

func keyBy[K comparable, T any](s Stream[T], key func(T) K, keys func([]T, []K)) KeyedStream[K, T] {
	hash, err := hasherFor[K]()
	if err != nil {
		s.job.errorf("KeyBy: %v", err)
	}
	batch := batchKeysFor(key, keys, hash)
	kf := operator.KeyFuncs[K, T]{Key: key, Hash: hash, KeyAll: batch}
	keyHash := operator.KeyHasher[T]{
		One: func(p *T) uint64 { return hash(key(*p)) },
		All: func(recs []T, hashes []uint64) { batch(recs, nil, hashes) },
	}
	k := KeyedStream[K, T]{Stream: Stream[T]{job: s.job}, keys: kf}
	for _, src := range s.srcs {
		k.srcs = append(k.srcs, streamSrc{node: src.node, part: operator.Hash, keyHash: keyHash, side: src.side})
	}
	return k
}

// Reduce adds a keyed operator that folds each key's records with f and
// emits the running result after every record.
func Reduce[K comparable, T any](k KeyedStream[K, T], name string, f func(acc, rec T) T, opts ...Option) Stream[T] {
	return rollingNode(k, name, opts, func(next operator.Input[T]) keyedOp[T] {
		return operator.NewReduce(k.keys, f, next)
	})
}

// MapWithState adds a keyed operator that calls f for every record with a
// pointer to the record's key's state (the zero S for a new key), which f
// updates in place, and emits what f returns. The pointer is valid only
// during the call. State is checkpointed like every keyed state; S must be
// encodable (see Codec).
//
//	counts := ringflow.MapWithState(ringflow.KeyBy(words, word), "count",
//		func(n *int64, w string) WordCount { *n++; return WordCount{w, *n} })
func MapWithState[K comparable, T, S, U any](k KeyedStream[K, T], name string, f func(state *S, rec T) U, opts ...Option) Stream[U] {
	return rollingNode(k, name, opts, func(next operator.Input[U]) keyedOp[T] {
		return operator.NewMapWithState(k.keys, f, next)
	})
}

// keyedOp is a one-input keyed operator as a node builds it.
type keyedOp[T any] interface {
	operator.Input[T]
	operator.Operator
}

// rollingNode adds the node of a one-input keyed operator that newOp makes
// for each subtask, feeding next; its output is a Stream[U].
func rollingNode[K comparable, T, U any](k KeyedStream[K, T], name string, opts []Option, newOp func(next operator.Input[U]) keyedOp[T]) Stream[U] {
	n, o := k.job.addNode(name, opts, k.srcs)
	n.keyed = true
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := newOp(down.(operator.Input[U]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[U](k.job, n, o, k.checkTimed(name))
}

// AggregateFunc folds records of type T into an accumulator of type A and
// turns it into a result of type O (Flink's AggregateFunction), for
// Aggregate and Window. The accumulator is keyed state: A must have a
// built-in codec (see Codec). Its methods run on the subtask's worker
// thread, one at a time. A function that also implements AddPtrFunc has
// its records folded in place.
type AggregateFunc[T, A, O any] interface {
	// Create returns a new, empty accumulator.
	Create() A
	// Add folds a record into an accumulator and returns the result.
	Add(acc A, rec T) A
	// Result turns an accumulator into the output.
	Result(acc A) O
	// Merge combines two accumulators (when session windows merge).
	Merge(a, b A) A
}

// AddPtrFunc is what an AggregateFunc implements to fold records in place:
// AddPtr(acc, rec) must leave *acc as Add(*acc, *rec) would return it.
// Aggregate and Window call AddPtr instead of Add where the function has
// it, which saves copying the record and the accumulator into and out of
// every call: the window of `dfbench run --pipeline window` (32-byte
// records, 16-byte accumulators) ran about 2% faster with it on one core;
// on two, the gain came and went with the machine's load (docs/perf.md).
type AddPtrFunc[T, A any] interface {
	AddPtr(acc *A, rec *T)
}

var (
	_ operator.AggregateFunc[int, int, int] = (AggregateFunc[int, int, int])(nil)
	_ AggregateFunc[int, int, int]          = (operator.AggregateFunc[int, int, int])(nil)
	_ operator.AddPtrFunc[int, int]         = (AddPtrFunc[int, int])(nil)
	_ AddPtrFunc[int, int]                  = (operator.AddPtrFunc[int, int])(nil)
	_ operator.Codec[int]                   = (Codec[int])(nil)
	_ Codec[int]                            = (operator.Codec[int])(nil)
)

// Aggregate adds a keyed operator that folds each key's records into an
// accumulator and emits its result after every record.
func Aggregate[K comparable, T, A, O any](k KeyedStream[K, T], name string, agg AggregateFunc[T, A, O], opts ...Option) Stream[O] {
	return rollingNode(k, name, opts, func(next operator.Input[O]) keyedOp[T] {
		return operator.NewAggregate[K, T, A, O](k.keys, agg, next)
	})
}

// Process adds a keyed operator running fn's function in each subtask:
// user code that sees one record at a time with its key, keeps named keyed
// state, sets timers and emits to its output and to side outputs (see
// ProcessFunc, and Example_processFunction). An error it returns fails the
// task, naming the operator and subtask, and the job restarts as
// Config.Restart says.
func Process[K comparable, T, O any](k KeyedStream[K, T], name string, fn func() ProcessFunc[K, T, O], opts ...Option) Stream[O] {
	n, o := k.job.addNode(name, opts, k.srcs)
	n.keyed = true
	n.sides = &sideOutputs{}
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewProcess(k.keys, fn(), down.(operator.Input[O]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[O](k.job, n, o, k.checkTimed(name))
}

// Windows describes how Window and WindowJoin assign records to
// event-time windows; make one with TumblingWindows, SlidingWindows or
// SessionWindows. Its fields are Kind (tumbling, sliding or session),
// Size (tumbling and sliding), Slide (sliding) and Gap (session).
type Windows = operator.Windows

// WindowResult is one window's result for one key, as Window emits it:
//
//	type WindowResult[K comparable, O any] struct {
//		Key   K
//		Start int64 // the window's start, epoch ms
//		End   int64 // the window's end (exclusive), epoch ms
//		Value O     // the AggregateFunc's Result
//	}
//
// It carries the timestamp End-1.
type WindowResult[K comparable, O any] = operator.WindowResult[K, O]

// Window adds a keyed operator that aggregates each key's records per
// event-time window and emits each window's result once the watermark
// passes its end. Records that come too late for every window they belong
// to go to a side output, if LateOutput names one (or to a LateRecords
// function), and are counted in Metrics.LateDropped.
func Window[K comparable, T, A, O any](k KeyedStream[K, T], name string, w Windows, agg AggregateFunc[T, A, O], opts ...WindowOption) Stream[WindowResult[K, O]] {
	var wopts nodeOptions
	for _, opt := range opts {
		opt.applyWindow(&wopts)
	}
	n, o := k.job.addNodeWith(name, wopts, k.srcs)
	n.keyed = true
	if err := w.Validate(); err != nil {
		k.job.graphErrorf(ErrBadArgument, name, "window %q: %v", name, err)
	}
	wo := operator.WindowOptions[T]{AllowedLateness: o.lateness}
	var lateFn func(T)
	switch late := o.late.(type) {
	case nil:
	case func(T):
		lateFn, wo.LateOutput = late, lateCallback
	case OutputTag[T]:
		if err := operator.CheckSideOutputName(late.Name()); err != nil {
			k.job.errs = append(k.job.errs, &ConfigError{Field: "LateOutput", Operator: name, Problem: err.Error()})
			break
		}
		wo.LateOutput = late.Name()
		n.sides = &sideOutputs{fixed: map[string]reflect.Type{late.Name(): reflect.TypeFor[T]()}}
	case interface{ Type() reflect.Type }:
		k.job.errs = append(k.job.errs, &ConfigError{Field: "LateOutput", Operator: name, Kind: ErrTypeMismatch,
			Problem: fmt.Sprintf("takes an OutputTag[%s], the window's input, not an OutputTag[%s]", reflect.TypeFor[T](), late.Type())})
	default:
		k.job.errs = append(k.job.errs, &ConfigError{Field: "LateRecords", Operator: name, Kind: ErrTypeMismatch,
			Problem: fmt.Sprintf("takes a func(%s), the window's input, not a %T", reflect.TypeFor[T](), o.late)})
	}
	if !k.timed() {
		k.job.graphErrorf(ErrEventTime, name, "window %q: its input has no event time (use SourceWithEventTime)", name)
	}
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		if lateFn != nil {
			// LateRecords: the late records' side output feeds the function.
			ctx.SideOutputs = map[string]operator.SideOutput{lateCallback: operator.NewSideOutput(operator.FuncInput(lateFn))}
		}
		op := operator.NewWindowAgg[K, T, A, O](k.keys, w, agg, wo, down.(operator.Input[WindowResult[K, O]]))
		return []any{operator.Input[T](op)}, op
	}
	return newStream[WindowResult[K, O]](k.job, n, o, k.checkTimed(name))
}

// WindowJoin adds an operator that joins two keyed streams per key and
// window: when the watermark passes a window's end it emits f(l, r) for
// every pair of records of one key in that window.
func WindowJoin[K comparable, L, R, O any](left KeyedStream[K, L], right KeyedStream[K, R], name string, w Windows, f func(L, R) O, opts ...Option) Stream[O] {
	j := left.job
	rightSrcs := right.srcs
	if !sameJob(fmt.Sprintf("window join %q", name), left.untyped(), right.untyped()) {
		rightSrcs = nil
	}
	n, o := j.addNode(name, opts, left.srcs, rightSrcs)
	n.keyed = true
	if err := w.Validate(); err != nil || w.Kind == operator.Session {
		j.graphErrorf(ErrBadArgument, name, "window join %q: needs tumbling or sliding windows (%v)", name, err)
	}
	if !left.timed() || !right.timed() {
		j.graphErrorf(ErrEventTime, name, "window join %q: both inputs need event time", name)
	}
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewWindowJoin(left.keys, right.keys, w, f, down.(operator.Input[O]))
		return []any{op.Left(), op.Right()}, op
	}
	return newStream[O](j, n, o, true)
}

// Sink adds an operator that hands every record to f, on the subtask's
// worker thread: while f blocks, the worker's other tasks wait. f gets the
// context of the job's attempt, done when the job is cancelled or a task
// fails, so that a write that blocks can give up. An error from f fails the
// task, naming the operator and subtask, and the job restarts as
// Config.Restart says (or fails).
func Sink[T any](s Stream[T], name string, f func(ctx context.Context, rec T) error, opts ...SinkOption) {
	n := s.job.addSink(name, opts, s.srcs)
	s.checkTimed(name)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewSink(f)
		return []any{operator.Input[T](op)}, op
	}
}

// SinkBatches adds a sink that receives records a batch at a time, one
// function per subtask. open is called once for each subtask as the job
// starts, before any record flows (and again when it restarts after a
// failure), with the subtask's index in [0, parallelism); the function it
// returns then receives every batch that reaches that subtask, in order,
// never concurrently, with the context of the job's attempt (as Sink's
// function). A batch is only valid during the call: copy what must
// outlive it. An error from the function, a panic, or a nil function from
// open fails the task.
//
// Compared with Sink, it spends one call per batch instead of one per
// record, and lets each subtask keep its own state without locks:
//
//	ringflow.SinkBatches(counts, "sum", func(subtask int) func(context.Context, []Count) error {
//		total := &totals[subtask]
//		return func(_ context.Context, cs []Count) error {
//			for _, c := range cs {
//				*total += c.N
//			}
//			return nil
//		}
//	})
func SinkBatches[T any](s Stream[T], name string, open func(subtask int) func(ctx context.Context, batch []T) error, opts ...SinkOption) {
	n := s.job.addSink(name, opts, s.srcs)
	s.checkTimed(name)
	if open == nil {
		s.job.graphErrorf(ErrBadArgument, name, "operator %q: SinkBatches: open is nil", name)
	}
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewBatchSink(open)
		return []any{operator.Input[T](op)}, op
	}
}

// typeInfo is what the runtime needs to move records of one type through
// rings, captured while the type is still known.
type typeInfo struct {
	name  string
	codec any // operator.Codec[T], or nil with err set
	err   error
	gate  func(opts operator.GateOptions, edges []operator.EdgeOut) (any, *gateOps, error)
	input func(port any, timed bool, keyHash any) func(rd ringReader) *operator.Channel
	// count puts an operator.Counting link in front of down, an
	// operator.Input[T].
	count func(down any, from, into *operator.Metrics) any
	// cut builds the writer and reader of a keyed exchange between
	// processes (Config.Cluster).
	cut func(s *cutSpec) (writer, reader buildFunc)
}

// gateOps is the untyped face of an operator.Gate.
type gateOps struct {
	op    operator.Operator
	ports []operator.Port
	idle  operator.OutputGate
}

func typeOf[T any](j *Job, n *node, custom any) *typeInfo {
	ti := &typeInfo{name: reflect.TypeFor[T]().String()}
	var codec operator.Codec[T]
	switch c := custom.(type) {
	case nil:
		codec, ti.err = operator.CodecFor[T]()
	case operator.Codec[T]:
		codec = c
	default:
		j.graphErrorf(ErrTypeMismatch, n.name, "operator %q: WithCodec got a codec for %T, but the output is %s", n.name, c, ti.name)
	}
	ti.codec = codec
	ti.cut = cutBuilds(codec)
	ti.gate = func(opts operator.GateOptions, edges []operator.EdgeOut) (any, *gateOps, error) {
		g, err := operator.NewGate(codec, opts, edges)
		if err != nil {
			return nil, nil, err
		}
		return operator.Input[T](g), &gateOps{op: g, ports: g.Ports(), idle: g}, nil
	}
	ti.count = func(down any, from, into *operator.Metrics) any {
		return operator.Counting(down.(operator.Input[T]), from, into)
	}
	ti.input = func(port any, timed bool, keyHash any) func(rd ringReader) *operator.Channel {
		in := port.(operator.Input[T])
		return func(rd ringReader) *operator.Channel { return operator.NewChannel(rd, codec, timed, in, keyHash) }
	}
	return ti
}

func (ti *typeInfo) String() string { return ti.name }

// TumblingWindows returns windows of the given size, aligned to the epoch.
func TumblingWindows(size time.Duration) Windows {
	return Windows{Kind: operator.Tumbling, Size: size}
}

// SlidingWindows returns windows of the given size starting every slide,
// aligned to the epoch.
func SlidingWindows(size, slide time.Duration) Windows {
	return Windows{Kind: operator.Sliding, Size: size, Slide: slide}
}

// SessionWindows returns per-key windows that close after gap without
// records.
func SessionWindows(gap time.Duration) Windows {
	return Windows{Kind: operator.Session, Gap: gap}
}
