package ringflow

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ringflow/ringflow/internal/operator"
)

// OutputTag names a side output of records of type T: a second output of
// an operator, of a type of its own, that SideOutput turns into a stream.
// A process function emits to it with Emit:
//
//	suspicious := ringflow.NewOutputTag[Payment]("suspicious")
//	...
//	func (f *fraud) Process(ctx *ringflow.KeyedContext[string], p Payment, out *ringflow.Collector[Alert]) error {
//		if p.Amount > f.limit {
//			suspicious.Emit(ctx, p)
//		}
//		...
//	}
//	...
//	alerts := ringflow.Process(byCard, "fraud", newFraud)
//	held := ringflow.SideOutput(alerts, suspicious) // a Stream[Payment]
//
// and a window sends its late records to one (LateOutput). Its methods:
//
//	Emit(ctx Outputs, v T) // emits v to the side output, with the timestamp of the record or timer at hand
//	Name() string          // the side output's name
//	Type() reflect.Type    // the type of its records, T
//
// Emit is called from a ProcessFunc's Process or OnTimer, with the
// *KeyedContext they are given. Records emitted to a side output the job
// does not read are dropped; emitting a T to a side output the job reads
// as another type fails the task.
type OutputTag[T any] = operator.OutputTag[T]

// Outputs is where a process function finds its side outputs: the
// *KeyedContext it is given is one, and OutputTag.Emit takes it. Only the
// runtime implements it.
type Outputs = operator.Outputs

// NewOutputTag returns the tag of the side output named name (non-empty,
// without NUL). An operator's side outputs are told apart by name: two
// tags of one name are one side output, and must have one type.
func NewOutputTag[T any](name string) OutputTag[T] { return operator.NewOutputTag[T](name) }

// SideOutput returns the side output tag of the operator whose output s is
// (of each of them, for a Union), as a stream of its own: records a
// process function emits to tag (OutputTag.Emit), or a window's late
// records (LateOutput). The stream carries event time if s does, each
// record with the timestamp it was emitted with. Records emitted to a side
// output the job does not read are dropped.
//
// Only Process and Window (given LateOutput) have side outputs; asking
// another operator for one, or asking for one under a name with two
// types, fails Run with an error wrapping ErrGraph.
func SideOutput[X, T any](s Stream[T], tag OutputTag[X]) Stream[X] {
	out := Stream[X]{job: s.job}
	if err := operator.CheckSideOutputName(tag.Name()); err != nil {
		s.job.errorf("SideOutput: %v", err)
		return out
	}
	for _, src := range s.srcs {
		n := src.node
		if src.side != nil {
			s.job.errorf("SideOutput %q: the stream is the side output %q of operator %q, which has no side outputs of its own",
				tag.Name(), src.side.name, n.name)
			continue
		}
		so, err := n.sides.get(n, tag.Name(), reflect.TypeFor[X](), func() *sideOut {
			return &sideOut{name: tag.Name(), typ: reflect.TypeFor[X](), ti: typeOf[X](s.job, n, nil),
				newOut: func(down any) operator.SideOutput {
					return operator.NewSideOutput(down.(operator.Input[X]))
				}}
		})
		if err != nil {
			s.job.errorf("SideOutput %q: %v", tag.Name(), err)
			continue
		}
		out.srcs = append(out.srcs, streamSrc{node: n, side: so})
	}
	return out
}

// LateOutput sends a window operator's records that arrive past their
// windows' allowed lateness to the side output tag, which SideOutput of
// the window's stream gives; T must be the window's input type. A record
// goes there once, when every window it belongs to has dropped it; it is
// counted in Metrics.LateDropped either way. Only Window takes it.
func LateOutput[T any](tag OutputTag[T]) WindowOption {
	return windowOnly(func(o *nodeOptions) { o.late = tag })
}

// lateCallback names the side output through which a window hands its late
// records to a LateRecords function; no tag can have the name.
const lateCallback = "\x00late-records"

// sideOutputs are the side outputs of an operator that may have some.
type sideOutputs struct {
	// fixed are the side outputs the operator has, by name, with their
	// record types (a window's late records); nil: it may emit to any (a
	// process function).
	fixed map[string]reflect.Type
	// list are the side outputs the job asked for, in order.
	list []*sideOut
}

// sideOut is one side output of an operator that the job asked for.
type sideOut struct {
	name string
	typ  reflect.Type
	ti   *typeInfo
	// newOut makes the side output of one subtask, feeding down (an
	// operator.Input of its type).
	newOut func(down any) operator.SideOutput
}

// get returns n's side output name of records of type typ, made by mk if
// the job did not ask for it before.
func (ss *sideOutputs) get(n *node, name string, typ reflect.Type, mk func() *sideOut) (*sideOut, error) {
	if ss == nil {
		return nil, fmt.Errorf("operator %q has no side outputs (Process has, and Window given LateOutput)", n.name)
	}
	if ss.fixed != nil {
		want, ok := ss.fixed[name]
		if !ok {
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range ss.fixed {
					if !yield(strconv.Quote(n)) {
						return
					}
				}
			})
			return nil, fmt.Errorf("operator %q has no side output of that name (it has %s)", n.name, strings.Join(names, ", "))
		}
		if want != typ {
			return nil, fmt.Errorf("operator %q: the side output carries %s, not %s", n.name, want, typ)
		}
	}
	for _, so := range ss.list {
		if so.name == name {
			if so.typ != typ {
				return nil, fmt.Errorf("operator %q: the side output is read as %s already, not %s", n.name, so.typ, typ)
			}
			return so, nil
		}
	}
	so := mk()
	ss.list = append(ss.list, so)
	return so, nil
}

// typ returns the type information of the records e carries.
func (e *edge) typ() *typeInfo {
	if e.side != nil {
		return e.side.ti
	}
	return e.from.out
}

// sideEdges returns n's output edges that carry side output so.
func (n *node) sideEdges(so *sideOut) []*edge {
	var out []*edge
	for _, e := range n.outputs {
		if e.side == so {
			out = append(out, e)
		}
	}
	return out
}
