package ringflow

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/ringflow/ringflow/align"
	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/cmalloc"
	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/ring"
	"github.com/ringflow/ringflow/sched"
	"github.com/ringflow/ringflow/snapshot"
)

// Run checks the configuration and the job graph, starts the job, and
// waits until every sink has seen the end of its input (bounded sources),
// the context is cancelled, or an operator fails. It returns nil,
// ctx.Err(), or the failure, which names the operator and subtask (an
// *OperatorError). Every worker has exited when Run returns.
//
// Before it starts anything, Run reports every problem of the Config (each
// a *ConfigError, wrapping ErrConfig) and of the graph (each a
// *GraphError, wrapping ErrGraph and its kind, such as ErrCycle) at once,
// joined with errors.Join: errors.Is and errors.As test for each.
//
// With checkpoints on, a job whose state dir holds a complete checkpoint
// resumes from it, once its state matches the checkpoint's (else a
// *RestoreMismatchError; see Config.AllowNonRestoredState), unless that
// checkpoint is the final one of a finished run (ErrFinished; see
// Config.RerunFinished); a failed task makes the job restore the latest
// complete checkpoint in place, as often as the restart strategy allows;
// and a bounded job takes a final checkpoint at the end of its input, so
// that all its output is committed before Run returns.
//
// Run logs through Config.Logger and reports its lifecycle to
// Config.Events; every callback has returned when Run returns.
func (j *Job) Run(ctx context.Context) error {
	if j.ran {
		return errors.New("ringflow: Run called twice on one job")
	}
	j.ran = true
	start := time.Now()
	j.events = startEvents(j.cfg.Events)
	err := j.run(ctx)
	j.ctl.end(err)
	for _, f := range j.ended {
		f(err)
	}
	j.events.jobEnded(JobEndInfo{Err: err, Restarts: int(j.restarts.Load()), Duration: time.Since(start)})
	j.events.close()
	return err
}

func (j *Job) run(ctx context.Context) error {
	// NB: nothing starts before the whole configuration and graph are
	// checked, and every problem is reported at once.
	if j.cfg.Cluster != nil {
		if err := j.cutForCluster(ctx); err != nil {
			return err
		}
	}
	if err := errors.Join(j.cfg.validate(), j.validate()); err != nil {
		return err
	}
	restoreProcs, err := j.fitProcs()
	if err != nil {
		return err
	}
	defer restoreProcs()
	j.checkRaise()
	var store *snapshot.Store
	if ck := j.cfg.Checkpoint; ck.enabled() {
		opts := ck.storeOptions
		opts.Retained = ck.Retained
		if opts.Logger == nil {
			opts.Logger = j.cfg.Logger
		}
		s, err := snapshot.Open(ck.StateDir, opts)
		if err != nil {
			return fmt.Errorf("ringflow: open checkpoint store %s: %w", ck.StateDir, err)
		}
		defer s.Close()
		store = s
		if j.identity, err = loadIdentity(ck.StateDir); err != nil {
			return err
		}
	} else {
		j.identity = identity{job: newJobID()}
	}
	if j.cfg.RestoreFrom != "" {
		if err := j.useRestoreFrom(store); err != nil {
			return err
		}
	}
	if c := j.cfg.Cluster; c != nil && len(c.RestoreFrom) > 0 {
		if err := j.useRescale(store); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		err := j.attempt(ctx, store, attempt)
		if err == nil || ctx.Err() != nil || permanent(err) || store == nil ||
			attempt >= j.cfg.Restart.Attempts {
			switch {
			case ctx.Err() == nil:
				return err
			case err != nil && j.cfg.StopOnCancel:
				if errors.Is(err, ctx.Err()) {
					return err // the stop's bound ran out: it says so
				}
				return fmt.Errorf("%w; the job did not stop with a final checkpoint: %w", ctx.Err(), err)
			case err != nil || j.cfg.StopOnCancel:
				return ctx.Err()
			}
			return err
		}
		j.logFailure(err, attempt)
		j.restarts.Add(1)
		j.events.restarting(RestartInfo{Attempt: attempt + 1, Delay: j.cfg.Restart.Delay, Err: err})
		select {
		case <-time.After(j.cfg.Restart.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// attempt runs the job once (attempt n of this Run, from 0), from the
// latest complete checkpoint if there is one.
func (j *Job) attempt(ctx context.Context, store *snapshot.Store, n int) error {
	p, err := j.plan(store != nil)
	if err != nil {
		return err
	}
	defer p.close()
	stopOnCancel := store != nil && j.cfg.StopOnCancel
	base := ctx
	if stopOnCancel {
		// NB: a cancelled ctx then stops the job with a stop checkpoint,
		// which user code takes part in (a sink commits it): the
		// attempt's context ends with the attempt, not with ctx.
		base = context.WithoutCancel(ctx)
	}
	actx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	p.setAttempt(actx, cancel)
	var cp *snapshot.Checkpoint
	restoreStart := time.Now()
	if store != nil {
		if cp, err = p.latest(store); err != nil {
			return err
		}
		latest := cp
		if cp, err = j.ofThisRun(cp); err != nil {
			if !errors.Is(err, ErrFinished) {
				return err
			}
			if err := p.commitFinal(latest); err != nil {
				return err
			}
			if n > 0 {
				// The job finished in this Run: the failure it restarted
				// from came after its final checkpoint.
				return nil
			}
			return err
		}
	}
	fromPath, rescaled := "", false
	if cp == nil && j.from != nil {
		// Config.RestoreFrom: read again at every attempt until the job
		// has a checkpoint of its own.
		if j.from.rescale {
			cp, err = j.assembleRescaled()
		} else {
			cp, err = j.from.load(j)
		}
		if err != nil {
			return err
		}
		fromPath, rescaled = j.from.path, j.from.rescale
	}
	if err := j.settleLayout(cp, rescaled); err != nil {
		return err
	}
	if cp != nil {
		if err := p.restorePositions(cp, rescaled); err != nil {
			return err
		}
		j.restored.Store(cp.ID())
		for _, skipped := range cp.Skipped {
			j.cfg.Logger.Error("ringflow: restore passed over an unusable checkpoint",
				"checkpoint", skipped.ID, "err", skipped.Err)
		}
	}
	if err := p.open(); err != nil {
		return err
	}
	j.declared = p.declared()
	if cp != nil {
		report, err := j.matchState(cp, j.declared)
		if err != nil {
			return err
		}
		report.From = fromPath
		j.statsMu.Lock()
		j.lastRestore = report
		j.statsMu.Unlock()
		if err := p.restoreState(cp); err != nil {
			return err
		}
		info := RestoreInfo{Checkpoint: cp.ID(), Attempt: n, Duration: time.Since(restoreStart)}
		for _, s := range cp.Skipped {
			info.Skipped = append(info.Skipped, s.ID)
		}
		j.events.restored(info)
		// NB: a restore reads the whole checkpoint into the heap (it is
		// checked before any of it is used), and a collection during the
		// restore sets the heap's goal at twice that, which the runtime
		// then grows to and holds for minutes after the data is garbage.
		// Collecting once the data is dropped sets the goal by the
		// running job's heap instead, and returns the freed pages at once
		// rather than over the next seconds. Pebble's C allocations made
		// by the restore's reads stay resident in the C allocator's arenas
		// once freed until they are trimmed (internal/cmalloc): about 8 MB
		// a restore. Restores are rare; the keyed state itself is off the
		// heap (snapshot/cow), so both are cheap.
		cp = nil
		debug.FreeOSMemory()
		cmalloc.Trim()
	}
	if store != nil {
		coord := newCoordinator(j, store, p.tasks, p.workerOf, func(err error) { cancel(err); p.pool.Fail(err) })
		coord.wake, coord.at = p.pool.WakeFor, p.pool.At
		coord.saturated, coord.offload = p.pool.Saturated, p.pool.Offload
		for _, t := range p.tasks {
			t.Checkpoints.Coord = coord
		}
		coord.start()
		// NB: deferred, so that the checkpoints it aborts are reported
		// after the failure that ended the attempt.
		defer func() { coord.stop(err) }()
		j.ctl.attach(coord, nil)
	} else {
		j.ctl.attach(nil, p.pool)
	}
	defer j.ctl.attach(nil, nil)
	runCtx := ctx
	if stopOnCancel {
		var unwatch func()
		runCtx, unwatch = j.stopOnCancel(ctx, p.pool, cancel)
		defer unwatch()
	}
	j.statsMu.Lock()
	j.pool, j.channels = p.pool, p.named
	j.statsMu.Unlock()
	runErr := p.pool.Run(runCtx)
	// NB: the rings are unmapped after this, so the metrics stop reading
	// them first, under the same lock.
	j.statsMu.Lock()
	j.stalls.add(p.pool.Stalls())
	j.workers, j.pool, j.channels = addWorkerStats(j.workers, p.pool), nil, nil
	j.statsMu.Unlock()
	closeErr := p.closeTasks()
	err = runErr
	if err == nil {
		err = closeErr
	}
	if err != nil && ctx.Err() == nil {
		j.reportTaskFailure(err, n)
	}
	return err
}

// reportTaskFailure posts the TaskFailed event of the failure that ended
// attempt n.
func (j *Job) reportTaskFailure(err error, n int) {
	info := TaskFailureInfo{Attempt: n, Err: err}
	var oe *operator.Error
	if errors.As(err, &oe) {
		info.Operator, info.Subtask = oe.Operator, oe.Subtask
	}
	j.events.taskFailed(info)
}

// physical is a job laid out as tasks and rings.
type physical struct {
	job   *Job
	pool  *sched.Pool
	tasks []*operator.Task
	rings []*ring.Ring
	// named are the rings with the subtasks they join, for the metrics.
	named  []channel
	opened int
	// workerOf is the worker that runs each task.
	workerOf map[*operator.Task]*sched.Worker
	// heads maps each node to the head of its chain, which names its task.
	heads map[*node]*node
	// bodies are, by node, the loops whose body it is in.
	bodies map[*node][]operator.LoopBody
}

type ringKey struct {
	e    *edge
	u, d int
}

type taskKey struct {
	c *chain
	i int
}

func (j *Job) plan(checkpoints bool) (*physical, error) {
	chains := j.chains()
	for _, c := range chains {
		for _, e := range c.head().inputs {
			if err := e.codecError(); err != nil {
				return nil, err
			}
		}
	}
	opts := sched.Options{Workers: j.cfg.Workers, CPUs: j.cfg.CPUs, NoPin: j.cfg.NoPin, NoSteal: j.cfg.NoSteal, NoRest: j.cfg.NoRest,
		Logger: j.cfg.Logger, StallBound: j.cfg.StallBound}
	if iv := j.cfg.Checkpoint.Interval; checkpoints && iv > 0 {
		opts.BackgroundPatience = sched.PatienceFor(iv)
	}
	pool, err := sched.New(opts)
	if err != nil {
		return nil, err
	}
	p := &physical{job: j, pool: pool, workerOf: map[*operator.Task]*sched.Worker{}, heads: map[*node]*node{},
		bodies: j.loopBodies()}
	for _, c := range chains {
		for _, n := range c.nodes {
			p.heads[n] = c.head()
		}
	}
	rings, err := p.makeRings(chains)
	if err != nil {
		p.close()
		return nil, err
	}
	workers := pool.Workers()
	workerOf := map[taskKey]*sched.Worker{}
	for _, c := range chains {
		for i := range c.head().parallelism {
			workerOf[taskKey{c, i}] = workers[len(workerOf)%len(workers)]
		}
	}
	chainOf := map[*node]*chain{}
	for _, c := range chains {
		for _, n := range c.nodes {
			chainOf[n] = c
		}
	}
	for k, r := range rings {
		r.SetWakers(workerOf[taskKey{chainOf[k.e.to], k.d}], workerOf[taskKey{chainOf[k.e.from], k.u}])
	}
	for _, c := range chains {
		for i := range c.head().parallelism {
			t, err := p.buildTask(c, i, rings)
			if err == nil && checkpoints {
				err = p.checkpointing(t, workerOf[taskKey{c, i}])
			}
			if err != nil {
				p.close()
				return nil, err
			}
			workerOf[taskKey{c, i}].Add(t)
			p.workerOf[t] = workerOf[taskKey{c, i}]
			p.tasks = append(p.tasks, t)
		}
	}
	return p, nil
}

// makeRings creates one ring per (edge, upstream subtask, downstream
// subtask) pair that exchanges records.
func (p *physical) makeRings(chains []*chain) (map[ringKey]*ring.Ring, error) {
	rings := map[ringKey]*ring.Ring{}
	for _, c := range chains {
		for _, e := range c.head().inputs {
			for u := range e.from.parallelism {
				for _, d := range e.targets(u) {
					r, err := ring.New(ring.Options{Capacity: p.job.cfg.RingCapacity})
					if err != nil {
						return nil, fmt.Errorf("ringflow: ring from %q to %q: %w", e.from.name, e.to.name, err)
					}
					rings[ringKey{e, u, d}] = r
					p.rings = append(p.rings, r)
					p.named = append(p.named, channel{from: e.from.name, to: e.to.name, fromSubtask: u, toSubtask: d, r: r})
				}
			}
		}
	}
	return rings, nil
}

// buildTask instantiates subtask i of chain c: the gate, then the operators
// from the tail back to the head, then the head's input channels.
func (p *physical) buildTask(c *chain, i int, rings map[ringKey]*ring.Ring) (*operator.Task, error) {
	j := p.job
	t := &operator.Task{Name: fmt.Sprintf("%s#%d", c.head().name, i),
		Opts: operator.TaskOptions{MaxDelay: j.cfg.MaxBatchDelay, Debloat: j.cfg.Debloat}}
	var down any
	var downCtx *operator.Context // the context of the operator down feeds, in the chain
	var sides map[*sideOut]any    // the side outputs' gates, feeding which the tail emits to them
	if tail := c.tail(); tail.out != nil {
		in, ss, g, err := p.buildGate(tail, i, rings)
		if err != nil {
			return nil, err
		}
		sides = ss
		ctx, err := p.context(tail, i)
		if err != nil {
			return nil, err
		}
		down, t.Ports, t.Gate = in, g.ports, g.idle
		t.Ops, t.Ctxs = []operator.Operator{g.op}, []*operator.Context{ctx}
	}
	for k := len(c.nodes) - 1; k >= 0; k-- {
		n := c.nodes[k]
		ctx, err := p.context(n, i)
		if err != nil {
			return nil, err
		}
		if down != nil {
			// NB: records out of n, and into the next operator of the
			// chain if down is one's (the gate's are counted as read).
			var into *operator.Metrics
			if downCtx != nil {
				into = downCtx.Metrics
			}
			down = n.out.count(down, ctx.Metrics, into)
		}
		if n == c.tail() && len(sides) > 0 {
			ctx.SideOutputs = map[string]operator.SideOutput{}
			for so, in := range sides {
				ctx.SideOutputs[so.name] = so.newOut(in)
			}
		}
		inputs, op := n.build(ctx, down)
		if k == 0 {
			t.Ctx = ctx
			if src, ok := op.(operator.SourceDriver); ok && len(n.inputs) == 0 {
				t.Source = src
				break
			}
			t.Inputs = p.channels(n, i, inputs, rings)
		}
		t.Ops = append([]operator.Operator{op}, t.Ops...)
		t.Ctxs = append([]*operator.Context{ctx}, t.Ctxs...)
		if k > 0 {
			down, downCtx = inputs[0], ctx
		}
	}
	return t, nil
}

func (p *physical) context(n *node, i int) (*operator.Context, error) {
	kgs, err := p.job.keyGroupsOf(n, i)
	if err != nil {
		return nil, fmt.Errorf("operator %q: %w", n.name, err)
	}
	timed := len(n.inputs) > 0
	for _, e := range n.inputs {
		timed = timed && e.from.timed
	}
	return &operator.Context{Operator: n.name, Subtask: i, Parallelism: n.parallelism,
		MaxParallelism: p.job.cfg.MaxParallelism, KeyGroups: kgs, Timed: timed,
		Checkpoints: p.job.cfg.Checkpoint.enabled(), HugePages: p.job.cfg.HugePages,
		Metrics: p.job.metricsOf(n.name, i), Loops: p.bodies[n]}, nil
}

func (p *physical) buildGate(n *node, i int, rings map[ringKey]*ring.Ring) (any, map[*sideOut]any, *gateOps, error) {
	opts := operator.GateOptions{Timed: n.timed, FrameBytes: p.job.cfg.FrameBytes}
	in, g, err := p.gateOf(n, n.out, n.sideEdges(nil), i, rings, opts)
	if err != nil || n.sides == nil || len(n.sides.list) == 0 {
		return in, nil, g, err
	}
	// NB: the gates of the side outputs the job reads follow the main
	// output's, and their edges are numbered after its edges.
	sides := map[*sideOut]any{}
	parts := []operator.GatePart{g.op.(operator.GatePart)}
	for _, so := range n.sides.list {
		edges := n.sideEdges(so)
		if len(edges) == 0 {
			continue
		}
		sin, sg, err := p.gateOf(n, so.ti, edges, i, rings, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		sides[so] = sin
		parts = append(parts, sg.op.(operator.GatePart))
	}
	if len(parts) == 1 {
		return in, nil, g, nil
	}
	gs := operator.NewGates(parts...)
	return in, sides, &gateOps{op: gs, ports: gs.Ports(), idle: gs}, nil
}

// gateOf makes the gate of subtask i of n that writes records of type ti
// to edges.
func (p *physical) gateOf(n *node, ti *typeInfo, edges []*edge, i int, rings map[ringKey]*ring.Ring,
	opts operator.GateOptions) (any, *gateOps, error) {
	var outs []operator.EdgeOut
	for _, e := range edges {
		eo := operator.EdgeOut{Partitioning: e.part, KeyHash: e.keyHash}
		for _, d := range e.targets(i) {
			eo.Writers = append(eo.Writers, rings[ringKey{e, i, d}].Writer())
		}
		if e.part == operator.Hash {
			part, err := p.job.hashPartitioner(e.to.parallelism)
			if err != nil {
				return nil, nil, fmt.Errorf("operator %q: %w", e.to.name, err)
			}
			eo.Partitioner = part
		}
		outs = append(outs, eo)
	}
	in, g, err := ti.gate(opts, outs)
	if err != nil {
		return nil, nil, fmt.Errorf("operator %q: %w", n.name, err)
	}
	return in, g, nil
}

// channels makes the input channels of subtask i of head node n: one per
// ring that reaches it, each feeding the node's input for its edge's port.
func (p *physical) channels(n *node, i int, inputs []any, rings map[ringKey]*ring.Ring) []*operator.Channel {
	var chans []*operator.Channel
	for ei, e := range n.inputs {
		var keyHash any
		if e.part == operator.Hash {
			keyHash = e.keyHash
		}
		mk := e.typ().input(inputs[e.port], e.from.timed, keyHash)
		for u := range e.from.parallelism {
			r, ok := rings[ringKey{e, u, i}]
			if !ok {
				continue // a forward edge pairs u with u only
			}
			ch := mk(r.Reader())
			ch.Index, ch.Edge, ch.Upstream = len(chans), ei, u
			ch.From = p.heads[e.from].name
			chans = append(chans, ch)
		}
	}
	return chans
}

// open opens every task; on failure it leaves p.opened saying how many to
// close.
func (p *physical) open() error {
	for _, t := range p.tasks {
		if err := t.Open(); err != nil {
			return err
		}
		p.opened++
	}
	return nil
}

func (p *physical) closeTasks() error {
	var errs []error
	for _, t := range p.tasks[:p.opened] {
		errs = append(errs, t.Close())
	}
	p.opened = 0
	return errors.Join(errs...)
}

func (p *physical) close() {
	p.closeTasks()
	for _, r := range p.rings {
		r.Close()
	}
}

// checkpointing connects task t to checkpoints: a mailbox for the
// coordinator, and an aligner for tasks with inputs.
func (p *physical) checkpointing(t *operator.Task, w *sched.Worker) error {
	ck := p.job.cfg.Checkpoint
	t.Checkpoints = &operator.Checkpoints{Waker: w, Unaligned: ck.alignTimeout() == 0,
		MayUnalign: ck.alignTimeout() >= 0, Raise: !ck.NoRaise,
		StallBound: p.pool.StallBound(), Stalls: p.pool}
	if len(t.Inputs) == 0 {
		return nil
	}
	mode := align.ExactlyOnce
	if ck.Mode == AtLeastOnce {
		mode = align.AtLeastOnce
	}
	a, err := align.New(align.Config{Channels: len(t.Inputs), Mode: mode,
		AlignmentTimeout: ck.alignTimeout(), MaxConcurrent: ck.MaxConcurrent})
	if err != nil {
		return fmt.Errorf("ringflow: task %s: %w", t.Name, err)
	}
	t.Checkpoints.Aligner = a
	return nil
}

// latest returns the checkpoint to restore, or nil if there is none; it
// reports the newer checkpoints it had to pass over.
func (p *physical) latest(store *snapshot.Store) (*snapshot.Checkpoint, error) {
	cp, err := store.Latest()
	if errors.Is(err, snapshot.ErrNoCheckpoint) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ringflow: find the latest checkpoint: %w", err)
	}
	if m := cp.Meta().MaxParallelism; m != p.job.cfg.MaxParallelism {
		return nil, fmt.Errorf("ringflow: checkpoint %d was taken with max parallelism %d; the job has %d",
			cp.ID(), m, p.job.cfg.MaxParallelism)
	}
	return cp, nil
}

// restorePositions rewinds every source to its position in cp. A source
// whose parallelism changed shares out its splits anew, if it has splits
// (SplitSource); else the restore fails. So does every source of a
// process restored rescaled, from the positions of every old process.
func (p *physical) restorePositions(cp *snapshot.Checkpoint, rescaled bool) error {
	meta := cp.Meta()
	for _, t := range p.tasks {
		if t.Source == nil {
			continue
		}
		op := t.Ctx.Operator
		if rescaled {
			pos, ok, err := rescaledPosition(cp, t)
			if err != nil {
				return err
			}
			if ok {
				t.Source.Restore(pos)
			}
			continue
		}
		if was, ok := meta.Parallelism[op]; ok && was != t.Ctx.Parallelism {
			pos, err := rescalePosition(cp, t, was)
			if err != nil {
				return fmt.Errorf("ringflow: restore checkpoint %d: source %q had parallelism %d, now %d: %w",
					cp.ID(), op, was, t.Ctx.Parallelism, err)
			}
			t.Source.Restore(pos)
			continue
		}
		if pos, ok := cp.SourcePosition(op, t.Ctx.Subtask); ok {
			t.Source.Restore(append([]byte(nil), pos...))
		}
	}
	return nil
}

// rescalePosition returns the position of source task t from the
// positions of its operator's was subtasks in cp.
func rescalePosition(cp *snapshot.Checkpoint, t *operator.Task, was int) ([]byte, error) {
	r, ok := t.Source.(interface {
		RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, bool, error)
	})
	old := make([][]byte, was)
	for _, s := range cp.SourcePositions(t.Ctx.Operator) {
		if s.Subtask < was {
			old[s.Subtask] = append([]byte(nil), s.Data...)
		}
	}
	var pos []byte
	var err error
	if ok {
		pos, ok, err = r.RescalePosition(t.Ctx.Subtask, t.Ctx.Parallelism, old)
	}
	if !ok {
		return nil, errors.New("its source has no splits to share out anew (it is no ringflow.SplitSource), so it must keep its parallelism")
	}
	return pos, err
}

// restoreState loads every stateful operator's state from cp: the key
// groups each instance owns now, so a different parallelism redistributes
// them; and the in-flight data of unaligned snapshots, replayed first.
func (p *physical) restoreState(cp *snapshot.Checkpoint) error {
	for _, t := range p.tasks {
		if err := p.restoreChannels(cp, t); err != nil {
			return err
		}
		for i, op := range t.Ops {
			c, ok := op.(operator.Checkpointed)
			if !ok {
				continue
			}
			ctx := t.Ctxs[i]
			if err := c.RestoreState(stateReader{cp: cp, op: ctx.Operator}); err != nil {
				return fmt.Errorf("ringflow: restore checkpoint %d: operator %q subtask %d: %w",
					cp.ID(), ctx.Operator, ctx.Subtask, err)
			}
		}
	}
	return nil
}

// commitFinal commits what the final checkpoint cp of a finished job left
// pre-committed: its sinks' transactions, whose commits may not all have
// run before a failure or the end of the process. The sinks alone are
// opened, restored and closed (operator.FinalCommitter).
func (p *physical) commitFinal(cp *snapshot.Checkpoint) error {
	for _, t := range p.tasks {
		for i, op := range t.Ops {
			fc, ok := op.(operator.FinalCommitter)
			if !ok {
				continue
			}
			ctx := t.Ctxs[i]
			if err := fc.CommitFinal(ctx, stateReader{cp: cp, op: ctx.Operator}); err != nil {
				return fmt.Errorf("ringflow: commit the final checkpoint %d: operator %q subtask %d: %w",
					cp.ID(), ctx.Operator, ctx.Subtask, err)
			}
		}
	}
	return nil
}

// logFailure reports a failure the job restarts from, with a panic's
// stack, which the error's message leaves out.
func (j *Job) logFailure(err error, attempt int) {
	attrs := []any{"attempt", attempt + 1, "err", err}
	var oe *operator.Error
	if errors.As(err, &oe) {
		attrs = append(attrs, "operator", oe.Operator, "subtask", oe.Subtask)
		if oe.Stack != nil {
			attrs = append(attrs, "stack", string(oe.Stack))
		}
	}
	j.cfg.Logger.Error("ringflow: attempt failed; the job restarts from its latest checkpoint", attrs...)
}

// restoreChannels hands a task the in-flight data that unaligned snapshots
// of its head operator's previous subtasks recorded. Subtask j of p takes,
// for each keyed input edge, the records of every old subtask's state that
// fall in its key groups; for other input edges, and for recorded output,
// the whole state of old subtasks i with i % p == j (output is partitioned
// afresh as it is re-emitted). With the parallelism unchanged that is
// exactly its own old state.
func (p *physical) restoreChannels(cp *snapshot.Checkpoint, t *operator.Task) error {
	op := t.Ctx.Operator
	for i := range cp.Meta().Parallelism[op] {
		for _, s := range cp.ChannelStates(op, i) {
			if err := p.restoreChannel(t, i, s); err != nil {
				return fmt.Errorf("ringflow: restore checkpoint %d: operator %q subtask %d (from old subtask %d): %w",
					cp.ID(), op, t.Ctx.Subtask, i, err)
			}
		}
	}
	return nil
}

func (p *physical) restoreChannel(t *operator.Task, old int, s snapshot.ChannelState) error {
	sub, par := t.Ctx.Subtask, t.Ctx.Parallelism
	data := append([]byte(nil), s.Data...)
	if s.Channel >= outputChannelBase {
		if old%par != sub {
			return nil
		}
		if t.Gate == nil {
			return fmt.Errorf("output state, but the task has no output")
		}
		k := s.Channel - outputChannelBase
		return t.Gate.Replay(k>>16, k&0xffff, data)
	}
	edge, upstream := s.Channel>>16, s.Channel&0xffff
	var chans []*operator.Channel
	for _, c := range t.Inputs {
		if c.Edge == edge {
			chans = append(chans, c)
		}
	}
	if len(chans) == 0 {
		return fmt.Errorf("input state for edge %d, which the task does not have", edge)
	}
	// NB: the records of one old channel stay in order in one new channel.
	c := chans[upstream%len(chans)]
	if p.inputEdgeHashed(t, edge) {
		kgs, maxP := t.Ctx.KeyGroups, p.job.cfg.MaxParallelism
		keep := func(h uint64) bool { return kgs.Contains(keygroups.Of(h, maxP)) }
		c.Replay = append(c.Replay, operator.ReplayState{Data: data, Keep: keep})
		return nil
	}
	if old%par == sub {
		c.Replay = append(c.Replay, operator.ReplayState{Data: data})
	}
	return nil
}

// inputEdgeHashed reports whether input edge edge of task t's head is keyed.
func (p *physical) inputEdgeHashed(t *operator.Task, edge int) bool {
	n := p.job.byName[t.Ctx.Operator]
	return n != nil && edge < len(n.inputs) && n.inputs[edge].part == operator.Hash
}

// fitProcs settles the number of workers of the run (j.cfg.Workers, from
// here on never 0) against the Go scheduler's Ps, as Config.Workers and
// Config.RaiseGOMAXPROCS say, raising GOMAXPROCS if asked to; it returns
// the function that sets GOMAXPROCS back.
func (j *Job) fitProcs() (restore func(), err error) {
	cpus := len(j.cfg.CPUs)
	if cpus == 0 {
		usable, err := affinity.Usable()
		if err != nil {
			return nil, fmt.Errorf("ringflow: %w", err)
		}
		cpus = len(usable)
	}
	procs := runtime.GOMAXPROCS(0)
	workers, raiseTo := fitProcs(j.cfg.Workers, cpus, procs, j.cfg.RaiseGOMAXPROCS)
	j.cfg.Workers = workers
	if raiseTo == 0 {
		if workers+sched.SpareProcs > procs {
			j.cfg.Logger.Warn("ringflow: the workers leave no spare P: checkpoints, the garbage collector and the program's other goroutines take turns with them (set Config.RaiseGOMAXPROCS, or fewer Workers)",
				"workers", workers, "GOMAXPROCS", procs)
		}
		return func() {}, nil
	}
	runtime.GOMAXPROCS(raiseTo)
	return func() { runtime.GOMAXPROCS(procs) }, nil
}

// checkRaise logs, once per process, that snapshots' synchronous parts
// cannot be raised to the real-time class (CheckpointConfig.NoRaise) when
// the kernel refuses it.
func (j *Job) checkRaise() {
	if ck := j.cfg.Checkpoint; !ck.enabled() || ck.NoRaise || affinity.RealtimeRefused() {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		affinity.Raise().Lower()
	}()
	<-done
	if affinity.RealtimeRefused() {
		j.cfg.Logger.Info("ringflow: the process may not use SCHED_FIFO (it needs CAP_SYS_NICE or RLIMIT_RTPRIO), so snapshots' synchronous parts run in the fair class, where preemption can stretch them (CheckpointConfig.NoRaise)")
	}
}

// fitProcs returns the number of workers of a run with the given Workers
// setting (0: the default), on cpus CPUs, with procs Ps (GOMAXPROCS), and
// the GOMAXPROCS to raise to for the run (0: leave it): see
// Config.RaiseGOMAXPROCS.
func fitProcs(workers, cpus, procs int, raise bool) (n, raiseTo int) {
	n = workers
	if n == 0 {
		n = cpus
		if !raise {
			n = min(n, procs-sched.SpareProcs)
		}
		n = max(n, 1)
	}
	if raise && procs < n+sched.SpareProcs {
		raiseTo = n + sched.SpareProcs
	}
	return n, raiseTo
}
