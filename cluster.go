package ringflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
)

// Cluster makes a job one of several processes of the same program that
// run it together, joined by Kafka (see the package doc's "Distributed
// jobs"). Every process builds the same job and sets the same Cluster but
// for Process. The first of Run and Job.Graph cuts the job's graph for the
// process, once: build the whole job before either.
type Cluster struct {
	// JobID names the distributed job: its repartition topics and its
	// transactional ids start with it. Required; the same in every
	// process, and kept across restarts and rescaling.
	JobID string
	// Process is this process's number, in [0, Processes). Membership is
	// static: process i owns a fixed set of partitions, and a restarted
	// process i takes back exactly those.
	Process int
	// Processes is how many processes run the job. Required.
	Processes int
	// Partitions is the number of partitions of each repartition topic;
	// default 32, or MaxParallelism if lower. Each carries a fixed range
	// of key groups, so it is the most processes that can share a keyed
	// operator's work, and it cannot change once the topics exist.
	Partitions int
	// Exchange carries records between the processes: kafka.Exchange.
	// Required.
	Exchange Exchange
	// RestoreFrom rescales the job: it starts this process from the
	// savepoints of every process of the job's previous layout, taken by
	// Job.StopWithSavepoint on each of them (each entry is a savepoint, a
	// directory of savepoints, whose newest counts, or a process's state
	// directory, whose latest checkpoint counts, as Config.RestoreFrom
	// takes), in any order. Each records which process of how many took
	// it. The process takes the keyed state of the key groups it now owns,
	// the repartition partitions it now owns with where their old owners
	// stood, and its share of the job's input with its offsets; see
	// "Rescaling" in the package doc. Every process of the new layout is
	// given the same list. As Config.RestoreFrom, it is used only while
	// the process's state directory holds no checkpoint; with one taken
	// since the rescaled start, the process resumes from it. Every
	// process of the old layout must have stopped before any of the new
	// one starts.
	RestoreFrom []string
}

// DefaultClusterPartitions is Cluster.Partitions' default: enough to
// share a keyed operator among a few dozen processes, few enough that
// each process's transaction per checkpoint touches a handful of
// partitions of each topic.
const DefaultClusterPartitions = 32

func (c *Cluster) partitions(maxParallelism int) int {
	if c.Partitions > 0 {
		return c.Partitions
	}
	return min(DefaultClusterPartitions, maxParallelism)
}

// Exchange is the transport of a distributed job: topics of partitions
// that its processes write transactionally and read committed records
// from. Package kafka implements it; the engine hands it opaque records.
type Exchange interface {
	// CreateTopics makes sure the topics exist with partitions
	// partitions each: it creates those that do not exist and fails if
	// one exists with another number of partitions.
	CreateTopics(ctx context.Context, topics []string, partitions int) error
	// Source reads the given partitions of topic, committed records
	// only, from the offsets its position keeps (the earliest on a fresh
	// start), and never ends by itself. Read hands over each record's
	// Value aliasing memory the source keeps until its next Read.
	Source(topic string, partitions []int32) NewSource[ExchangeRecord]
	// Sink writes records to topic, each to its partition, in
	// transactions that commit with the checkpoint that covers them (its
	// transactional ids start with prefix). A record's Value is the
	// engine's only until Write returns: a sink that needs it later
	// copies it.
	Sink(topic, prefix string) func() TwoPhaseSink[ExchangeRecord]
}

// ExchangeRecord is one record of a repartition topic: the partition it
// goes to and its value, encoded by the engine (see the package doc).
type ExchangeRecord struct {
	Partition int32
	Value     []byte
}

func (c *Cluster) validate(cfg Config) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %w", ErrCluster, configErrorf("Cluster."+field, format, args...)))
	}
	if c.JobID == "" {
		bad("JobID", "empty: it names the job's topics")
	}
	if c.Processes < 1 {
		bad("Processes", "%d: must be at least 1", c.Processes)
	}
	if c.Process < 0 || c.Process >= c.Processes {
		bad("Process", "%d: must be in [0, Processes=%d)", c.Process, c.Processes)
	}
	if p := c.partitions(cfg.MaxParallelism); p < max(1, c.Processes) || p > cfg.MaxParallelism {
		bad("Partitions", "%d: must be in [Processes=%d, MaxParallelism=%d]: each process owns at least one partition, each partition at least one key group",
			p, c.Processes, cfg.MaxParallelism)
	}
	if c.Exchange == nil {
		bad("Exchange", "nil: a distributed job needs one (kafka.Exchange)")
	}
	for i, p := range c.RestoreFrom {
		if p == "" {
			bad("RestoreFrom", "entry %d is empty", i)
		}
	}
	if len(c.RestoreFrom) > 0 && cfg.RestoreFrom != "" {
		bad("RestoreFrom", "set together with Config.RestoreFrom: a process starts from its own savepoint (Config.RestoreFrom) or rescaled from every process's (Cluster.RestoreFrom), not both")
	}
	if !cfg.Checkpoint.enabled() || cfg.Checkpoint.Mode != ExactlyOnce {
		bad("Checkpoint", "a distributed job needs exactly-once checkpoints (Checkpoint.Interval and StateDir)")
	}
	return errs
}

// ClusterPlan returns how the job runs as the processes of
// Config.Cluster; an error if it has no Cluster or cannot be cut.
func (j *Job) ClusterPlan() (*ClusterPlan, error) {
	c := j.cfg.Cluster
	if c == nil {
		return nil, fmt.Errorf("%w: the job's Config has no Cluster", ErrCluster)
	}
	if p, err := j.cut.done(); p != nil || err != nil {
		return p, err
	}
	if p := c.partitions(j.cfg.MaxParallelism); p < max(1, c.Processes) || p > j.cfg.MaxParallelism {
		return nil, fmt.Errorf("%w: Cluster.Partitions %d: must be in [Processes=%d, MaxParallelism=%d]",
			ErrCluster, p, c.Processes, j.cfg.MaxParallelism)
	}
	return planCluster(j.graphOf(), c, j.cfg.MaxParallelism)
}

// clusterCut cuts a distributed job's graph once, whichever of Run and
// Graph comes first, so that the graph never changes under a reader.
type clusterCut struct {
	once sync.Once
	mu   sync.Mutex // guards plan and err, for done
	plan *ClusterPlan
	err  error
}

// done returns the plan and error of a cut that ran; nil, nil before.
func (c *clusterCut) done() (*ClusterPlan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plan, c.err
}

func (j *Job) cutGraph() (*ClusterPlan, error) {
	j.cut.once.Do(func() {
		p, err := j.cutNow()
		j.cut.mu.Lock()
		j.cut.plan, j.cut.err = p, err
		j.cut.mu.Unlock()
	})
	return j.cut.done()
}

// cutForCluster cuts the graph (if Graph has not) and creates the
// repartition topics, before the job's first attempt.
func (j *Job) cutForCluster(ctx context.Context) error {
	p, err := j.cutGraph()
	if err != nil {
		return err
	}
	topics := make([]string, len(p.Topics))
	for i, t := range p.Topics {
		topics[i] = t.Name
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := j.cfg.Cluster.Exchange.CreateTopics(cctx, topics, p.Partitions); err != nil {
		return fmt.Errorf("%w: create repartition topics: %w", ErrCluster, err)
	}
	return nil
}

// cutNow rewrites the graph as the plan says: each hash edge from → to
// becomes a sink after from that writes the edge's topic and a source
// before to that reads the process's partitions of it, feeding to over a
// hash edge as before; and every other source opens as its subtask among
// all processes' subtasks.
func (j *Job) cutNow() (*ClusterPlan, error) {
	c := j.cfg.Cluster
	// NB: the graph is checked before it is cut, and topics are created
	// only for a job that can run.
	if err := errors.Join(append(c.validate(j.cfg), j.cfg.validate(), j.validate())...); err != nil {
		return nil, err
	}
	p, err := planCluster(j.graphOf(), c, j.cfg.MaxParallelism)
	if err != nil {
		return nil, err
	}
	own := p.Owned(c.Process)
	var mine []int32
	for q := own.Start; q < own.End; q++ {
		mine = append(mine, int32(q))
	}
	userSources := slices.DeleteFunc(slices.Clone(j.nodes), func(n *node) bool { return len(n.inputs) > 0 })
	var cuts []*edge
	for _, n := range j.nodes {
		for _, e := range n.inputs {
			if e.part == operator.Hash {
				cuts = append(cuts, e)
			}
		}
	}
	if len(cuts) != len(p.Topics) {
		return nil, fmt.Errorf("%w: planned %d topics for %d keyed exchanges", ErrCluster, len(p.Topics), len(cuts))
	}
	var readers []*node
	for k, e := range cuts {
		readers = append(readers, j.cutEdge(e, &p.Topics[k], p, mine))
	}
	for _, n := range userSources {
		build := n.build
		proc, procs := c.Process, c.Processes
		n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
			ctx.Share.Subtask, ctx.Share.Parallelism = proc*n.parallelism+ctx.Subtask, procs*n.parallelism
			return build(ctx, down)
		}
	}
	// NB: the nodes stay in a topological order (the planner relies on
	// it): each reader goes first, as it has no input.
	j.nodes = append(readers, slices.DeleteFunc(j.nodes, func(n *node) bool { return slices.Contains(readers, n) })...)
	for i, n := range j.nodes {
		n.id = i
	}
	return p, nil
}

// cutEdge replaces e with its topic's writer and reader, and returns the
// reader.
func (j *Job) cutEdge(e *edge, t *RepartitionTopic, p *ClusterPlan, mine []int32) *node {
	from, to := e.from, e.to
	from.outputs = slices.DeleteFunc(from.outputs, func(x *edge) bool { return x == e })
	to.inputs = slices.DeleteFunc(to.inputs, func(x *edge) bool { return x == e })
	ti := from.out
	if e.side != nil {
		ti = e.side.ti
	}
	c := j.cfg.Cluster
	spec := &cutSpec{
		plan: p, topic: t.Name, process: c.Process, keyHash: e.keyHash, timed: from.timed,
		producers: c.Processes * from.parallelism, mine: mine, exchange: c.Exchange,
		prefix: fmt.Sprintf("%s-%d-%s", c.JobID, c.Process, t.Name), batch: j.cfg.BatchSize, gen: &j.clusterGen,
	}
	w, _ := j.addNodeWith(t.Writer, nodeOptions{parallelism: from.parallelism, parallelismSet: true},
		[]streamSrc{{node: from, part: operator.Forward, side: e.side}})
	r, _ := j.addNodeWith(t.Reader, nodeOptions{parallelism: to.parallelism, parallelismSet: true})
	r.out, r.timed = ti, from.timed
	w.build, r.build = ti.cut(spec)
	in := &edge{from: r, to: to, port: e.port, part: operator.Hash, keyHash: e.keyHash}
	r.outputs = append(r.outputs, in)
	to.inputs = append(to.inputs, in)
	slices.SortStableFunc(to.inputs, func(a, b *edge) int { return a.port - b.port })
	return r
}

// cutSpec is what a cut edge's writer and reader need.
type cutSpec struct {
	plan      *ClusterPlan
	topic     string
	process   int
	keyHash   any  // operator.KeyHasher[T]
	timed     bool // the records carry event time, and watermarks follow
	producers int  // the writer's subtasks in all processes
	mine      []int32
	exchange  Exchange
	prefix    string // of the writer's transactional ids
	batch     int    // Config.BatchSize
	// gen is the job's layout generation, settled before any task opens
	// (nil: 0).
	gen *uint64
}

func (s *cutSpec) generation() uint64 {
	if s.gen == nil {
		return 0
	}
	return *s.gen
}

// buildFunc is a node's build.
type buildFunc = func(ctx *operator.Context, down any) ([]any, operator.Operator)

// cutBuilds returns, for records of type T, the builds of a cut edge's
// writer and reader; typeOf keeps it as typeInfo.cut.
func cutBuilds[T any](codec operator.Codec[T]) func(s *cutSpec) (writer, reader buildFunc) {
	return func(s *cutSpec) (buildFunc, buildFunc) {
		newSink := s.exchange.Sink(s.topic, s.prefix)
		writer := func(ctx *operator.Context, _ any) ([]any, operator.Operator) {
			w := newCutWriter[T](s, codec, newSink())
			return []any{operator.Input[T](w)}, w
		}
		newSrc := s.exchange.Source(s.topic, s.mine)
		reader := func(ctx *operator.Context, down any) ([]any, operator.Operator) {
			r := &cutReader[T]{spec: s, codec: codec, inner: newSrc()}
			if s.timed {
				return nil, operator.NewStampedSourceRunner[T](r, s.batch, nil, down.(operator.Input[T]))
			}
			return nil, operator.NewSourceRunner[T](r, s.batch, nil, nil, down.(operator.Input[T]))
		}
		return writer, reader
	}
}

// clusterKeyGroups returns the key groups this process of a distributed
// job owns, once its graph is cut: its keyed operators' subtasks share
// them (and only them) out.
func (j *Job) clusterKeyGroups() (keygroups.Range, bool) {
	p, _ := j.cut.done()
	if p == nil {
		return keygroups.Range{}, false
	}
	return p.keyGroupsOfPartitions(p.Owned(j.cfg.Cluster.Process)), true
}

// hashPartitioner routes the records of a hash edge to the subtasks of
// its downstream operator of the given parallelism.
func (j *Job) hashPartitioner(parallelism int) (*keygroups.Partitioner, error) {
	if own, ok := j.clusterKeyGroups(); ok {
		return keygroups.NewPartitionerWithin(own, parallelism, j.cfg.MaxParallelism)
	}
	return keygroups.NewPartitioner(parallelism, j.cfg.MaxParallelism)
}

// keyGroupsOfPartitions returns the key groups of partitions [first, end).
func (p *ClusterPlan) keyGroupsOfPartitions(r keygroups.Range) keygroups.Range {
	if r.Len() == 0 {
		return keygroups.Range{}
	}
	return keygroups.Range{Start: p.KeyGroups(r.Start).Start, End: p.KeyGroups(r.End - 1).End}
}
