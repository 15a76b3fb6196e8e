package operator

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/ringflow/ringflow/ring"
)

// OutputTag names a side output of records of type T: a second output of
// an operator, with a type of its own, that a job reads as a stream of its
// own (ringflow.SideOutput). A ProcessFunc emits to one with Emit; a
// window sends its late records to one (ringflow.LateOutput).
type OutputTag[T any] struct{ name string }

// NewOutputTag returns the tag of the side output named name. Names are
// unique per operator: two tags of one name are one side output, and must
// have one type.
func NewOutputTag[T any](name string) OutputTag[T] { return OutputTag[T]{name: name} }

// Name returns the side output's name.
func (t OutputTag[T]) Name() string { return t.name }

// Type returns the type of the side output's records.
func (t OutputTag[T]) Type() reflect.Type { return reflect.TypeFor[T]() }

// ErrSideOutputName is wrapped by the error for a side output name that is
// empty or holds NUL.
var ErrSideOutputName = errors.New("bad side output name")

// CheckSideOutputName reports what is wrong with a side output's name, if
// anything.
func CheckSideOutputName(name string) error {
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w %q: must be non-empty, without NUL", ErrSideOutputName, name)
	}
	return nil
}

// Emit emits v to the side output t, from a ProcessFunc's Process or
// OnTimer (ctx is the KeyedContext they are given), with the timestamp of
// the record or timer at hand. Records emitted to a side output the job
// does not read are dropped. A tag whose type is not that of the side
// output of its name the job reads fails the job.
func (t OutputTag[T]) Emit(ctx Outputs, v T) {
	out, ts := ctx.sideOutput(t.name)
	if out == nil {
		return
	}
	c, ok := out.(*sideCollector[T])
	if !ok {
		panic(fmt.Errorf("side output %q: emitted a %s, but the job reads it as %s", t.name,
			reflect.TypeFor[T](), out.recordType()))
	}
	c.EmitAt(v, ts)
}

// Outputs is where user code finds its operator's side outputs; a
// *KeyedContext is one (see OutputTag.Emit).
type Outputs interface {
	// sideOutput returns the side output of that name, or nil if the job
	// does not read it, and the timestamp records emitted now get.
	sideOutput(name string) (SideOutput, int64)
}

// SideOutput is one side output of an operator instance, as the runtime
// hands it to the operator (Context.SideOutputs): a collector of records
// of the side output's type, which the operator flushes into the side
// output's gate after every batch.
type SideOutput interface {
	// reset empties the collector; timed says whether its records carry
	// event time.
	reset(timed bool)
	// flush pushes what was collected downstream.
	flush()
	recordType() reflect.Type
}

// NewSideOutput returns a side output of records of type T that feeds
// next.
func NewSideOutput[T any](next Input[T]) SideOutput { return &sideCollector[T]{next: next} }

type sideCollector[T any] struct {
	Collector[T]
	next Input[T]
}

func (c *sideCollector[T]) flush()                   { c.Collector.flush(c.next) }
func (c *sideCollector[T]) recordType() reflect.Type { return reflect.TypeFor[T]() }

// FuncInput returns an Input that hands every record to f.
func FuncInput[T any](f func(T)) Input[T] { return funcInput[T](f) }

type funcInput[T any] func(T)

func (f funcInput[T]) Push(recs []T, _ []int64) {
	for i := range recs {
		f(recs[i])
	}
}

// sideOutputs are the side outputs of one operator instance, by name.
type sideOutputs struct {
	names []string
	outs  []SideOutput
}

func newSideOutputs(ctx *Context) sideOutputs {
	var s sideOutputs
	for name, out := range ctx.SideOutputs {
		out.reset(ctx.Timed)
		s.names = append(s.names, name)
		s.outs = append(s.outs, out)
	}
	return s
}

func (s *sideOutputs) find(name string) SideOutput {
	for i, n := range s.names {
		if n == name {
			return s.outs[i]
		}
	}
	return nil
}

func (s *sideOutputs) flush() {
	for _, o := range s.outs {
		o.flush()
	}
}

// GatePart is one gate of an operator with several outputs, as Gates
// joins it: a Gate of any record type.
type GatePart interface {
	Operator
	OutputGate
	Ports() []Port
	edgeCount() int
}

// Gates joins the gates of an operator's outputs — its main output and its
// side outputs, each of its own type — into one that a task drives as it
// drives a single gate: control frames (watermarks, barriers, END) go out
// through every one. The edges of the parts are numbered one after
// another, the first part's first, in output channel state (OutputKey).
type Gates struct {
	Base
	parts []GatePart
}

// NewGates joins parts.
func NewGates(parts ...GatePart) *Gates { return &Gates{parts: parts} }

func (g *Gates) edgeCount() int {
	n := 0
	for _, p := range g.parts {
		n += p.edgeCount()
	}
	return n
}

// Open implements Operator.
func (g *Gates) Open(ctx *Context) error {
	g.Ctx = ctx
	for _, p := range g.parts {
		if err := p.Open(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Watermark implements Operator.
func (g *Gates) Watermark(wm int64) {
	for _, p := range g.parts {
		p.Watermark(wm)
	}
}

// End implements Operator.
func (g *Gates) End() {
	for _, p := range g.parts {
		p.End()
	}
}

// Close implements Operator.
func (g *Gates) Close() error {
	var errs []error
	for _, p := range g.parts {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Idle implements OutputGate.
func (g *Gates) Idle(wm int64) {
	for _, p := range g.parts {
		p.Idle(wm)
	}
}

// Barrier implements OutputGate.
func (g *Gates) Barrier(b ring.Barrier) {
	for _, p := range g.parts {
		p.Barrier(b)
	}
}

// BarrierFirst implements OutputGate.
func (g *Gates) BarrierFirst(b ring.Barrier) {
	for _, p := range g.parts {
		p.BarrierFirst(b)
	}
}

// SnapshotOutputs implements OutputGate.
func (g *Gates) SnapshotOutputs() map[int][]byte {
	var out map[int][]byte
	base := 0
	for _, p := range g.parts {
		for k, v := range p.SnapshotOutputs() {
			if out == nil {
				out = map[int][]byte{}
			}
			out[OutputKey(base+(k>>16), k&0xffff)] = v
		}
		base += p.edgeCount()
	}
	return out
}

// Replay implements OutputGate.
func (g *Gates) Replay(edge, target int, state []byte) error {
	for _, p := range g.parts {
		if n := p.edgeCount(); edge >= n {
			edge -= n
			continue
		}
		return p.Replay(edge, target, state)
	}
	return fmt.Errorf("output state for edge %d past the gates' %d edges", edge, g.edgeCount())
}

// Ports returns the rings of every part.
func (g *Gates) Ports() []Port {
	var ports []Port
	for _, p := range g.parts {
		ports = append(ports, p.Ports()...)
	}
	return ports
}
