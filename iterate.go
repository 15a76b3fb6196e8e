package ringflow

import (
	"strconv"

	"github.com/ringflow/ringflow/internal/operator"
)

// loop is one iteration of a job: its head and its tail nodes, and what
// gathers the timers of its body for its heads.
type loop struct {
	name       string
	head, tail *node
	probe      *operator.LoopProbe
}

// Iterate adds an iteration: a loop whose body feeds records back to its
// own start. body is called once, with the stream that enters the loop
// each round (feedback: the records of s and every record fed back); it
// builds the loop's operators on it and returns what goes round again
// (back) and what leaves the loop (out), which Iterate returns. Both must
// be built from streams of the same job; a record may go to both, or to
// neither.
//
//	done := ringflow.Iterate(numbers, "collatz", func(in ringflow.Stream[step]) (ringflow.Stream[step], ringflow.Stream[step]) {
//		next := ringflow.Map(in, "step", collatzStep)
//		return ringflow.Filter(next, "again", notOne), ringflow.Filter(next, "reached 1", isOne)
//	})
//
// The body may hold keyed state and timers, use every operator, and hold
// iterations of its own (nested loops); its checkpoints hold the records
// in transit on the back edge (see [Iterations] in the package doc). The
// loop's head runs at the parallelism opts give (or Config.Parallelism),
// and so does the operator that feeds records back, named name+".back".
//
// A job with an iteration needs exactly-once checkpoints
// (Config.Checkpoint.Interval > 0): its end is detected by them. Once its
// sources have ended, a bounded job ends when its loops are quiescent: no
// record is going round any loop, and no operator of a body (one on a
// path from its loop's head to the records it sends back) holds a timer
// pending. Event-time timers all fire at the end of input, whose
// watermark is the last, also those registered after it, which fire once
// the batch that registered them is processed; what they emit goes round
// before the job ends. Processing-time timers of a body are waited for
// until they fire, unlike those elsewhere: what one emits may go round
// again, and would otherwise be lost. A body that always holds a
// processing-time timer (one that registers the next from OnTimer) keeps
// its job running, as an unbounded source does.
func Iterate[T, U any](s Stream[T], name string, body func(feedback Stream[T]) (back Stream[T], out Stream[U]), opts ...Option) Stream[U] {
	j := s.job
	head, o := j.addNode(name, opts, s.srcs)
	head.loopHead = true
	feedback := newStream[T](j, head, o, s.checkTimed(name))
	if body == nil {
		j.graphErrorf(ErrBadArgument, name, "iteration %q: body is nil", name)
		return Stream[U]{job: j}
	}
	back, out := body(feedback)
	if back.job == nil || len(back.srcs) == 0 {
		j.graphErrorf(ErrBadArgument, name, "iteration %q: the body returned no stream to feed back", name)
		return out
	}
	if out.job == nil || len(out.srcs) == 0 {
		j.graphErrorf(ErrBadArgument, name, "iteration %q: the body returned no output stream", name)
	}
	if !sameJob("iteration "+name, feedback.untyped(), back.untyped()) {
		return out
	}
	if out.job != nil && !sameJob("iteration "+name, feedback.untyped(), out.untyped()) {
		return Stream[U]{job: j}
	}
	tail, _ := j.addNodeWith(name+".back", o, back.srcs)
	back.checkTimed(tail.name)
	var cur *operator.Loop[T] // the back edge of the attempt being built
	ti := head.out
	probe := operator.NewLoopProbe(head.parallelism)
	head.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		if ctx.Subtask == 0 {
			// NB: the head's subtasks are built before the tail's: a job
			// builds its nodes in the order they were added.
			cur = operator.NewLoop(ti.codec.(operator.Codec[T]), head.parallelism, tail.parallelism, probe)
		}
		h := cur.Head(ctx, down.(operator.Input[T]))
		return []any{operator.Input[T](h)}, h
	}
	tail.build = func(ctx *operator.Context, _ any) ([]any, operator.Operator) {
		t := cur.Tail(ctx.Subtask)
		return []any{operator.Input[T](t)}, t
	}
	j.loops = append(j.loops, loop{name: name, head: head, tail: tail, probe: probe})
	return out
}

// loopBodies returns, by node, the loops whose body the node is in: it is
// on a path from the loop's head to its tail that does not pass the head
// again. Such a path may go round a loop nested in the body, so back edges
// count as edges.
func (j *Job) loopBodies() map[*node][]operator.LoopBody {
	if len(j.loops) == 0 {
		return nil
	}
	headOf, tailOf := map[*node]*node{}, map[*node]*node{}
	for _, l := range j.loops {
		headOf[l.tail], tailOf[l.head] = l.head, l.tail
	}
	bodies := map[*node][]operator.LoopBody{}
	for _, l := range j.loops {
		down := reach(l.head, l.tail, func(n *node, visit func(*node)) {
			for _, e := range n.outputs {
				visit(e.to)
			}
			if h := headOf[n]; h != nil {
				visit(h)
			}
		})
		up := reach(l.tail, l.head, func(n *node, visit func(*node)) {
			for _, e := range n.inputs {
				visit(e.from)
			}
			if t := tailOf[n]; t != nil {
				visit(t)
			}
		})
		for n := range down {
			if up[n] && n != l.head && n != l.tail {
				bodies[n] = append(bodies[n], l.probe)
			}
		}
	}
	return bodies
}

// reach returns the nodes reachable from n along next, n included, not
// going on from stop.
func reach(n, stop *node, next func(n *node, visit func(*node))) map[*node]bool {
	seen := map[*node]bool{n: true}
	stack := []*node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == stop {
			continue
		}
		next(n, func(m *node) {
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		})
	}
	return seen
}

// validateLoops reports what makes the job's iterations unable to run.
func (j *Job) validateLoops() []error {
	var errs []error
	for _, l := range j.loops {
		if err := l.head.out.err; err != nil {
			errs = append(errs, newGraphError(ErrNoCodec, l.name,
				"iteration %q: its records of type %s cannot be logged in its checkpoints: %v (use WithCodec)",
				l.name, l.head.out, err))
		}
		if !j.cfg.Checkpoint.enabled() {
			errs = append(errs, &ConfigError{Field: "Checkpoint.Interval", Problem: "iteration " + strconv.Quote(l.name) +
				" needs checkpoints: the end of its input is found by them, and its back edge is logged in them; set an interval"})
		}
		if j.cfg.Checkpoint.Mode == AtLeastOnce {
			errs = append(errs, &ConfigError{Field: "Checkpoint.Mode", Problem: "iteration " + strconv.Quote(l.name) +
				" needs exactly-once checkpoints: its end is found by aligned barriers"})
		}
	}
	return errs
}
