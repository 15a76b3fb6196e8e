package ringflow

import "github.com/ringflow/ringflow/internal/operator"

// This file holds what a keyed process function is written against, so
// that one import, ringflow, is enough to write one: the function's
// interface, its context, its state and its timers. The interfaces user
// code implements are declared here with the runtime's method sets; the
// types user code calls are the runtime's, and their docs here list the
// methods.

// ProcessFunc is keyed user code with state and timers, as Process runs
// it (Flink's KeyedProcessFunction). Open declares the function's named
// state on the KeyedScope (NewValueState, NewMapState, NewListState);
// Process sees each record with its key's KeyedContext, through which it
// reads the key, the record's timestamp and the watermark, sets timers
// and emits to side outputs (OutputTag.Emit); OnTimer runs when a timer
// of the key fires. Each emits its output through the Collector.
//
// One instance runs per subtask, made by the function given to Process
// (again for every attempt, after a restart); its methods are called on the subtask's worker thread, one at a time,
// and should not block (KeyedContext.Context is there for calls that take
// a context). An error from any of them, or a panic, fails the task with
// an *OperatorError naming the operator and subtask; the job then restarts
// from its latest checkpoint as Config.Restart says, or fails. A
// ProcessFunc that implements CheckpointListener is told when checkpoints
// complete, after its state is.
//
// Its state and timers are checkpointed with the job and restored with
// it; the function's own fields are not: what must survive a restart
// belongs in state declared in Open.
type ProcessFunc[K comparable, T, O any] interface {
	// Open declares the function's state (NewValueState, NewMapState,
	// NewListState) on s. It runs once, before any record; in a job
	// that restored a checkpoint, the state declared holds what was
	// restored.
	Open(s *KeyedScope[K]) error
	// Process handles one record of the current key. It emits through
	// out, and to side outputs with OutputTag.Emit(ctx, ...).
	Process(ctx *KeyedContext[K], rec T, out *Collector[O]) error
	// OnTimer handles a timer of the current key that fired at ts: event
	// time (epoch ms) for event-time timers, Unix ms for processing time.
	OnTimer(ctx *KeyedContext[K], ts int64, domain TimeDomain, out *Collector[O]) error
}

// KeyedScope is where a ProcessFunc's Open declares its keyed state, with
// NewValueState, NewMapState and NewListState. It has no methods of its
// own.
type KeyedScope[K comparable] = operator.KeyedScope[K]

// KeyedContext is what a ProcessFunc's Process and OnTimer see of the key
// at hand. Its methods:
//
//	Key() K                              // the current key
//	Timestamp() int64                    // the record's event time (the timer's, in OnTimer), epoch ms
//	Watermark() int64                    // the current event-time watermark, epoch ms
//	RegisterEventTimer(ts int64)         // OnTimer when the watermark reaches ts
//	DeleteEventTimer(ts int64)           // cancels the key's event-time timer at ts
//	RegisterProcessingTimer(t time.Time) // OnTimer when the wall clock reaches t
//	DeleteProcessingTimer(t time.Time)   // cancels the key's processing-time timer at t
//	Context() context.Context            // the job attempt's context, done when the attempt ends
//
// A key has at most one timer per time and domain: registering it again
// does nothing. Timers are kept in the checkpoint with the state. A
// KeyedContext is an Outputs: OutputTag.Emit takes it. It is valid only
// during the call it is given to.
type KeyedContext[K comparable] = operator.KeyedContext[K]

// TimeDomain says which clock a timer follows: EventTime or
// ProcessingTime.
type TimeDomain = operator.TimeDomain

const (
	// EventTime timers fire when the watermark reaches them.
	EventTime = operator.EventTime
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime = operator.ProcessingTime
)

// ValueState is a value per key, declared with NewValueState. Its
// methods act on the current key's value (that of the record or timer at
// hand):
//
//	Value() (V, bool) // the value, and whether the key has one
//	Update(v V)       // sets the value
//	Clear()           // removes it
type ValueState[K comparable, V any] = operator.ValueState[K, V]

// MapState is a map per key, declared with NewMapState. Its methods act on
// the current key's map:
//
//	Get(mk MK) (MV, bool) // the entry for mk, and whether there is one
//	Put(mk MK, v MV)      // sets the entry for mk
//	Delete(mk MK)         // removes the entry for mk
type MapState[K, MK comparable, MV any] = operator.MapState[K, MK, MV]

// ListState is a list per key, declared with NewListState. Its methods act
// on the current key's list:
//
//	Get() []V      // the list; the caller must not modify it
//	Add(v V)       // appends v
//	Update(vs []V) // replaces the list with a copy of vs
//	Clear()        // removes the list
type ListState[K comparable, V any] = operator.ListState[K, V]

// NewValueState declares a value state named name on s, in a ProcessFunc's
// Open. A checkpoint keeps each state under its operator's name and its
// own, with the layout of its types: a restore gives it back by name,
// whatever the order of declaration, and refuses a checkpoint whose state
// of that name has another layout (see RestoreMismatchError). Names are
// unique within the function, non-empty, without '/'; "event-timers" and
// "processing-timers" are taken. K and V must have built-in codecs (see
// Codec). A bad name, or a type without a codec, fails the task.
func NewValueState[K comparable, V any](s *KeyedScope[K], name string) *ValueState[K, V] {
	return operator.NewValueState[K, V](s, name)
}

// NewMapState declares a map state named name on s (see NewValueState).
func NewMapState[K, MK comparable, MV any](s *KeyedScope[K], name string) *MapState[K, MK, MV] {
	return operator.NewMapState[K, MK, MV](s, name)
}

// NewListState declares a list state named name on s (see NewValueState).
func NewListState[K comparable, V any](s *KeyedScope[K], name string) *ListState[K, V] {
	return operator.NewListState[K, V](s, name)
}

// CheckpointListener is implemented by user code that acts when a
// checkpoint completes or is aborted: a ProcessFunc, a SourceFunc or a
// TwoPhaseSink that implements it is told (after the operator running it
// has acted: a sink's transactions are committed by then).
//
// Notifications come on the task's thread, between two batches, never
// during a call of the function's other methods; a task handles them in
// the order the checkpoints were decided, so completed ids increase. They
// must be quick: the task processes no records meanwhile. A notification
// may be missed when the job fails or ends first: NotifyComplete(id) says
// that checkpoint id and every one before it are complete. An error from
// NotifyComplete, or a panic, fails the task.
type CheckpointListener interface {
	// NotifyComplete says that checkpoint id is complete: durable, and
	// the one a restore would start from.
	NotifyComplete(id uint64) error
	// NotifyAborted says that checkpoint id will not complete.
	NotifyAborted(id uint64)
}

var (
	_ operator.ProcessFunc[int, int, int] = (ProcessFunc[int, int, int])(nil)
	_ ProcessFunc[int, int, int]          = (operator.ProcessFunc[int, int, int])(nil)
	_ operator.CheckpointListener         = (CheckpointListener)(nil)
	_ CheckpointListener                  = (operator.CheckpointListener)(nil)
)

// OperatorError is how a failing operator subtask fails its job: Run
// returns it, possibly wrapped, for an error or a panic of user code — a process function, a source, a sink — or a
// failure of the runtime on its behalf. errors.As finds it:
//
//	var oe *ringflow.OperatorError
//	if errors.As(err, &oe) {
//		log.Printf("operator %s subtask %d failed: %v", oe.Operator, oe.Subtask, oe.Err)
//	}
//
// Its fields:
//
//	Operator string // the operator's name
//	Subtask  int    // the failing subtask, in [0, parallelism)
//	Err      error  // the cause: the user code's error, or the panic (wrapping ErrPanic)
//	Stack    []byte // the panic's stack; nil if it was not a panic
//
// Its message is one line, "ringflow: operator %q subtask %d: " and the
// cause; it unwraps to Err.
type OperatorError = operator.Error

// ErrPanic is wrapped by the OperatorError of a panic in user code; if the
// panic's value is an error, the OperatorError wraps that too.
var ErrPanic = operator.ErrPanic

// Watermark bounds.
const (
	// MinWatermark, math.MinInt64, is the watermark before any event
	// time is known.
	MinWatermark = operator.MinWatermark
	// MaxWatermark, math.MaxInt64, is the watermark at the end of input:
	// every window and event-time timer fires.
	MaxWatermark = operator.MaxWatermark
)
