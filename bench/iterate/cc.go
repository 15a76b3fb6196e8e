// Package iterate is dfbench's iteration workload: connected components of
// a graph by label propagation in a ringflow loop (ringflow.Iterate).
//
// Every edge enters the loop both ways. A keyed step per vertex keeps the
// vertex's neighbours and the lowest label it has seen (first its own id);
// when a label offered to it is lower, it takes it, sends it out and
// offers it to every neighbour, through the loop's back edge. The loop is
// quiescent when no offer lowers a label any more: each vertex then holds
// the lowest vertex id of its component, and the job ends.
package iterate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
)

// Edge is an undirected edge between two vertices.
type Edge struct{ U, V uint64 }

// RandomGraph returns m edges between random vertices below n, drawn from
// seed: the same seed gives the same graph.
func RandomGraph(n, m uint64, seed uint64) []Edge {
	rnd := rand.New(rand.NewPCG(seed, 0x17e7a7e))
	edges := make([]Edge, m)
	for i := range edges {
		edges[i] = Edge{rnd.Uint64N(n), rnd.Uint64N(n)}
	}
	return edges
}

// ReadEdges reads edges as lines of two vertex ids ("u v"), skipping blank
// lines; a line that is not two unsigned integers is an error that names
// the line.
func ReadEdges(r io.Reader, name string) ([]Edge, error) {
	var edges []Edge
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: %q: want two vertex ids, \"u v\"", name, line, text)
		}
		u, err1 := strconv.ParseUint(f[0], 10, 64)
		v, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: %q: vertex ids must be unsigned integers", name, line, text)
		}
		edges = append(edges, Edge{u, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return edges, nil
}

// Config is a run of the workload.
type Config struct {
	Edges       []Edge
	Parallelism int
	Workers     int
	Checkpoint  ringflow.CheckpointConfig
	// FailAfter, if positive, fails the loop's step once, after this many
	// messages, and the job recovers in place.
	FailAfter uint64
	Logger    *slog.Logger
}

// Result is what a run found and how it went.
type Result struct {
	// Labels maps every vertex to its component: the lowest vertex id in
	// it.
	Labels   map[uint64]uint64
	Duration time.Duration
	// Messages is the number of messages the loop's step handled: the
	// edges, both ways, and every label offer.
	Messages    uint64
	Checkpoints int
	// FinalTriggers counts final checkpoints triggered: one more than
	// those that found the loop still busy.
	FinalTriggers int
	// LoopRecords is the number of offers in transit on the back edge that
	// the checkpoints logged, over all of them.
	LoopRecords int
	Restarts    int
}

// msg is a message of the loop: an edge from V to W (entering), a label W
// offered to V (fed back), or V's label lowered to W (leaving).
type msg struct {
	Kind uint8
	V, W uint64
}

const (
	kindEdge uint8 = iota
	kindOffer
	kindLabel
)

// step is the keyed step of label propagation.
type step struct {
	label *ringflow.ValueState[uint64, uint64]
	adj   *ringflow.ListState[uint64, uint64]
}

func (s *step) Open(scope *ringflow.KeyedScope[uint64]) error {
	s.label = ringflow.NewValueState[uint64, uint64](scope, "label")
	s.adj = ringflow.NewListState[uint64, uint64](scope, "adj")
	return nil
}

func (s *step) Process(_ *ringflow.KeyedContext[uint64], m msg, out *ringflow.Collector[msg]) error {
	l, ok := s.label.Value()
	if !ok {
		l = m.V
		s.label.Update(l)
		out.Emit(msg{Kind: kindLabel, V: m.V, W: l})
	}
	switch m.Kind {
	case kindEdge:
		s.adj.Add(m.W)
		out.Emit(msg{Kind: kindOffer, V: m.W, W: l})
	case kindOffer:
		if m.W >= l {
			return nil
		}
		s.label.Update(m.W)
		out.Emit(msg{Kind: kindLabel, V: m.V, W: m.W})
		for _, w := range s.adj.Get() {
			out.Emit(msg{Kind: kindOffer, V: w, W: m.W})
		}
	}
	return nil
}

func (s *step) OnTimer(*ringflow.KeyedContext[uint64], int64, ringflow.TimeDomain, *ringflow.Collector[msg]) error {
	return nil
}

// Run finds the connected components of c.Edges.
func Run(ctx context.Context, c Config) (Result, error) {
	msgs := make([]msg, 0, 2*len(c.Edges))
	for _, e := range c.Edges {
		msgs = append(msgs, msg{Kind: kindEdge, V: e.U, W: e.V}, msg{Kind: kindEdge, V: e.V, W: e.U})
	}
	var finals atomic.Int64
	cfg := ringflow.Config{Parallelism: c.Parallelism, Workers: c.Workers, Checkpoint: c.Checkpoint, Logger: c.Logger,
		Events: &ringflow.EventListener{CheckpointTriggered: func(info ringflow.CheckpointTriggeredInfo) {
			if info.Final {
				finals.Add(1)
			}
		}}}
	if c.FailAfter > 0 {
		cfg.Restart = ringflow.RestartStrategy{Attempts: 1}
	}
	job := ringflow.NewJob(cfg)
	src := ringflow.Source(job, "edges", ringflow.FromSlice(msgs))
	var handled, failed atomic.Uint64
	labels := ringflow.Iterate(src, "propagate", func(in ringflow.Stream[msg]) (ringflow.Stream[msg], ringflow.Stream[msg]) {
		in = ringflow.Map(in, "count", func(m msg) msg {
			if n := handled.Add(1); c.FailAfter > 0 && n >= c.FailAfter && failed.CompareAndSwap(0, 1) {
				panic(fmt.Sprintf("failure injected after %d messages (--fail-after)", n))
			}
			return m
		})
		steps := ringflow.Process(ringflow.KeyBy(in, func(m msg) uint64 { return m.V }), "step",
			func() ringflow.ProcessFunc[uint64, msg, msg] { return &step{} })
		return ringflow.Filter(steps, "offers", func(m msg) bool { return m.Kind == kindOffer }),
			ringflow.Filter(steps, "labels", func(m msg) bool { return m.Kind == kindLabel })
	})
	// NB: a label sent before a failure and again after it is the same or
	// higher than the last: the lowest one seen is right either way.
	var mu sync.Mutex
	res := Result{Labels: map[uint64]uint64{}}
	ringflow.Sink(labels, "lowest", func(_ context.Context, m msg) error {
		mu.Lock()
		defer mu.Unlock()
		if l, ok := res.Labels[m.V]; !ok || m.W < l {
			res.Labels[m.V] = m.W
		}
		return nil
	})
	start := time.Now()
	if err := job.Run(ctx); err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	res.Messages = handled.Load()
	res.Restarts = job.Restarts()
	res.FinalTriggers = int(finals.Load())
	for _, cp := range job.Checkpoints() {
		res.Checkpoints++
		for _, st := range cp.Subtasks {
			res.LoopRecords += st.LoopRecords
		}
	}
	return res, nil
}

// UnionFind returns every vertex's component as a union-find finds it:
// the lowest vertex id in it.
func UnionFind(edges []Edge) map[uint64]uint64 {
	parent := map[uint64]uint64{}
	find := func(x uint64) uint64 {
		if _, ok := parent[x]; !ok {
			parent[x] = x
		}
		r := x
		for parent[r] != r {
			r = parent[r]
		}
		for parent[x] != r { // path compression
			parent[x], x = r, parent[x]
		}
		return r
	}
	for _, e := range edges {
		a, b := find(e.U), find(e.V)
		if a > b {
			a, b = b, a
		}
		parent[b] = a
	}
	out := make(map[uint64]uint64, len(parent))
	for v := range parent {
		out[v] = find(v)
	}
	return out
}
