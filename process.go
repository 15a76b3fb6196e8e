package ringflow

import "github.com/ringflow/ringflow/internal/operator"

// This file holds what a keyed process function is written against, so
// that one import, ringflow, is enough to write one: the function's
// interface, its context, its state and its timers. They are the types of
// package operator, which runs them.

// ProcessFunc is keyed user code with state and timers, as Process runs
// it (Flink's KeyedProcessFunction). Open declares the function's named
// state on the KeyedScope (NewValueState, NewMapState, NewListState);
// Process sees each record with its key's KeyedContext, through which it
// reads the key, the record's timestamp and the watermark, sets timers
// and emits to side outputs (OutputTag.Emit); OnTimer runs when a timer
// of the key fires. Each emits its output through the Collector.
//
// One instance runs per subtask, made by the function given to Process;
// its methods are called on the subtask's worker thread, one at a time,
// and should not block (KeyedContext.Context is there for calls that take
// a context). An error from any of them fails the task with an
// *operator.Error naming the operator and subtask; the job then restarts
// from its latest checkpoint as Config.Restart says, or fails. A
// ProcessFunc that implements CheckpointListener is told when checkpoints
// complete.
type ProcessFunc[K comparable, T, O any] = operator.ProcessFunc[K, T, O]

// KeyedScope is where a ProcessFunc's Open declares its keyed state.
type KeyedScope[K comparable] = operator.KeyedScope[K]

// KeyedContext is what a ProcessFunc's Process and OnTimer see of the key
// at hand: the key (Key), the timestamp of the record or timer
// (Timestamp), the watermark (Watermark), the timers
// (RegisterEventTimer, RegisterProcessingTimer, and their Delete), the
// side outputs (it is an Outputs), and the context of the job's attempt
// (Context).
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

// ValueState is a value per key, declared with NewValueState: Value
// returns the current key's value and whether it has one, Update sets it,
// Clear removes it.
type ValueState[K comparable, V any] = operator.ValueState[K, V]

// MapState is a map per key, declared with NewMapState: Get, Put and
// Delete an entry of the current key's map.
type MapState[K, MK comparable, MV any] = operator.MapState[K, MK, MV]

// ListState is a list per key, declared with NewListState: Get returns the
// current key's list (not to be modified), Add appends to it, Update
// replaces it, Clear removes it.
type ListState[K comparable, V any] = operator.ListState[K, V]

// NewValueState declares a value state named name on s, in a ProcessFunc's
// Open. A checkpoint keeps each state under its operator's name and its
// own, with the layout of its types: a restore gives it back by name,
// whatever the order of declaration, and refuses a checkpoint whose state
// of that name has another layout (see RestoreMismatchError). Names are
// unique within the function, non-empty, without '/'; "event-timers" and
// "processing-timers" are taken. V must be encodable (see Codec).
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
// checkpoint completes or is aborted: a ProcessFunc, a source or a
// TwoPhaseSink that implements it is told, on its task's thread. See
// operator.CheckpointListener.
type CheckpointListener = operator.CheckpointListener

// Watermark bounds.
const (
	// MinWatermark is the watermark before any event time is known.
	MinWatermark = operator.MinWatermark
	// MaxWatermark is the watermark at the end of input: every window and
	// event-time timer fires.
	MaxWatermark = operator.MaxWatermark
)
