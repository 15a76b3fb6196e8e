package operator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/keygroups"
)

// Input receives batches of records. recs and ts are valid only during the
// call: they may alias ring memory or a buffer the caller reuses. ts holds
// each record's event timestamp (epoch milliseconds) for streams that carry
// event time, and is nil for those that do not.
type Input[T any] interface {
	Push(recs []T, ts []int64)
}

// HashedInput is an Input that also takes the key hashes of a batch, as a
// Hash edge carries them (hashes[i] is the hash of recs[i]'s key, the one
// the edge partitioned by): the keyed operators take them instead of
// hashing the keys again. The hashes, like the records, are valid only
// during the call.
type HashedInput[T any] interface {
	Input[T]
	PushHashed(recs []T, ts []int64, hashes []uint64)
}

// Operator is the control side of one operator instance. A task calls the
// operators of its chain in chain order for every control event, so that all
// data an operator emits while handling an event reaches the next operator
// before that operator sees the event.
type Operator interface {
	// Open prepares the operator to run as ctx describes.
	Open(ctx *Context) error
	// Watermark says that event time has reached wm: no record with a
	// timestamp <= wm follows (except late ones).
	Watermark(wm int64)
	// End says that no record follows at all. Watermark(MaxWatermark) has
	// been delivered just before.
	End()
	// Close releases what the operator holds; it runs after End or on
	// failure.
	Close() error
}

// Ticker is implemented by operators that act on wall-clock time
// (processing-time timers). Tick is called with the current time whenever
// the task runs; Deadline says when the operator next needs a Tick.
type Ticker interface {
	Tick(now time.Time)
	Deadline() time.Time
}

// Watermark values.
const (
	// MinWatermark is the watermark before any event time is known.
	MinWatermark = math.MinInt64
	// MaxWatermark is the watermark at the end of input: every window and
	// event-time timer fires.
	MaxWatermark = math.MaxInt64
)

// Context describes the operator instance a chain is built for.
type Context struct {
	Operator       string // operator name, unique in the job
	Subtask        int    // index of this instance, in [0, Parallelism)
	Parallelism    int
	MaxParallelism int
	// KeyGroups is the range of key groups this instance owns (keyed
	// operators only).
	KeyGroups keygroups.Range
	// Timed says whether the operator's input carries event time.
	Timed bool
	// Checkpoints says whether the job takes checkpoints.
	Checkpoints bool
	// HugePages puts large keyed state on transparent huge pages
	// (cow.Config.HugePages).
	HugePages bool
	// Metrics of this instance.
	Metrics *Metrics
	// Attempt is the context of the job's current attempt: it is done when
	// the attempt ends — the job's context is cancelled, or a task failed
	// (the job then restarts, or fails). User code that blocks (a sink's
	// write, a source's reader) waits on it, so that a failure elsewhere
	// does not wait for it. Nil is context.Background().
	Attempt context.Context
	// SideOutputs are the side outputs of the instance the job reads, by
	// name (see OutputTag); nil if it reads none.
	SideOutputs map[string]SideOutput
	// Loops are the loops whose body the instance is in (it is on a path
	// from a loop's head to its tail, nested loops' back edges included):
	// at each snapshot the task tells them of the timers the instance
	// holds pending (TimerHolder), which keep a loop from ending.
	Loops []LoopBody
	// Share, for a source of one process of a distributed job, is the
	// subtask's place among the source's subtasks in every process: the
	// source opens as that subtask of that parallelism, so that the
	// processes share its input out between them. Zero: Subtask of
	// Parallelism.
	Share struct{ Subtask, Parallelism int }

	// idleWork is what the instance's state does while its task has no
	// records waiting (see Task.idleStatus): each call does a piece of a
	// microsecond or so and reports whether there was any to do.
	idleWork []func() bool
	// closers give back what the instance's state holds outside the Go
	// heap, when its task closes (after the operator's own Close).
	closers []func()
	// declared is the state the instance declared as it opened.
	declared []StateDecl
}

// Ctx returns c.Attempt, or context.Background() if it is nil.
func (c *Context) Ctx() context.Context {
	if c == nil || c.Attempt == nil {
		return context.Background()
	}
	return c.Attempt
}

// StateDecl is one piece of state an operator instance declares: its name,
// unique within the operator, and its layout (see Layout), which a
// checkpoint records and a restore compares.
type StateDecl struct {
	Name, Layout string
}

// Declared returns the state the instance declared, in order.
func (c *Context) Declared() []StateDecl { return c.declared }

// ErrStateName is wrapped by the error for a state name that is empty,
// holds '/' or NUL, or is declared twice by one operator.
var ErrStateName = errors.New("bad state name")

// Declare records a piece of the instance's state. Operators declare every
// state they checkpoint, as they open.
func (c *Context) Declare(name, layout string) error {
	switch {
	case name == "" || strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w %q: must be non-empty, without '/' or NUL", ErrStateName, name)
	case slices.ContainsFunc(c.declared, func(d StateDecl) bool { return d.Name == name }):
		return fmt.Errorf("%w %q: declared twice (each state needs a name of its own)", ErrStateName, name)
	}
	c.declared = append(c.declared, StateDecl{Name: name, Layout: layout})
	return nil
}

// Metrics are counters an operator instance updates and a job reports.
// Records are counted a batch at a time: into a chain's head as its task
// reads its input frames, and out of every operator (into the next one of
// its chain, when it has one) by a Counting link in front of what it
// feeds; a source's records count both in and out.
type Metrics struct {
	RecordsIn   atomic.Int64
	RecordsOut  atomic.Int64
	LateDropped atomic.Int64 // records behind the watermark by more than the allowed lateness
	// StepsCut counts the steps of the operator's task (when it heads one)
	// that ran out of time part-way through an input frame: the rest of
	// the frame waited for the next step.
	StepsCut atomic.Int64
	// BusyNs, BackpressuredNs and IdleNs split the time of the subtask's
	// task (every operator of a chain has its task's): from each of its
	// steps to the next, it was busy if the step made progress,
	// backpressured if it stopped for lack of room in an output ring,
	// idle otherwise. They add up to the time from its first step to its
	// last. The time is the worker's clock at each round, read anyway: one
	// atomic add per step and operator.
	BusyNs, BackpressuredNs, IdleNs atomic.Int64
	// Watermark is the event time (epoch milliseconds) the subtask's task
	// last passed down its chain; 0 before the first, and on streams
	// without event time.
	Watermark atomic.Int64
}

// Counting returns next behind a link that counts every batch pushed into
// it as records out of from and, if into is not nil, records into into:
// two atomic adds per batch, on counters only this task's thread writes.
func Counting[T any](next Input[T], from, into *Metrics) Input[T] {
	return &counting[T]{next: next, from: from, into: into}
}

type counting[T any] struct {
	next       Input[T]
	from, into *Metrics
}

func (c *counting[T]) Push(recs []T, ts []int64) {
	n := int64(len(recs))
	c.from.RecordsOut.Add(n)
	if c.into != nil {
		c.into.RecordsIn.Add(n)
	}
	c.next.Push(recs, ts)
}

// Error is a failure of one operator instance: a panic or an error of user
// code, or a failure of the runtime on its behalf. Every error a task
// returns is one.
type Error struct {
	Operator string
	Subtask  int
	Err      error
	Stack    []byte // the panic's stack, if it was a panic
}

// Error is one line: the operator, the subtask and the cause. A panic's
// stack is in Stack, not in the message.
func (e *Error) Error() string {
	return fmt.Sprintf("ringflow: operator %q subtask %d: %v", e.Operator, e.Subtask, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrPanic is wrapped by the Error for a panic of user code.
var ErrPanic = errors.New("panic")

type panicValue struct{ v any }

func (p panicValue) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, p.v) }
func (p panicValue) Unwrap() []error {
	if err, ok := p.v.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}

// Guard turns a panic into an *Error naming the operator instance, and
// re-panics with it; an *Error panicked by an operator further down the
// chain passes through unchanged. Operators defer it around user code:
//
//	defer operator.Guard(ctx)
func Guard(ctx *Context) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(*Error); ok {
		panic(e)
	}
	panic(&Error{Operator: ctx.Operator, Subtask: ctx.Subtask, Err: panicValue{r}, Stack: debug.Stack()})
}

// Fail stops the job with err, attributed to the operator instance.
func Fail(ctx *Context, err error) {
	panic(&Error{Operator: ctx.Operator, Subtask: ctx.Subtask, Err: err})
}
