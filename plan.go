package ringflow

import (
	"errors"
	"fmt"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/ring"
)

type ringReader = *ring.Reader

// chain is a run of nodes fused into one task per subtask: each node after
// the first is fed, without a ring, by the one before.
type chain struct {
	nodes []*node
}

func (c *chain) head() *node { return c.nodes[0] }
func (c *chain) tail() *node { return c.nodes[len(c.nodes)-1] }

// validate checks the graph and reports every problem it finds, each naming
// its operator.
func (j *Job) validate() error {
	errs := append([]error(nil), j.errs...)
	sinks := 0
	for _, n := range j.nodes {
		if n.parallelism < 1 {
			errs = append(errs, newGraphError(ErrParallelism, n.name,
				"operator %q: parallelism %d: must be at least 1 (without the option it is Config.Parallelism)",
				n.name, n.parallelism))
		}
		if n.keyed && n.parallelism > j.cfg.MaxParallelism {
			errs = append(errs, newGraphError(ErrParallelism, n.name, "operator %q: parallelism %d exceeds the max parallelism %d",
				n.name, n.parallelism, j.cfg.MaxParallelism))
		}
		if n.out == nil {
			sinks++
		} else if len(n.sideEdges(nil)) == 0 {
			errs = append(errs, newGraphError(ErrUnusedOutput, n.name, "operator %q: its output goes nowhere (add a Sink)", n.name))
		}
	}
	if len(j.nodes) > 0 && sinks == 0 {
		errs = append(errs, newGraphError(ErrNoSink, "", "the job has no sink"))
	}
	if len(j.nodes) == 0 {
		errs = append(errs, newGraphError(ErrNoSink, "", "the job has no operators"))
	}
	errs = append(errs, j.validateLoops()...)
	if cyc := j.cycle(); cyc != "" {
		errs = append(errs, newGraphError(ErrCycle, cyc, "the graph has a cycle through operator %q", cyc))
	} else {
		// Records cross a ring at the head of every chain.
		for _, c := range j.chains() {
			for _, e := range c.head().inputs {
				if err := e.codecError(); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for i, err := range errs {
		if !errors.Is(err, ErrConfig) && !errors.Is(err, ErrGraph) {
			errs[i] = fmt.Errorf("%w: %w", ErrGraph, err)
		}
	}
	return errors.Join(errs...)
}

// cycle returns the name of an operator on a cycle, or "". Graphs built
// with this package's functions cannot have one; the check keeps it so.
func (j *Job) cycle() string {
	state := make([]int, len(j.nodes)) // 0 new, 1 on the path, 2 done
	var visit func(n *node) string
	visit = func(n *node) string {
		switch state[n.id] {
		case 1:
			return n.name
		case 2:
			return ""
		}
		state[n.id] = 1
		for _, e := range n.outputs {
			if c := visit(e.to); c != "" {
				return c
			}
		}
		state[n.id] = 2
		return ""
	}
	for _, n := range j.nodes {
		if c := visit(n); c != "" {
			return c
		}
	}
	return ""
}

// chains fuses nodes along forward edges of equal parallelism, where the
// upstream node feeds only that edge and the downstream one has no other
// input.
func (j *Job) chains() []*chain {
	var out []*chain
	of := make(map[*node]*chain)
	for _, n := range j.nodes { // creation order is a topological order
		if len(n.inputs) == 1 {
			if e := n.inputs[0]; e.chained() {
				up := e.from
				c := of[up]
				c.nodes = append(c.nodes, n)
				of[n] = c
				continue
			}
		}
		c := &chain{nodes: []*node{n}}
		of[n] = c
		out = append(out, c)
	}
	return out
}

// chained reports whether e joins two operators of one chain: a forward
// edge of equal parallelism, the only output of its upstream node and the
// only input of its downstream one, carrying the main output. (So an
// operator whose side outputs the job reads ends its chain: its gate
// writes every output.)
func (e *edge) chained() bool {
	return e.part == operator.Forward && e.from.parallelism == e.to.parallelism && len(e.from.outputs) == 1 &&
		len(e.to.inputs) == 1 && e.to.ports == 1 && e.side == nil && !e.to.loopHead
}

// targets lists the downstream subtasks that upstream subtask u reaches
// over e.
func (e *edge) targets(u int) []int {
	if e.part == operator.Forward {
		return []int{u}
	}
	t := make([]int, e.to.parallelism)
	for i := range t {
		t[i] = i
	}
	return t
}

// codecError reports an edge whose records cannot cross a ring.
func (e *edge) codecError() error {
	if so := e.side; so != nil {
		if so.ti.err != nil {
			return newGraphError(ErrNoCodec, e.from.name, "operator %q: its side output %q of type %s cannot cross to %q: %v",
				e.from.name, so.name, so.ti, e.to.name, so.ti.err)
		}
		return nil
	}
	if e.from.out.err != nil {
		return newGraphError(ErrNoCodec, e.from.name, "operator %q: its output of type %s cannot cross to %q: %v (use WithCodec)",
			e.from.name, e.from.out, e.to.name, e.from.out.err)
	}
	return nil
}

// keyGroupsOf returns the key groups subtask i of n owns, for keyed nodes.
func (j *Job) keyGroupsOf(n *node, i int) (keygroups.Range, error) {
	if !n.keyed {
		return keygroups.Range{}, nil
	}
	if own, ok := j.clusterKeyGroups(); ok {
		return keygroups.RangeWithin(own, i, n.parallelism)
	}
	return keygroups.RangeOf(i, n.parallelism, j.cfg.MaxParallelism)
}
