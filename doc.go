// Package ringflow is an embeddable, exactly-once dataflow engine for one
// machine.
//
// A job is a graph of typed streams built with functions (Go methods cannot
// take type parameters): Source, Map, Filter, FlatMap, KeyBy, Union,
// Rebalance, Reduce, Aggregate, MapWithState, Process, Window, WindowJoin,
// Sink and TxnSink (FileSink, FileSinkOf and FileSinkEncoded with JSONLines
// write files transactionally). Options that fit only some operators have
// types of their own (Option, WindowOption, SinkOption), so giving one to
// an operator it does not fit does not compile. Run checks the graph, lays
// it out as tasks — forward edges of equal parallelism chained into one
// task, every other edge one single-producer ring per pair of subtasks —
// and runs the tasks on worker threads pinned to the process's CPUs
// (package sched).
//
// A job keeps to what its Config gives it on the host: its workers pin to
// Config.CPUs (default: the process's affinity mask), one per CPU but one
// P of GOMAXPROCS left spare for checkpoints, the garbage collector and
// the rest of the program; Run changes GOMAXPROCS only if
// Config.RaiseGOMAXPROCS lets it. ringflow runs on Linux only: elsewhere it
// fails to build, with the error "undefined: ringflow_runs_on_Linux_only".
//
// A keyed process function (ProcessFunc, run by Process) is written
// against this package alone: its KeyedScope declares named state
// (NewValueState, NewMapState, NewListState), its KeyedContext gives the
// key, the timestamp, the watermark and timers, and OutputTag.Emit sends
// records to side outputs of their own types, which SideOutput turns into
// streams (a window's late records too: LateOutput). User code that fails
// returns an error — process functions, sources and sinks alike — and
// fails its task, naming the operator and subtask; the job then restarts
// as Config.Restart says. Code that may block (a Sink's function, a
// FromBlocking reader) gets a context that is done when the attempt ends.
//
// Push feeds a job from a service: its handle's Push blocks while the job
// is backpressured, numbers the records it takes, reports as checkpoints
// complete which of them are durable (so the service can drop them), and
// after a restore says where to push again from.
//
// With Config.Checkpoint.Interval set, Run takes asynchronous barrier
// snapshots in the manner of Apache Flink: barriers flow in-band through
// the rings; tasks align them (or, with an alignment timeout, switch to
// unaligned checkpoints that record in-flight data); keyed state is frozen
// copy-on-write and written to a Pebble store in the background; a
// checkpoint exists once its manifest is durable. A job started on a state
// directory resumes from its latest complete checkpoint, a failing task
// makes the job restore it in place (RestartStrategy), and transactional
// sinks commit output only when a checkpoint covering it completes, so the
// committed output holds every record exactly once.
//
// Under backpressure each ring fills to its capacity, and a barrier waits
// behind all of it at every hop. With Config.Debloat set, each task bounds
// its input rings to what it drains in that much of its busy time,
// measured as it runs (package debloat): aligned barriers then wait about
// that long per hop, and unaligned checkpoints persist as little data.
//
// A job is stopped with Job.Stop: its sources stop reading, it takes an
// aligned stop checkpoint, and once that is complete every transactional
// sink commits and every task ends, with nothing half-committed and
// nothing in flight; the next run on the state directory resumes from it.
// Config.StopOnCancel makes a cancelled context stop the job so too (by
// default it stops at once, leaving what its sinks pre-committed to the
// next run). A savepoint (Job.Savepoint, Job.StopWithSavepoint) is such an
// aligned checkpoint written out into a directory of its own under
// CheckpointConfig.SavepointDir: full and self-contained, so it can be
// copied anywhere, and checked when it is read. Config.RestoreFrom starts
// a job from a savepoint, or from another job's state directory, possibly
// changed and at another parallelism: keyed state is redistributed by key
// group, and sources too when their input is split (operator.SplitSource).
// See "Savepoints and stopping" in savepoint.go.
//
// A job may change between runs on one state directory. Its state is kept
// by name — each operator's name, and each state's name within it — with
// the layout of its type, and a restore matches the job's state with the
// checkpoint's by name: state the job no longer declares, or whose type
// changed, fails the restore with a *RestoreMismatchError
// (Config.AllowNonRestoredState drops state on purpose), and new state
// starts empty (LastRestore reports it). So an operator's name is its identity across runs:
// rename it only together with its state.
//
// A job reports through what its Config is given, never through the global
// log package or stderr: every line the engine and the packages under it
// log goes to Config.Logger, a *slog.Logger, as a record with attributes
// (checkpoint, operator, subtask, err); and Config.Events, an
// EventListener, is told of checkpoints triggered, completed, failed and
// aborted, of restores, task failures, restarts and the end of the job,
// on a goroutine of its own, in order (see EventListener).
//
// Job.Graph, Job.Metrics and Job.Checkpoints tell what a job is and what it
// does; NewCollector exposes them to Prometheus, and StatusHandler serves
// them as status pages: the job graph coloured by where its time goes, the
// checkpoint history, and each checkpoint's barrier timeline.
//
// See example_test.go for runnable examples, and the package docs of ring,
// sched, internal/operator, align, debloat, snapshot and keygroups for each
// part's design.
package ringflow
