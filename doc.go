// Package ringflow is an embeddable, exactly-once dataflow engine for one
// machine.
//
// A job is a graph of typed streams built with functions (Go methods cannot
// take type parameters): Source, Map, Filter, FlatMap, KeyBy, Union,
// Rebalance, Reduce, Aggregate, MapWithState, Process, Window, WindowJoin,
// Iterate, Sink and TxnSink (FileSink, FileSinkOf and FileSinkEncoded with
// JSONLines write files transactionally; packages postgres and kafka hold
// connectors). MapPtr, FilterPtr and FlatMapPtr give their function a
// pointer to each record rather than a copy, which pays for records of
// more than a few words, as an AggregateFunc that implements AddPtrFunc
// has records folded into its accumulators in place; MapBatches hands it
// whole batches, and KeyByBatch and WatermarkStrategy.Timestamps take the
// batch forms of a key and a timestamp function, one call per batch.
// Options that
// fit only some operators have types of their own (Option, WindowOption,
// SinkOption), so giving one to an operator it does not fit does not
// compile. Run checks the graph, lays
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
// FromBlocking reader, a TwoPhaseSink's Open, Recover, Commit and durable
// function) gets a context that is done when the attempt ends; the
// context names the job, run, operator and subtask (TaskInfoFrom), from
// which a connector names what it leaves in an external system.
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
// checkpoint exists once its manifest is durable. The freeze — a
// snapshot's synchronous part, the one stop in a task's processing —
// runs with its thread raised to the real-time class where the process
// may use it (CheckpointConfig.NoRaise), so that the kernel does not hand
// its core to another thread in the middle of it. A job started on a state
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
// group, and sources too when their input is split (SplitSource). See
// [Savepoints and stopping].
//
// A job may change between runs on one state directory. Its state is kept
// by name — each operator's name, and each state's name within it — with
// the layout of its type, and a restore matches the job's state with the
// checkpoint's by name: state the job no longer declares, or whose type
// changed, fails the restore with a *RestoreMismatchError
// (Config.AllowNonRestoredState drops state on purpose), and new state
// starts empty (LastRestore reports it). So an operator's name is its
// identity across runs: rename it only together with its state. See
// [State on restore].
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
//
// # A keyed process function
//
// A ProcessFunc keeps named state per key and sets timers. This one counts
// each user's clicks into visits, a visit ending 30 minutes of event time
// after its last click:
//
//	type visits struct {
//		clicks *ringflow.ValueState[string, int64] // the open visit's clicks
//		last   *ringflow.ValueState[string, int64] // the time of its last click
//	}
//
//	const gapMs = 30 * 60 * 1000
//
//	func (v *visits) Open(s *ringflow.KeyedScope[string]) error {
//		v.clicks = ringflow.NewValueState[string, int64](s, "clicks")
//		v.last = ringflow.NewValueState[string, int64](s, "last")
//		return nil
//	}
//
//	func (v *visits) Process(ctx *ringflow.KeyedContext[string], c Click, out *ringflow.Collector[Visit]) error {
//		n, _ := v.clicks.Value()
//		v.clicks.Update(n + 1)
//		v.last.Update(ctx.Timestamp())
//		ctx.RegisterEventTimer(ctx.Timestamp() + gapMs)
//		return nil
//	}
//
//	func (v *visits) OnTimer(ctx *ringflow.KeyedContext[string], ts int64, _ ringflow.TimeDomain, out *ringflow.Collector[Visit]) error {
//		if last, _ := v.last.Value(); ts != last+gapMs {
//			return nil // a later click moved the visit's end
//		}
//		n, _ := v.clicks.Value()
//		out.Emit(Visit{User: ctx.Key(), Clicks: n})
//		v.clicks.Clear()
//		v.last.Clear()
//		return nil
//	}
//
// The job reads clicks with event time, keys them by user, runs one visits
// per subtask and writes the visits transactionally:
//
//	job := ringflow.NewJob(ringflow.Config{
//		Parallelism: 4,
//		Checkpoint: ringflow.CheckpointConfig{
//			Interval:     10 * time.Second,
//			StateDir:     "/var/lib/clicks/state",
//			SavepointDir: "/var/lib/clicks/savepoints",
//		},
//		Restart:     ringflow.RestartStrategy{Attempts: 3, Delay: time.Second},
//		RestoreFrom: restoreFrom, // "" unless the job starts from a savepoint
//	})
//	clicks := ringflow.SourceWithEventTime(job, "clicks", newClickSource,
//		ringflow.WatermarkStrategy[Click]{
//			Timestamp:      func(c Click) int64 { return c.TimeMs },
//			OutOfOrderness: 5 * time.Second,
//		})
//	byUser := ringflow.KeyBy(clicks, func(c Click) string { return c.User })
//	visited := ringflow.Process(byUser, "visits",
//		func() ringflow.ProcessFunc[string, Click, Visit] { return &visits{} })
//	ringflow.TxnSink(visited, "visits-out",
//		ringflow.FileSinkEncoded("/var/lib/clicks/out", ringflow.FileSinkOptions{}, ringflow.JSONLines[Visit]()))
//	err := job.Run(ctx)
//
// newClickSource is a NewSource: it makes each subtask's SourceFunc, a
// replayable reader whose Position the checkpoints keep.
//
// # Checkpoints, savepoints and restores
//
// With Checkpoint.Interval and StateDir set, the job above checkpoints its
// state (the visits' counts and timers, the sources' positions, the sink's
// pre-committed transactions) every 10 seconds; its file sink's output
// appears as checkpoints complete. When a task fails — visits returns an
// error or panics, a source fails to read — Run restores the latest
// checkpoint in place, up to three times; after a crash, running the job
// again on its StateDir resumes from that checkpoint. Config.Events and
// Job.Checkpoints report each checkpoint (CheckpointStats).
//
// While Run runs, another goroutine takes a savepoint with
//
//	dir, err := job.Savepoint(ctx) // the job goes on
//
// or stops the job with one (Run then returns nil) with
//
//	dir, err := job.StopWithSavepoint(ctx)
//
// Either returns the savepoint's directory, under SavepointDir. A job
// started with Config.RestoreFrom set to that directory, on an empty
// StateDir, continues from it, also after its code changed (an operator
// added, a state added or removed, another Parallelism: keyed state is
// redistributed, and sources too if they are SplitSources) as long as the
// state it keeps has its names and types; see [State on restore].
// Job.LastRestore says what it restored and what started empty.
//
// # Iterations
//
// Iterate adds a loop: its body is built on the stream that enters the
// loop each round, and returns what goes round again and what leaves.
// The records entering the loop are those of Iterate's input; each one
// the body sends back enters again at the loop's head, with its
// timestamp, as if it had come from the input (on whichever head subtask
// takes it: key it again inside the body if the body is keyed); what the
// body sends out is Iterate's result. A record goes round as often as the
// body sends it back, and the body decides when to stop (a round counter
// in the record, a keyed state that stops improving).
//
//	out := ringflow.Iterate(in, "hops", func(in ringflow.Stream[hop]) (ringflow.Stream[hop], ringflow.Stream[hop]) {
//		next := ringflow.Map(in, "step", func(h hop) hop { h.Round++; return h })
//		return ringflow.Filter(next, "again", func(h hop) bool { return h.Round < 8 }),
//			ringflow.Filter(next, "done", func(h hop) bool { return h.Round == 8 })
//	})
//
// The loop is a head, the first operator of its task, and a tail, the
// operator named name+".back" that takes what the body sends back. The
// back edge from the tails to the heads is no ring but a queue at each
// head, one per tail subtask: a tail never waits on it, so a loop does not
// deadlock on its own backpressure, and the head feeds records back while
// its output has room. It is bounded by the head: while more than a few
// thousand fed-back records wait at a head (operator.LoopBacklogMax) it
// reads no input, so what waits is at most what the loop held when it
// stopped admitting input (its rings and partial frames) times what one
// round sends back per record, plus that limit.
//
// A job with a loop needs exactly-once checkpoints (Config.Checkpoint,
// Mode ExactlyOnce), which follow the asynchronous barrier snapshot
// algorithm for cyclic graphs (Carbone et al. 2015). The head aligns a
// checkpoint's barriers on its input, snapshots, and sends the barrier
// into the body; the tail, at its own snapshot, sends a marker back
// behind what it fed back before. Between its snapshot and the marker of
// every tail subtask the head logs each record it takes from the back
// edge — the records in transit on the loop at the checkpoint — and its
// part of the checkpoint is complete only when the last marker is back
// (so a checkpoint of a busy loop takes at least one round of it). The
// log is stored as the head's state and, on restore, fed into the loop
// before any new input. SubtaskCheckpointStats.LoopRecords says how many
// records a head logged.
//
// Unaligned checkpoints (Unaligned, AlignmentTimeout) work as well: the
// back edge is never part of the alignment, so the head's snapshot,
// aligned or not, opens the log, and a body subtask's unaligned snapshot
// stores its channels' in-flight data as usual. The two never overlap: a
// record fed back before a tail's snapshot is in the head's log (taken
// after the head's snapshot) or in the snapshot's state (taken before); one
// still in a ring in front of the tail at its snapshot is that tail's
// channel state, replayed into the tail, which feeds it back again after
// the restore.
//
// A bounded job whose sources have ended finishes when its loops are
// quiescent: no record in flight on any loop, and no timer pending in any
// loop's body (its operators on a path from the head to the tail). Its
// final checkpoint (aligned, as always) doubles as the probe: each head
// says how many records it logged, and how many timers the subtasks of
// its body held pending at their snapshots (they tell the loop before
// they send the barrier on, so the head has every count once the markers
// are back); SubtaskCheckpointStats.LoopTimers shows the count. If a head
// logged a record, something was still going round: the checkpoint is
// kept as an ordinary one, and another final checkpoint follows at once.
// If none did but a timer was pending, the next final checkpoint waits
// until the earliest pending processing-time timer is due. Once one finds
// every log empty and no timer pending, no record was in a body when the
// barrier went through it, none can enter, no timer can emit one, and the
// job ends after that checkpoint. A loop of d rounds thus ends after
// about d checkpoints of it.
//
// Event-time timers are no obstacle: the last watermark, which the sources
// send at the end of their input, reaches every operator before the final
// checkpoint and fires them; a keyed operator (Process) fires a timer
// registered after it — by a record going round — once the batch that
// registered it is processed, since no watermark follows the last. What
// they emit goes round before the loop is quiescent. Processing-time
// timers in a body are waited for, where Flink fires none at the end of
// input: a record one emits may go round again, and a job that ended
// before it fired would lose it. A body that always holds a
// processing-time timer, one that registers the next from OnTimer, keeps
// its job running, as an unbounded source does; delete it once the key's
// work is done. Timers outside loop bodies are not waited for. Event time
// in a loop follows its input only: a fed-back record is late for windows
// its input's watermark has passed.
//
// Loops nest: a body may hold an iteration of its own, whose head aligns
// the outer loop's barriers on its input like any operator, and whose
// operators are in both bodies. The job ends when every loop is quiescent
// at one final checkpoint.
//
// # Savepoints and stopping
//
// A savepoint is a checkpoint taken on demand (Job.Savepoint), aligned
// whatever the job's checkpoint settings (its barriers are never
// overtaken, so it holds no in-flight data), and written out, once it is
// complete, into a directory of its own under CheckpointConfig.SavepointDir:
// one file (snapshot.SavepointFile) that holds every byte of the
// checkpoint, also the bytes that incremental checkpoints before it wrote,
// so the directory can be copied or moved anywhere and restored there. The
// file's header and every entry carry checksums, checked when it is read:
// a damaged or truncated savepoint fails the restore, saying what is
// wrong. (Flink's savepoints are full and self-contained too; see
// package snapshot for the format.) The checkpoint is also one of the job's
// own checkpoints: its transactional sinks commit with it. (In the
// at-least-once mode, CheckpointConfig.Mode, whose barriers never block an
// input, a savepoint is at least once too, as every checkpoint; a stop
// checkpoint is exact either way, since nothing follows its barriers.)
//
// Job.Stop ends a job with a stop checkpoint: its sources read nothing
// after their part of it, its barriers go aligned, and once it is complete
// every transactional sink commits what it covers and every task ends
// where it is, without ending its input (no window fires, and its state
// stays in the checkpoint, from which the next run resumes). Nothing is
// left half-committed, and nothing in flight. Job.StopWithSavepoint does
// the same, and writes that checkpoint out as a savepoint. With
// Config.StopOnCancel, cancelling Run's context stops the job so too.
//
// A job started with Config.RestoreFrom restores a savepoint or another
// job's latest checkpoint, at any parallelism: keyed state is
// redistributed by key group, and state is matched by name (see [State on
// restore]), so a job changed since the savepoint restores it as a changed
// job restores its own checkpoints. A job so started takes the identity
// (job id and run) of the job that took the savepoint, so that its file
// sinks go on with that job's output; and its state directory records
// which savepoint it started from. Then:
//
//	its state directory holds           Run
//	no checkpoint                       restores RestoreFrom
//	checkpoints of a start from it      resumes from its latest checkpoint (after a
//	                                    crash, say); RestoreFrom is not read
//	any other checkpoint                fails with ErrRestoreFrom: the directory
//	                                    belongs to another start
//
// so that running one command line again after a crash resumes, and
// nothing is silently taken instead of what was asked for. Restoring one
// savepoint into two jobs that write one sink directory mixes their output,
// as it would in Flink: restore a copy of the output with each.
//
// # State on restore
//
// A checkpoint records, besides the state itself, every piece of state the
// job declared when it was taken: its operator's name, its own name and
// the layout of its type (StateChange describes layouts). Before a job
// restores a checkpoint, once its operators have opened and declared their
// state, it matches the two, by name (as Flink matches operator ids and
// state names):
//
//	in the checkpoint, not declared by the job   fails the restore: the state would be dropped
//	                                             (Config.AllowNonRestoredState drops it, and logs it)
//	declared by both, with different layouts     fails the restore, naming both layouts
//	declared by the job, not in the checkpoint   starts empty (a new operator or state), logged
//
// A source's position and the in-flight data of an unaligned checkpoint
// belong to their operator: they too fail the restore if the job no longer
// has it. Checkpoints of format version 1 did not record declarations:
// their state is matched by name only (and only the state that had
// entries). The match runs once per restore, never per record.
//
// # Distributed jobs
//
// When a job outgrows one machine it runs as N processes of one program,
// each of them the same job with Config.Cluster set, as Kafka Streams runs
// an application: Run cuts the graph at every keyed exchange (every hash
// edge, KeyBy) into sub-topologies, joins them through one repartition
// topic per cut, and every process runs every sub-topology for the
// partitions it owns. Between two cuts a process runs the job as it runs
// any job, over rings; Kafka is the only exchange, and the log, between
// processes. Job.ClusterPlan says how a job is cut:
//
//	sub-topology 0: clicks, valid
//	  writes clicks-rp0-valid-per-user
//	sub-topology 1: per-user, out
//	  reads  clicks-rp0-valid-per-user
//	topic clicks-rp0-valid-per-user: valid -> per-user, written by ..., read by ...
//	process 0: partitions [0,4), key groups [0,43)
//	process 1: partitions [4,8), key groups [43,86)
//	process 2: partitions [8,12), key groups [86,128)
//
// The plan. A cut edge from → to becomes a sink after from (the topic's
// writer, chained to it) and a source before to (its reader), which feeds
// to over a hash edge as before. Every repartition topic has
// Cluster.Partitions partitions; partition p carries the contiguous range
// of key groups keygroups.RangeOf(p, Partitions, MaxParallelism), so a
// record goes to the partition of its key group, and process i owns the
// partitions keygroups.RangeOf(i, Processes, Partitions): a contiguous
// range of key groups, whose keyed state it holds. Sources that are not
// readers (a Kafka input topic, a generator) open as subtask
// i·parallelism + s of Processes·parallelism, so the processes share
// their input out between them as subtasks of one job would.
//
// Membership is static. Process i of N is told its number; nothing
// rebalances. A process that dies leaves its partitions unread until a
// process i starts again on i's state directory, which takes back exactly
// i's partitions from i's latest checkpoint. The others go on meanwhile:
// they do not restart with it, and only what depends on its output waits.
// A process restores only checkpoints of its own layout: Processes,
// Partitions and each operator's parallelism as they were (each
// checkpoint records its process's layout, and a restore at another
// fails with ErrCluster). Within that, each process stops and restores
// as any job does: Job.StopWithSavepoint on every process, then every
// process started again with Config.RestoreFrom its own savepoint (a new
// version of the program, say), continues the job. Changing the number
// of processes, or the parallelism within them, is rescaling, below.
//
// Event time crosses the topics: each writer subtask (a producer) sends
// every watermark it passes, and at the end of its input an end marker,
// to every partition, in order with its records; a reader keeps per
// partition and producer the latest of them, and its watermark is their
// minimum (ends count as the maximum). So, as in one process, a window's
// watermark passes no record still on its way from a producer that is
// not idle, and a window fires with the records one process would give
// it. A reader ends when every producer has ended
// on every one of its partitions; a writer sends its end with the
// watermark that ends its input, because its task ends only after the
// job's final checkpoint. Idleness crosses too: a producer whose input
// goes idle (a Kafka source's subtask that owns no partition, say) says
// so on every partition, and readers leave it out of their watermark
// until its next record or watermark, which may then come late, as after
// any idle input.
//
// Exactly once. Offsets live in checkpoints, as the kafka package keeps
// them in any job; they do not go into the Kafka transactions
// (AddOffsetsToTxn, as Kafka Streams does). Each process checkpoints as a
// job on its own: a checkpoint holds, in one manifest, its keyed state,
// the offsets its readers and Kafka sources consumed, the watermarks and
// ends they had seen, and the handles of the transactions its writers
// and transactional sinks pre-committed at its barrier. The manifest is
// the one atomic step: the commits of the transactions follow the
// checkpoint's completion, and can be done again by whoever holds the
// handles. Then, for a crash
//
//   - before checkpoint n completes: the restarted process restores n−1;
//     its sinks fence their transactional ids, which aborts the
//     transactions after n−1, none of whose records any read_committed
//     reader (the other processes, the output's consumers) ever saw; it
//     reads its input again from n−1's offsets and writes it again;
//   - after checkpoint n completed, before its transactions committed:
//     they stay open on the brokers, their records unseen (the
//     partitions' last stable offset holds the readers behind them). The
//     restarted process restores n, commits n's transactions from their
//     handles (Recover), fences the rest, and reads on from n's offsets,
//     which are exactly those the committed records derive from;
//   - after the commits: as the case before, the commits found done.
//
// In each case each record consumed affects state and committed output
// once, and other processes see only committed records, which are never
// retracted: so no process ever rolls back for another's failure, and the
// whole is exactly once because each process is. Keeping offsets with the
// state rather than in the transaction is what makes one step atomic: a
// process's state lives in its checkpoint, not in Kafka, and offsets
// committed in a transaction could run ahead of a checkpoint that then
// failed to complete, leaving state behind its offsets. The cost is a
// transaction left open across a crash: it must outlive the restart
// (SinkConfig.TransactionTimeout; a transaction the brokers aborted at
// their timeout is lost, and logged, as the kafka package doc says), and
// it holds back readers of its partitions until then. Output crosses a
// process boundary once per checkpoint: each cut adds up to a checkpoint
// interval of latency. TestDistributedKilled in package kafka SIGKILLs
// processes at random moments, fails two commits of repartition
// transactions (the case after completion, before the commits) and
// compares with one process; built with the tag ringflow_exchange_notxn,
// which writes repartition topics without transactions, it fails.
//
// Rescaling. A job of N processes goes on as M processes, as a Flink job
// goes on at another parallelism from a savepoint: stop every one of the
// N processes with Job.StopWithSavepoint, then start each of the M with
// the same Cluster but for Process and Processes (M), a new
// Checkpoint.StateDir, and Cluster.RestoreFrom listing the N savepoints.
// Every old process must have stopped before any new one starts. (A
// process's state directory stands for its latest checkpoint, as in
// Config.RestoreFrom: a process that died is rescaled from there, its
// transactions after that checkpoint aborted by the fencing below.)
// Each checkpoint records which process of how many took it, of which
// job, and the layout's generation (0 at the first start, one more at
// each rescaled start); a rescaled start checks that the list holds one
// savepoint of every process of one layout of the same job (JobID), with
// the same Partitions, and fails with ErrCluster naming what is wrong
// (a process missing or given twice, another job's savepoint, two
// layouts, a final checkpoint, in-flight data of an unaligned one).
// Partitions cannot change: every repartition topic keeps its
// partitions, each carrying its key groups. New process j then assembles,
// from the N checkpoints, the one it would have taken had the job always
// run as M processes, and restores it as any checkpoint:
//
//   - the keyed state of the key groups it owns now, the range of its
//     partitions, from whichever old processes held them (as a job
//     restored at another parallelism takes its key groups);
//   - each repartition partition it owns, at the offset its old owner's
//     reader had reached, with the watermarks, ends and idleness that
//     reader kept for it;
//   - its share of every other source's splits: a Kafka source's input
//     partitions are shared out among the M·parallelism subtasks of all
//     processes, each with its offsets, as a source restored at another
//     parallelism shares them (SplitSource);
//   - the transactions the savepoints hold pre-committed, those of old
//     process i going to new process i mod M, which commits them (a
//     stop's commits ran before it returned, unless one failed) and
//     fences their transactional ids. An old process that no longer
//     exists (i ≥ M) thereby has its ids fenced too, so no transaction
//     it left open holds back a partition: each kafka handle names its
//     prefix.
//
// New process j < N goes on with old process j's identity; the others
// start new ones. The operators' parallelism may change with the
// processes (a rescale to as many processes changes it alone).
//
// Records of the old layout may still be in the repartition topics when
// the new processes start: written and committed before the savepoints,
// beyond the offsets their readers had reached. Their producers (the
// writer subtasks of the old layout) are not the new ones, so every
// record carries its producer's layout generation. In each partition
// every record of the old generation precedes every one of the new: the
// old processes stopped before the new ones started, and each record is
// appended after all the old ones wrote, committed later or not. So a
// reader keeps each partition's channels per generation: the old
// producers' from its savepoint while it reads the old records, and at
// the first record of the new generation in the partition, which every
// new producer sends soon (a watermark goes to every partition), it drops
// them for the new producers', each from no watermark until it sends
// its own. Its watermark never passes a record still to come from either
// generation, windows fire with the records an uninterrupted run gives
// them, and each record is read once: the output is exactly once across
// the rescale, as across any restore. A record of an older generation
// after one of a newer fails the reader: a process of the old layout
// still ran. TestDistributedRescale in package kafka runs a windowed job
// as 3 processes, then 2, then 4 (with other parallelisms), and compares
// with one process; TestDistributedRescaleProcesses does so with child
// processes, one of each rescaled layout killed and resumed. A process
// that finished (read all its input) has no savepoint to give: rescale a
// job whose processes all run.
//
// Where state lives. A process's checkpoints are in its own
// Checkpoint.StateDir, and nowhere else: if that directory is lost, the
// process cannot resume (starting afresh would read its partitions again
// from the start and write its output again). Keep each StateDir on
// durable storage; a shared file system (one directory per process)
// lets a process resume on another machine. Kafka Streams instead logs
// each state change to a changelog topic and rebuilds lost state from it,
// which makes a lost disk harmless but writes all state twice; that is not
// built here.
//
// Operators that are not keyed run in every process, on that process's
// records only: an operator of parallelism 1 runs once per process, not
// once in the job, and a sink writes each process's part of the output.
// A KeyBy is what brings records together across processes.
//
// Within a process, a keyed operator's subtasks share out the key groups
// the process owns, and only those (keygroups.RangeWithin), so that each
// subtask owns a share of them; its parallelism may not exceed their
// number.
package ringflow
