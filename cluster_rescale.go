package ringflow

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/snapshot"
)

// Rescaling a distributed job (Cluster.RestoreFrom; see "Rescaling" in the
// package doc). Each checkpoint of a process records the layout it ran
// in (clusterRecord, in snapshot.Meta.Job). A process started from the
// savepoints of every process of another layout assembles, in memory,
// the checkpoint it would have taken had it always run in the new
// layout, and restores it as any checkpoint: the keyed state of the key
// groups it owns now, from whichever savepoints hold them; the positions
// of every old subtask of each source, which the source shares out anew
// (SplitSource) among the subtasks of every new process; and the sink
// transactions of the old processes it stands in for, which it commits
// and whose transactional ids it fences.

// clusterRecord is the layout a process of a distributed job ran in when
// it took a checkpoint.
type clusterRecord struct {
	jobID      string
	process    int
	processes  int
	partitions int
	gen        uint64 // the layout generation
}

// clusterRecordMagic starts an encoded clusterRecord:
//
//	magic, uvarint len(job id), job id, uvarint process, uvarint processes,
//	uvarint partitions, uvarint generation
const clusterRecordMagic = "ringflow.cluster.1:"

func (r clusterRecord) encode() []byte {
	b := []byte(clusterRecordMagic)
	b = binary.AppendUvarint(b, uint64(len(r.jobID)))
	b = append(b, r.jobID...)
	for _, v := range []uint64{uint64(r.process), uint64(r.processes), uint64(r.partitions), r.gen} {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// decodeClusterRecord decodes b; ok is false if b is no clusterRecord
// (a checkpoint of a job without Cluster, or of an older version).
func decodeClusterRecord(b []byte) (r clusterRecord, ok bool) {
	rest, found := strings.CutPrefix(string(b), clusterRecordMagic)
	if !found {
		return r, false
	}
	p := &posReader{b: []byte(rest)}
	l := p.uvarint(uint64(len(p.b)))
	if p.bad || l > uint64(len(p.b)) {
		return r, false
	}
	r.jobID, p.b = string(p.b[:l]), p.b[l:]
	r.process, r.processes, r.partitions = int(p.uvarint(1<<30)), int(p.uvarint(1<<30)), int(p.uvarint(1<<30))
	r.gen = p.uvarint(1 << 62)
	return r, !p.bad && len(p.b) == 0
}

func (r clusterRecord) String() string {
	return fmt.Sprintf("process %d of %d of job %q (%d partitions, layout generation %d)",
		r.process, r.processes, r.jobID, r.partitions, r.gen)
}

// clusterMeta is the record of this process's layout that its
// checkpoints keep; nil for a job that is not distributed.
func (j *Job) clusterMeta() []byte {
	c := j.cfg.Cluster
	p, _ := j.cut.done()
	if c == nil || p == nil {
		return nil
	}
	return clusterRecord{jobID: c.JobID, process: c.Process, processes: c.Processes, partitions: p.Partitions,
		gen: j.clusterGen}.encode()
}

// settleLayout sets the layout generation of an attempt that restores cp
// (nil: none), and checks that a checkpoint restored as it is was taken
// in this process's layout.
func (j *Job) settleLayout(cp *snapshot.Checkpoint, rescaled bool) error {
	c := j.cfg.Cluster
	j.clusterGen = 0
	if c == nil || cp == nil {
		return nil
	}
	r, ok := decodeClusterRecord(cp.Meta().Job)
	if !ok {
		// NB: a checkpoint of a version that recorded no layout: it ran
		// in generation 0, and the readers' positions check the rest.
		return nil
	}
	p, _ := j.cut.done()
	if !rescaled && (r.jobID != c.JobID || r.process != c.Process || r.processes != c.Processes || r.partitions != p.Partitions) {
		return fmt.Errorf("%w: checkpoint %d was taken by %s; this is process %d of %d of job %q with %d partitions: "+
			"a process restores its own checkpoints only; to change the number of processes, start each process of the new layout "+
			"with Cluster.RestoreFrom naming the savepoints of every old one",
			ErrCluster, cp.ID(), r, c.Process, c.Processes, c.JobID, p.Partitions)
	}
	j.clusterGen = r.gen
	return nil
}

// rescaleMember is one old process's checkpoint.
type rescaleMember struct {
	src    *restoreSource
	cp     *snapshot.Checkpoint
	record clusterRecord
}

func rescaleErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: Cluster.RestoreFrom: %s", ErrCluster, fmt.Sprintf(format, args...))
}

// loadRescale reads and checks the checkpoints Cluster.RestoreFrom names:
// one of every process of one layout of this job. It returns them by
// process.
func (j *Job) loadRescale() ([]rescaleMember, error) {
	c := j.cfg.Cluster
	plan, _ := j.cut.done()
	var members []rescaleMember
	for _, path := range c.RestoreFrom {
		src, err := resolveRestoreFrom(path, j.cfg.Logger)
		if err != nil {
			return nil, fmt.Errorf("%w: Cluster.RestoreFrom: %w", ErrCluster, err)
		}
		cp, err := src.load(j)
		if err != nil {
			return nil, fmt.Errorf("%w: Cluster.RestoreFrom: %w", ErrCluster, err)
		}
		meta := cp.Meta()
		r, ok := decodeClusterRecord(meta.Job)
		switch {
		case !ok:
			return nil, rescaleErrorf("%s: checkpoint %d records no process of a distributed job (it was taken without Cluster, "+
				"or by an older version: restore it at its own layout and take a savepoint again)", src.path, cp.ID())
		case r.jobID != c.JobID:
			return nil, rescaleErrorf("%s: checkpoint %d is of distributed job %q, this is %q", src.path, cp.ID(), r.jobID, c.JobID)
		case r.partitions != plan.Partitions:
			return nil, rescaleErrorf("%s: checkpoint %d was taken with %d partitions per repartition topic, the job has %d "+
				"(Cluster.Partitions cannot change: the topics keep theirs)", src.path, cp.ID(), r.partitions, plan.Partitions)
		case meta.Final:
			return nil, rescaleErrorf("%s: checkpoint %d is the final one of a run that read all its input: "+
				"rescale from savepoints the processes took as they stopped (Job.StopWithSavepoint)", src.path, cp.ID())
		}
		members = append(members, rescaleMember{src: src, cp: cp, record: r})
	}
	if len(members) == 0 {
		return nil, rescaleErrorf("empty")
	}
	first := members[0]
	byProcess := map[int]rescaleMember{}
	for _, m := range members {
		if m.record.processes != first.record.processes || m.record.gen != first.record.gen {
			return nil, rescaleErrorf("%s holds a checkpoint of %s, %s of %s: savepoints of two layouts",
				first.src.path, first.record, m.src.path, m.record)
		}
		if other, dup := byProcess[m.record.process]; dup {
			return nil, rescaleErrorf("%s and %s are both of process %d: give one savepoint of each process",
				other.src.path, m.src.path, m.record.process)
		}
		byProcess[m.record.process] = m
	}
	var missing []string
	for p := range first.record.processes {
		if _, ok := byProcess[p]; !ok {
			missing = append(missing, fmt.Sprint(p))
		}
	}
	if len(missing) > 0 {
		return nil, rescaleErrorf("no savepoint of process %s of the %d processes of the previous layout "+
			"(every old process's savepoint is needed: each holds the state of its own key groups and partitions)",
			strings.Join(missing, ", "), first.record.processes)
	}
	out := make([]rescaleMember, first.record.processes)
	for p, m := range byProcess {
		out[p] = m
	}
	return out, nil
}

// rescaleOrigin names a rescaled start in a state directory's identity:
// the savepoints (or checkpoints) it started from, whatever their order
// in Cluster.RestoreFrom.
func (j *Job) rescaleOrigin() (origin, paths string, err error) {
	var origins, ps []string
	for _, path := range j.cfg.Cluster.RestoreFrom {
		src, err := resolveRestoreFrom(path, j.cfg.Logger)
		if err != nil {
			return "", "", fmt.Errorf("%w: Cluster.RestoreFrom: %w", ErrCluster, err)
		}
		origins, ps = append(origins, src.origin), append(ps, src.path)
	}
	slices.Sort(origins)
	return "rescale of " + strings.Join(origins, ", "), strings.Join(ps, ", "), nil
}

// useRescale decides, before the job's first attempt, whether it starts
// rescaled from Cluster.RestoreFrom, as useRestoreFrom does for
// Config.RestoreFrom: only while its state directory holds no checkpoint
// (or those of the same rescaled start). The process continues the old
// process of its number, if there was one, with its identity; a process
// the old layout did not have starts a new identity.
func (j *Job) useRescale(store *snapshot.Store) error {
	origin, paths, err := j.rescaleOrigin()
	if err != nil {
		return err
	}
	switch {
	case store.MaxID() == 0:
		// NB: the checkpoints are read (and checked) before the process
		// takes an identity from them.
		members, err := j.loadRescale()
		if err != nil {
			return err
		}
		id := identity{job: newJobID(), stateDir: j.identity.stateDir, from: origin}
		if p := j.cfg.Cluster.Process; p < len(members) {
			id.job, id.run = members[p].src.job, members[p].src.run
		}
		if err := id.save(); err != nil {
			return err
		}
		j.identity = id
	case j.identity.from == origin:
		j.cfg.Logger.Info("ringflow: the state directory holds checkpoints of a rescaled start from Cluster.RestoreFrom: the process resumes from them",
			"state_dir", j.identity.stateDir)
	default:
		return rescaleErrorf("the state directory %s holds checkpoints (up to %d) of %s: "+
			"a process starts rescaled into a state directory without checkpoints only (use another Checkpoint.StateDir, "+
			"or drop Cluster.RestoreFrom to resume from the state directory)",
			j.identity.stateDir, store.MaxID(), j.identity)
	}
	j.from = &restoreSource{path: paths, origin: origin, rescale: true}
	return nil
}

// assembleRescaled reads the checkpoints of Cluster.RestoreFrom again and
// assembles the one this process restores (see the top of this file).
func (j *Job) assembleRescaled() (*snapshot.Checkpoint, error) {
	members, err := j.loadRescale()
	if err != nil {
		return nil, err
	}
	c := j.cfg.Cluster
	plan, _ := j.cut.done()
	own := plan.keyGroupsOfPartitions(plan.Owned(c.Process))
	ids := map[string]bool{}
	var id uint64
	states := map[StateRef]snapshot.StateInfo{}
	recorded := true
	for _, m := range members {
		meta := m.cp.Meta()
		for op := range meta.Parallelism {
			ids[op] = true
		}
		for _, st := range meta.States {
			states[StateRef{st.Operator, st.State}] = st
		}
		recorded = recorded && meta.StatesRecorded
		id = max(id, m.cp.ID())
	}
	var a snapshot.Assembly
	par := map[string]int{}
	for _, op := range slices.Sorted(maps.Keys(ids)) {
		global := 0 // the old subtasks of op in every process
		positions := false
		txns := 0 // the old sink subtasks this process stands in for
		for _, m := range members {
			was := m.cp.Meta().Parallelism[op]
			par[op] = max(par[op], was)
			if own.Len() > 0 {
				for _, kg := range m.cp.KeyGroups(op, own.Start, own.End-1) {
					if err := a.KeyGroup(op, kg.KeyGroup, kg.Data, kg.Deltas); err != nil {
						return nil, err
					}
				}
			}
			for _, s := range m.cp.SourcePositions(op) {
				if err := a.SourcePosition(op, global+s.Subtask, s.Data); err != nil {
					return nil, err
				}
				positions = true
			}
			global += was
			// NB: each old process's transactions go to one new process,
			// which commits them and fences their transactional ids: the
			// old process of its number, and those beyond the new layout's
			// number of processes, round robin.
			if m.record.process%c.Processes == c.Process {
				for _, s := range m.cp.SinkTxns(op) {
					if err := a.SinkTxn(op, txns, s.Data); err != nil {
						return nil, err
					}
					txns++
				}
			}
			for sub := range was {
				if len(m.cp.ChannelStates(op, sub)) > 0 {
					return nil, rescaleErrorf("%s: checkpoint %d holds in-flight data of operator %q (it was unaligned): "+
						"rescale from savepoints the processes took as they stopped (Job.StopWithSavepoint), which are aligned",
						m.src.path, m.cp.ID(), op)
				}
			}
		}
		if positions {
			par[op] = global
		}
		par[op] = max(par[op], txns, 1)
	}
	meta := snapshot.Meta{MaxParallelism: j.cfg.MaxParallelism, Parallelism: par, StatesRecorded: recorded,
		Run: j.identity.run,
		Job: clusterRecord{jobID: c.JobID, process: c.Process, processes: c.Processes, partitions: plan.Partitions,
			gen: members[0].record.gen + 1}.encode()}
	for _, r := range slices.SortedFunc(maps.Keys(states), compareRefs) {
		meta.States = append(meta.States, states[r])
	}
	cp, err := a.Checkpoint(id, meta)
	if err != nil {
		return nil, rescaleErrorf("%v", err)
	}
	return cp, nil
}

// rescaledPosition returns the position of source task t restored from
// an assembled checkpoint, whose positions are those of every old
// subtask of every old process: the source shares their splits out among
// its subtasks in every new process, as it would at a fresh start.
func rescaledPosition(cp *snapshot.Checkpoint, t *operator.Task) ([]byte, bool, error) {
	op := t.Ctx.Operator
	was, ok := cp.Meta().Parallelism[op]
	if !ok {
		return nil, false, nil
	}
	old := make([][]byte, was)
	for _, s := range cp.SourcePositions(op) {
		old[s.Subtask] = append([]byte(nil), s.Data...)
	}
	sub, par := t.Ctx.Subtask, t.Ctx.Parallelism
	if t.Ctx.Share.Parallelism > 0 {
		sub, par = t.Ctx.Share.Subtask, t.Ctx.Share.Parallelism
	}
	r, ok := t.Source.(interface {
		RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, bool, error)
	})
	var pos []byte
	var err error
	if ok {
		pos, ok, err = r.RescalePosition(sub, par, old)
	}
	if !ok {
		return nil, false, fmt.Errorf("%w: source %q has no splits to share out among the processes of another layout (it is no ringflow.SplitSource)",
			ErrCluster, op)
	}
	if err != nil {
		return nil, false, fmt.Errorf("ringflow: restore checkpoint %d rescaled: source %q: %w", cp.ID(), op, err)
	}
	return pos, true, nil
}
