package ringflow

// Graph describes a job as built: its operators, the edges between them,
// and how operators are chained into tasks (see Job.Graph).
type Graph struct {
	// Operators are in the order they were added, which is a topological
	// order: an operator comes after every operator that feeds it, but
	// for the back edges of iterations.
	Operators []GraphOperator
	Edges     []GraphEdge
}

// GraphOperator is one operator of a job's graph.
type GraphOperator struct {
	Name        string
	Parallelism int
	// Kind is "source", "sink" (no output) or "operator".
	Kind string
	// Keyed says whether the operator holds keyed state.
	Keyed bool
	// Task names the task that runs the operator by the head operator of
	// its chain: operators chained together share one task per subtask,
	// and records pass between them by function call, not through a ring.
	Task string
}

// GraphEdge is one edge of a job's graph.
type GraphEdge struct {
	From, To string
	// Partitioning is how records are spread over the downstream subtasks:
	// "forward", "rebalance" or "hash".
	Partitioning string
	// Port is the downstream operator's input the edge feeds (0, or 1 for
	// a join's second input).
	Port int
	// Chained says the edge stays inside a task: it has no rings.
	Chained bool
	// Side names the side output of From the edge carries (see
	// SideOutput); "" for its main output.
	Side string
	// Back says the edge is an iteration's back edge (Iterate), from the
	// operator that feeds records back to the loop's head; its
	// Partitioning is "back".
	Back bool
}

// Graph returns the job's graph. It is safe to call at any time, from any
// goroutine, once the job is built. A distributed job's graph is the one
// cut for its process (see Cluster).
func (j *Job) Graph() Graph {
	if j.cfg.Cluster != nil {
		j.cutGraph() // NB: the graph changes once, before anyone reads it
	}
	return j.graphOf()
}

// graphOf returns the graph as it is now.
func (j *Job) graphOf() Graph {
	var g Graph
	task := map[*node]string{}
	for _, c := range j.chains() {
		for _, n := range c.nodes {
			task[n] = c.head().name
		}
	}
	for _, n := range j.nodes {
		kind := "operator"
		switch {
		case len(n.inputs) == 0:
			kind = "source"
		case n.out == nil:
			kind = "sink"
		}
		g.Operators = append(g.Operators, GraphOperator{Name: n.name, Parallelism: n.parallelism, Kind: kind,
			Keyed: n.keyed, Task: task[n]})
		for _, e := range n.inputs {
			ge := GraphEdge{From: e.from.name, To: n.name, Partitioning: e.part.String(), Port: e.port, Chained: e.chained()}
			if e.side != nil {
				ge.Side = e.side.name
			}
			g.Edges = append(g.Edges, ge)
		}
	}
	for _, l := range j.loops {
		g.Edges = append(g.Edges, GraphEdge{From: l.tail.name, To: l.head.name, Partitioning: "back", Back: true})
	}
	return g
}
