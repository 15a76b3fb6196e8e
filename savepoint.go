package ringflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/sched"
	"github.com/ringflow/ringflow/snapshot"
)

// ErrNotRunning is returned by Job.Savepoint, Job.Stop and
// Job.StopWithSavepoint once Run has returned.
var ErrNotRunning = errors.New("ringflow: the job is not running")

// ErrRestoreFrom is wrapped by every error about what Config.RestoreFrom
// names: it is not a savepoint nor a state directory, it is damaged, or the
// job's state directory holds checkpoints of another start.
var ErrRestoreFrom = errors.New("ringflow: cannot restore Config.RestoreFrom")

// Savepoint takes a savepoint of the running job and returns its
// directory, once it is written: a new directory under
// CheckpointConfig.SavepointDir, named after the job and the checkpoint.
// The job goes on. If checkpoints are in flight, the savepoint's waits for
// them to end; periodic checkpoints wait for it. Called before Run has
// started, Savepoint waits for it. If the savepoint's checkpoint fails, or
// the job fails or ends before it completes, Savepoint returns the error;
// if ctx ends first, ctx.Err() (a savepoint already under way is still
// written).
func (j *Job) Savepoint(ctx context.Context) (string, error) {
	if err := j.canSavepoint("Savepoint"); err != nil {
		return "", err
	}
	r := &savepointRequest{done: make(chan struct{})}
	if err := j.ctl.request(r, false); err != nil {
		return "", err
	}
	select {
	case <-r.done:
		return r.path, r.err
	case <-ctx.Done():
		j.ctl.withdraw(r)
		return "", ctx.Err()
	}
}

// StopWithSavepoint stops the job as Stop does, with a savepoint: the stop
// checkpoint, written out as Savepoint writes one. It returns the
// savepoint's directory once Run has returned. If the stop checkpoint
// fails, the job tries again with another (as many times as
// CheckpointConfig.TolerableFailures allows: beyond that the job fails).
// If the checkpoint completes but the savepoint cannot be written, the job
// still stops, its state kept in its state directory (which
// Config.RestoreFrom also takes), and StopWithSavepoint returns the error.
func (j *Job) StopWithSavepoint(ctx context.Context) (string, error) {
	if err := j.canSavepoint("StopWithSavepoint"); err != nil {
		return "", err
	}
	r := &savepointRequest{done: make(chan struct{}), stop: true}
	if err := j.ctl.request(r, true); err != nil {
		return "", err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	runErr, err := j.ctl.wait(ctx)
	if err != nil {
		return r.path, err
	}
	if r.err != nil {
		return r.path, r.err
	}
	if runErr != nil {
		return r.path, fmt.Errorf("ringflow: the savepoint is written, but the job failed as it stopped: %w", runErr)
	}
	return r.path, nil
}

// Stop stops the job and waits for Run to return: the sources stop
// reading, the job takes a stop checkpoint, aligned, and once it is
// complete every transactional sink commits and every task ends (see
// "Savepoints and stopping" in the package doc), and Run returns nil. A run
// on the same state directory resumes from that checkpoint. If the job
// ends otherwise first (it fails, or reads all its input), Stop returns
// what Run returns. Without checkpoints the job has nothing to take a
// stop checkpoint with: it stops at once, and what its transactional
// sinks have not committed (they commit at the end of input) is dropped.
// Called before Run has started, Stop makes Run stop as soon as it has
// started. If ctx ends first, Stop returns ctx.Err() and the job goes on
// stopping.
func (j *Job) Stop(ctx context.Context) error {
	if err := j.ctl.request(nil, true); err != nil {
		return err
	}
	runErr, err := j.ctl.wait(ctx)
	if err != nil {
		return err
	}
	return runErr
}

// canSavepoint reports why the job cannot take savepoints, if it cannot.
func (j *Job) canSavepoint(what string) error {
	switch ck := j.cfg.Checkpoint; {
	case !ck.enabled():
		return &ConfigError{Field: "Checkpoint.Interval", Problem: what + " takes a checkpoint: it needs checkpoints on (Checkpoint.Interval and StateDir)"}
	case ck.SavepointDir == "":
		return &ConfigError{Field: "Checkpoint.SavepointDir", Problem: what + " needs a directory to write the savepoint into"}
	}
	return nil
}

// validateSavepoints reports the problems of the Config's savepoint and
// stop settings.
func (c Config) validateSavepoints() []error {
	var errs []error
	if c.StopOnCancel && !c.Checkpoint.enabled() {
		errs = append(errs, configErrorf("StopOnCancel", "a stop on cancellation takes a final checkpoint: it needs checkpoints (set Checkpoint.Interval and StateDir)"))
	}
	if c.RestoreFrom != "" && c.Checkpoint.StateDir != "" && samePath(c.RestoreFrom, c.Checkpoint.StateDir) {
		errs = append(errs, configErrorf("RestoreFrom", "%q is the job's own state directory, from which it resumes anyway (drop RestoreFrom)", c.RestoreFrom))
	}
	return errs
}

func samePath(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// savepointRequest is one caller of Savepoint or StopWithSavepoint,
// waiting for its savepoint.
type savepointRequest struct {
	stop bool // StopWithSavepoint's
	done chan struct{}
	// path and err are set before done is closed.
	path string
	err  error
	once sync.Once
}

func (r *savepointRequest) resolve(path string, err error) {
	r.once.Do(func() {
		r.path, r.err = path, err
		close(r.done)
	})
}

// control holds what Savepoint, Stop and StopWithSavepoint asked of the job
// until its coordinator serves it: they may be called before Run, between
// its attempts, and while a restart takes over.
type control struct {
	mu sync.Mutex
	// coord is the running attempt's coordinator, pool its pool when it has
	// no checkpoints; both nil between attempts.
	coord *coordinator
	pool  *sched.Pool
	// stop says the job is to stop; stopping are the StopWithSavepoint
	// callers it serves; savepoints the Savepoint callers not yet taken by
	// a checkpoint.
	stop       bool
	stopping   []*savepointRequest
	savepoints []*savepointRequest
	ended      bool  // Run has returned
	runErr     error // what it returned
	done       chan struct{}
}

// doneLocked returns the channel closed when Run returns.
func (c *control) doneLocked() chan struct{} {
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

// request records r (nil: a plain stop), a stop if stop is set, and pokes
// the running attempt.
func (c *control) request(r *savepointRequest, stop bool) error {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return ErrNotRunning
	}
	c.stop = c.stop || stop
	switch {
	case r == nil:
	case r.stop:
		c.stopping = append(c.stopping, r)
	default:
		c.savepoints = append(c.savepoints, r)
	}
	coord, pool := c.coord, c.pool
	c.mu.Unlock()
	if coord != nil {
		signal(coord.poke)
	} else if pool != nil && stop {
		pool.Stop()
	}
	return nil
}

// withdraw drops r if no checkpoint has taken it yet.
func (c *control) withdraw(r *savepointRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.savepoints {
		if x == r {
			c.savepoints = append(c.savepoints[:i], c.savepoints[i+1:]...)
			return
		}
	}
}

// wait waits for Run to return, and returns what it returned; or ctx's
// error.
func (c *control) wait(ctx context.Context) (runErr, err error) {
	c.mu.Lock()
	done := c.doneLocked()
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.runErr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// attach makes coord (or, without checkpoints, pool) the one requests go
// to; nil, nil detaches them when an attempt ends. A stop asked for
// before stops a pool without checkpoints at once.
func (c *control) attach(coord *coordinator, pool *sched.Pool) {
	c.mu.Lock()
	c.coord, c.pool = coord, pool
	stop := c.stop
	c.mu.Unlock()
	if stop && coord == nil && pool != nil {
		pool.Stop()
	}
}

// wants says what the next checkpoint should be for: a stop, a savepoint,
// or neither. NB: called under the coordinator's lock.
func (c *control) wants() operator.TriggerKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stop:
		return operator.TriggerStop
	case len(c.savepoints) > 0:
		return operator.TriggerSavepoint
	}
	return operator.TriggerPeriodic
}

// take returns the savepoint requests a checkpoint of kind k serves: the
// Savepoint callers, taken off the queue, and for a stop or final
// checkpoint the StopWithSavepoint callers, which stay queued until one
// is written (a failed stop checkpoint is tried again).
func (c *control) take(k operator.TriggerKind) []*savepointRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.savepoints
	c.savepoints = nil
	if k == operator.TriggerStop || k == operator.TriggerFinal {
		out = append(out, c.stopping...)
	}
	return out
}

// served drops the StopWithSavepoint callers among rs from the queue.
func (c *control) served(rs []*savepointRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.stopping[:0]
	for _, r := range c.stopping {
		select {
		case <-r.done:
		default:
			kept = append(kept, r)
		}
	}
	c.stopping = kept
}

// end records that Run returned err: every request not served fails, and
// whoever waits for Run is told.
func (c *control) end(err error) {
	c.mu.Lock()
	c.ended, c.runErr = true, err
	c.coord, c.pool = nil, nil
	left := append(c.savepoints, c.stopping...)
	c.savepoints, c.stopping = nil, nil
	close(c.doneLocked())
	c.mu.Unlock()
	why := "it finished"
	if err != nil {
		why = err.Error()
	}
	for _, r := range left {
		r.resolve("", fmt.Errorf("%w: the job ended before the savepoint was taken: %s", ErrNotRunning, why))
	}
}

// failRequests fails the Savepoint callers among rs, which checkpoint id
// served, with err; StopWithSavepoint callers wait for the next stop
// checkpoint.
func failRequests(rs []*savepointRequest, id uint64, err error) {
	for _, r := range rs {
		if !r.stop {
			r.resolve("", fmt.Errorf("ringflow: savepoint: checkpoint %d: %w", id, err))
		}
	}
}

// savepointPath is the directory of the savepoint of checkpoint id:
// savepoint-<job>-<id>, with a random suffix if that is taken (by a job
// restored from a savepoint of this one, which goes on with its identity).
func (c *coordinator) savepointPath(id uint64) string {
	job := c.ident.job
	if len(job) > 8 {
		job = job[:8]
	}
	path := filepath.Join(c.cfg.SavepointDir, fmt.Sprintf("savepoint-%s-%d", job, id))
	if _, err := os.Stat(path); err == nil {
		path += "-" + newJobID()[:6]
	}
	return path
}

// export writes checkpoint f, pinned in the store, as a savepoint into
// path for its requests. It runs on a goroutine of its own: the coordinator's stop
// waits for it.
func (c *coordinator) export(f *inflight, path string, pin *snapshot.Pinned, err error) {
	defer c.exports.Done()
	var cp *snapshot.Checkpoint
	if err == nil {
		cp, err = pin.Read()
		pin.Release()
	}
	start := time.Now()
	var info snapshot.SavepointInfo
	if err == nil {
		info, err = snapshot.WriteSavepoint(path, cp, snapshot.SavepointInfo{Job: c.ident.job, Run: c.ident.run})
	}
	if err != nil {
		err = fmt.Errorf("ringflow: savepoint of checkpoint %d: %w", f.id, err)
		c.job.cfg.Logger.Error("ringflow: savepoint failed", "checkpoint", f.id, "path", path, "err", err)
		c.job.forgetSavepoint(f.id, path)
		path = ""
	} else {
		c.job.cfg.Logger.Info("ringflow: savepoint written", "checkpoint", f.id, "path", path,
			"bytes", info.Bytes, "took", time.Since(start))
	}
	for _, r := range f.savepoints {
		r.resolve(path, err)
	}
	c.job.ctl.served(f.savepoints)
}

// restoreSource is what Config.RestoreFrom names: a savepoint, or the
// state directory of a job whose latest checkpoint to restore.
type restoreSource struct {
	path      string // the savepoint's directory, or the state directory
	savepoint bool
	// origin names what the job started from in its state directory's
	// identity: "savepoint <id>" (its id survives copies) or "checkpoints
	// of job <id>".
	origin string
	// job and run are the identity of the job that took it.
	job string
	run uint64
	// rescale says the job starts from Cluster.RestoreFrom, the
	// savepoints of every process of another layout (path lists them).
	rescale bool
}

// resolveRestoreFrom finds what path names (see Config.RestoreFrom).
func resolveRestoreFrom(path string, logger *slog.Logger) (*restoreSource, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %w", ErrRestoreFrom, path, fmt.Errorf(format, args...))
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, bad("%w", err)
	}
	if !st.IsDir() {
		return nil, bad("not a directory")
	}
	if info, err := snapshot.ReadSavepointInfo(path); err == nil {
		return &restoreSource{path: path, savepoint: true, origin: "savepoint " + info.ID, job: info.Job, run: info.Run}, nil
	} else if !errors.Is(err, snapshot.ErrNotSavepoint) {
		return nil, bad("%w", err)
	}
	if b, err := os.ReadFile(filepath.Join(path, identityFile)); err == nil {
		id, ok := parseIdentity(string(b))
		if !ok {
			return nil, bad("%s is not a job identity file", identityFile)
		}
		return &restoreSource{path: path, origin: "checkpoints of job " + id.job, job: id.job, run: id.run}, nil
	}
	// A directory of savepoints: the newest.
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, bad("%w", err)
	}
	var newest *restoreSource
	var taken time.Time
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(path, e.Name())
		info, err := snapshot.ReadSavepointInfo(dir)
		if errors.Is(err, snapshot.ErrNotSavepoint) {
			continue
		}
		if err != nil {
			return nil, bad("%w", err)
		}
		if newest == nil || info.Taken.After(taken) {
			newest = &restoreSource{path: dir, savepoint: true, origin: "savepoint " + info.ID, job: info.Job, run: info.Run}
			taken = info.Taken
		}
	}
	if newest == nil {
		return nil, bad("neither a savepoint (it has no %s file), a directory of savepoints, nor a job's state directory (it has no %s file)",
			snapshot.SavepointFile, identityFile)
	}
	logger.Info("ringflow: RestoreFrom is a directory of savepoints: restoring the newest", "savepoint", newest.path)
	return newest, nil
}

// load reads and verifies the checkpoint src names.
func (src *restoreSource) load(j *Job) (*snapshot.Checkpoint, error) {
	var cp *snapshot.Checkpoint
	var err error
	if src.savepoint {
		cp, _, err = snapshot.ReadSavepoint(src.path)
	} else {
		cp, err = snapshot.ReadCheckpoint(src.path, 0, snapshot.Options{Logger: j.cfg.Logger})
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrRestoreFrom, src.path, err)
	}
	if m := cp.Meta().MaxParallelism; m != j.cfg.MaxParallelism {
		return nil, fmt.Errorf("%w %s: checkpoint %d was taken with max parallelism %d; the job has %d",
			ErrRestoreFrom, src.path, cp.ID(), m, j.cfg.MaxParallelism)
	}
	return cp, nil
}

// useRestoreFrom decides, before the job's first attempt, whether it
// restores Config.RestoreFrom (see "Savepoints and stopping" in the
// package doc); store is the job's own checkpoint store, nil without
// checkpoints.
func (j *Job) useRestoreFrom(store *snapshot.Store) error {
	src, err := resolveRestoreFrom(j.cfg.RestoreFrom, j.cfg.Logger)
	if err != nil {
		return err
	}
	switch {
	case store == nil:
		j.identity.job, j.identity.run = src.job, src.run
	case store.MaxID() == 0:
		// NB: a state directory that never held a checkpoint: whatever
		// its identity file says, nothing in it depends on it.
		id := identity{job: src.job, run: src.run, stateDir: j.identity.stateDir, from: src.origin}
		if err := id.save(); err != nil {
			return err
		}
		j.identity = id
	case j.identity.from == src.origin:
		j.cfg.Logger.Info("ringflow: the state directory holds checkpoints of a start from RestoreFrom: the job resumes from them",
			"restore_from", src.path, "state_dir", j.identity.stateDir)
	default:
		was := "from scratch"
		if j.identity.from != "" {
			was = "from " + j.identity.from
		}
		return fmt.Errorf("%w %s: the state directory %s holds checkpoints (up to %d) of %s, which started %s: "+
			"a job restores RestoreFrom into a state directory without checkpoints only (use another Checkpoint.StateDir, "+
			"or drop RestoreFrom to resume from the state directory)",
			ErrRestoreFrom, src.path, j.identity.stateDir, store.MaxID(), j.identity, was)
	}
	j.from = src
	return nil
}

// stopOnCancel makes the cancellation of ctx stop the job as Stop does
// (Config.StopOnCancel): it returns the context the attempt's pool runs
// with, which outlives ctx, and a function to call when the attempt ends.
// The stop is bounded by Checkpoint.Timeout: after that the attempt's
// context is cancelled (cancel) and pool fails, with ctx's error.
func (j *Job) stopOnCancel(ctx context.Context, pool *sched.Pool, cancel context.CancelCauseFunc) (context.Context, func()) {
	var mu sync.Mutex
	var bound *time.Timer
	ended := false
	unwatch := context.AfterFunc(ctx, func() {
		j.ctl.request(nil, true)
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		timeout := j.cfg.Checkpoint.Timeout
		bound = time.AfterFunc(timeout, func() {
			err := fmt.Errorf("%w: the final checkpoint did not complete within Checkpoint.Timeout (%v) of the cancellation",
				ctx.Err(), timeout)
			cancel(err)
			pool.Fail(err)
		})
	})
	return context.WithoutCancel(ctx), func() {
		unwatch()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if bound != nil {
			bound.Stop()
		}
	}
}
