package ringflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/snapshot"
)

// StateRef names a piece of state: its operator and its name within it. An
// empty State stands for a source's position or an operator's in-flight
// data.
type StateRef struct {
	Operator, State string
}

func (r StateRef) String() string {
	if r.State == "" {
		return fmt.Sprintf("operator %q (source position or in-flight data)", r.Operator)
	}
	return fmt.Sprintf("operator %q state %q", r.Operator, r.State)
}

// StateChange is a piece of state whose type differs between a checkpoint
// and the job restoring it.
type StateChange struct {
	StateRef
	// Old and New are the state's layouts in the checkpoint and in the
	// job: the kinds, sizes and field names of everything a value of its
	// type holds (not the type's name, which may change without its bytes
	// changing), as "key string, value struct{Name string; N int64}"
	// for a keyed state.
	Old, New string
}

// RestoreMismatchError says why a job cannot restore a checkpoint: state it
// would drop, and state whose type changed. It wraps ErrCheckpoint.
type RestoreMismatchError struct {
	Checkpoint uint64
	// Dropped is the state of the checkpoint the job does not declare.
	Dropped []StateRef
	// Changed is the state whose type's layout differs.
	Changed []StateChange
	// Added is the state the job declares that the checkpoint lacks (a
	// renamed operator or state shows in Dropped and Added).
	Added []StateRef

	oldFormat bool // the checkpoint is of format version 1
}

func (e *RestoreMismatchError) Error() string {
	var parts []string
	if len(e.Dropped) > 0 {
		parts = append(parts, fmt.Sprintf("the job does not declare %s, so it would be dropped (Config.AllowNonRestoredState drops it)",
			refList(e.Dropped)))
		if len(e.Added) > 0 {
			parts = append(parts, fmt.Sprintf("the job declares %s, which the checkpoint lacks (renamed?)", refList(e.Added)))
		}
		if e.oldFormat {
			parts = append(parts, "the checkpoint is of format version 1, which named a ProcessFunc's state by its order of declaration (value0, map1, ...)")
		}
	}
	for _, c := range e.Changed {
		parts = append(parts, fmt.Sprintf("%s changed type: was %s, is %s", c.StateRef, c.Old, c.New))
	}
	return fmt.Sprintf("ringflow: restore checkpoint %d: %s", e.Checkpoint, strings.Join(parts, "; "))
}

func (e *RestoreMismatchError) Unwrap() error { return ErrCheckpoint }

func refList(refs []StateRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// RestoreReport says how a restore matched the job with its checkpoint.
type RestoreReport struct {
	Checkpoint uint64
	// From is the savepoint or state directory the checkpoint came from
	// (Config.RestoreFrom); "" for the job's own state directory.
	From string
	// Added is the state the job declares that the checkpoint lacks: it
	// started empty.
	Added []StateRef
	// Dropped is the state of the checkpoint the job does not declare:
	// dropped, as Config.AllowNonRestoredState allows.
	Dropped []StateRef
}

// LastRestore reports the latest restore of the job's runs and restarts;
// its Checkpoint is 0 if the job started afresh.
func (j *Job) LastRestore() RestoreReport {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	return j.lastRestore
}

// declared returns the state every operator of p declared as it opened,
// sorted, one entry per operator and name.
func (p *physical) declared() []snapshot.StateInfo {
	seen := map[StateRef]bool{}
	var out []snapshot.StateInfo
	add := func(ctx *operator.Context) {
		for _, d := range ctx.Declared() {
			r := StateRef{ctx.Operator, d.Name}
			if !seen[r] {
				seen[r] = true
				out = append(out, snapshot.StateInfo{Operator: ctx.Operator, State: d.Name, Layout: d.Layout})
			}
		}
	}
	for _, t := range p.tasks {
		add(t.Ctx)
		for _, ctx := range t.Ctxs {
			if ctx != t.Ctx {
				add(ctx)
			}
		}
	}
	slices.SortFunc(out, func(a, b snapshot.StateInfo) int {
		return strings.Compare(a.Operator+"\x00"+a.State, b.Operator+"\x00"+b.State)
	})
	return out
}

// matchState matches the state the job declared with checkpoint cp's (see
// "State on restore" in the package doc) and returns what the restore
// adds and drops, or a *RestoreMismatchError.
func (j *Job) matchState(cp *snapshot.Checkpoint, declared []snapshot.StateInfo) (RestoreReport, error) {
	meta := cp.Meta()
	job := map[StateRef]string{}
	for _, d := range declared {
		job[StateRef{d.Operator, d.State}] = d.Layout
	}
	saved := map[StateRef]string{}
	for _, st := range meta.States {
		saved[StateRef{st.Operator, st.State}] = st.Layout
	}
	mismatch := &RestoreMismatchError{Checkpoint: cp.ID(), oldFormat: !meta.StatesRecorded}
	for id := range meta.Parallelism {
		op, state, _ := strings.Cut(id, "/")
		switch {
		case state == "" && j.byName[op] == nil:
			mismatch.Dropped = append(mismatch.Dropped, StateRef{Operator: op})
		case state != "":
			if _, ok := saved[StateRef{op, state}]; !ok {
				saved[StateRef{op, state}] = "" // format version 1: layout unknown
			}
		}
	}
	for r, layout := range saved {
		now, ok := job[r]
		switch {
		case !ok:
			mismatch.Dropped = append(mismatch.Dropped, r)
		case meta.StatesRecorded && layout != now:
			mismatch.Changed = append(mismatch.Changed, StateChange{StateRef: r, Old: layout, New: now})
		}
	}
	for r := range job {
		if _, ok := saved[r]; !ok {
			mismatch.Added = append(mismatch.Added, r)
		}
	}
	sortRefs(mismatch.Dropped)
	sortRefs(mismatch.Added)
	slices.SortFunc(mismatch.Changed, func(a, b StateChange) int { return compareRefs(a.StateRef, b.StateRef) })
	if len(mismatch.Changed) > 0 || len(mismatch.Dropped) > 0 && !j.cfg.AllowNonRestoredState {
		return RestoreReport{}, mismatch
	}
	log := j.cfg.Logger.With("checkpoint", cp.ID())
	if !meta.StatesRecorded {
		log.Info("ringflow: restored checkpoint was written by an older version, which did not record state types: types are not checked")
	}
	for _, r := range mismatch.Dropped {
		log.Info("ringflow: restore dropped state the job does not declare (AllowNonRestoredState)",
			"operator", r.Operator, "state", r.State)
	}
	for _, r := range mismatch.Added {
		log.Info("ringflow: restore found new state: it starts empty", "operator", r.Operator, "state", r.State)
	}
	return RestoreReport{Checkpoint: cp.ID(), Added: mismatch.Added, Dropped: mismatch.Dropped}, nil
}

func compareRefs(a, b StateRef) int {
	if c := strings.Compare(a.Operator, b.Operator); c != 0 {
		return c
	}
	return strings.Compare(a.State, b.State)
}

func sortRefs(refs []StateRef) { slices.SortFunc(refs, compareRefs) }

// permanent reports whether a failed attempt would fail the same way
// again, so that restarting is pointless.
func permanent(err error) bool {
	var mismatch *RestoreMismatchError
	return errors.Is(err, ErrGraph) || errors.Is(err, ErrConfig) || errors.Is(err, ErrFinished) ||
		errors.Is(err, ErrSinkOwned) || errors.Is(err, ErrRestoreFrom) || errors.Is(err, ErrCluster) ||
		errors.As(err, &mismatch)
}
