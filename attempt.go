package ringflow

import (
	"context"

	"github.com/ringflow/ringflow/internal/operator"
)

// setAttempt gives every operator instance of p the context of the attempt
// (operator.Context.Attempt), carrying the instance's TaskInfo, and every
// task a hook that cancels it when the task fails, so that user code
// blocked in another task returns.
func (p *physical) setAttempt(ctx context.Context, cancel context.CancelCauseFunc) {
	id := p.job.identity
	with := func(c *operator.Context) context.Context {
		return context.WithValue(ctx, taskInfoKey{}, TaskInfo{
			Job: id.job, Run: id.run,
			Operator: c.Operator, Subtask: c.Subtask, Parallelism: c.Parallelism,
			Checkpoints: c.Checkpoints,
		})
	}
	// NB: the pool records the failure before the attempt's context ends:
	// user code that returns when it ends fails its own task with the
	// context's error, and Run reports the failure the pool recorded first.
	fail := func(err error) {
		p.pool.Fail(err)
		cancel(err)
	}
	for _, t := range p.tasks {
		t.Ctx.Attempt = with(t.Ctx)
		for _, c := range t.Ctxs {
			c.Attempt = with(c)
		}
		t.OnFail = fail
	}
}

// TaskInfo names the operator instance that user code runs in: the
// contexts the engine gives to user functions (a Sink's function, a
// TwoPhaseSink's Open, Recover, Commit and durable function) carry it, and
// TaskInfoFrom reads it. A connector
// derives from it the names it leaves in an external system, such as a
// Kafka transactional id or a PostgreSQL prepared transaction's, so that a
// restarted run finds what an earlier one left behind.
type TaskInfo struct {
	// Job is the job's id: kept in its state directory's JOB file, and so
	// the same across restarts and runs that resume the directory; random
	// for each run of a job without checkpoints.
	Job string
	// Run numbers the job's runs on its state directory from 0 (see
	// Config.RerunFinished); 0 without checkpoints.
	Run uint64
	// Operator is the operator's name, unique in the job.
	Operator string
	// Subtask is the instance's index, in [0, Parallelism).
	Subtask, Parallelism int
	// Checkpoints says whether the job takes checkpoints: a sink with
	// no checkpoint to commit at chooses its guarantee by it.
	Checkpoints bool
}

type taskInfoKey struct{}

// TaskInfoFrom returns the TaskInfo that ctx carries, and whether it carries
// one: contexts the engine gives to user code do.
func TaskInfoFrom(ctx context.Context) (TaskInfo, bool) {
	ti, ok := ctx.Value(taskInfoKey{}).(TaskInfo)
	return ti, ok
}
