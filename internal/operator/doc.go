// Package operator is ringflow's operator runtime: tasks, the operators
// they chain, the gates that write their output into rings and the channels
// that read their input, timers, watermarks, keyed state, and each task's
// part in checkpoints.
//
// # Tasks and chains
//
// A task runs one subtask of a chain: operators joined by forward edges of
// equal parallelism, which pass batches to each other by direct calls
// (Input.Push), with no ring and no encoding. A chain starts either with a
// source (a SourceDriver) or with input channels, one per ring that reaches
// the subtask, and ends either in a sink or in a Gate that writes into the
// rings of the next tasks. Task implements sched.Task: each Step handles a
// bounded amount of input (at most Quantum frames, at most about a
// millisecond) and flushes partly filled output frames when its inputs run
// dry or MaxDelay has passed. A paced source's input runs dry as soon as it
// has produced every record due (its Pacer says the next is later), so its
// records leave in the same step rather than after the worker's next poll.
//
// Records travel in batches with an optional parallel column of event
// timestamps. Control events — watermarks, the end of input, barriers —
// are delivered to the chain's operators in chain order, after all the data
// before them, so each operator sees the data an upstream operator emitted
// for an event before the event itself.
//
// # Frames
//
// A Gate encodes a batch into DATA frames (see package ring). Plain types
// (no pointers) are written as a column of records followed, on timed
// streams, by a column of int64 timestamps, straight into ring memory;
// the reading channel hands the operator slices that alias the ring, with
// no decoding. Other types are encoded record by record with a Codec. A
// frame that finds no room waits in Go memory, and later frames queue
// behind it, so frame order on a ring never changes; a task whose output
// waits does not take input.
//
// Partitioning: Forward pairs subtask i with i, Rebalance sends whole
// batches round robin, Hash sends each record to the subtask owning its
// key's key group (keygroups.Partitioner). A Hash edge hashes each key once:
// frames of plain types carry a third column, the records' key hashes, which
// the keyed operator downstream takes (HashedInput) instead of hashing the
// keys again. A reader tells such a frame by its length, so channel state
// replays whether it was recorded with hashes or without.
//
// # Event time
//
// Sources assign timestamps and watermarks (WatermarkStrategy: bounded
// out-of-orderness, idleness). A source task reads a batch, pushes it down
// the chain, then advances its watermark: watermarks advance per batch,
// not per record (a batch size of 1 makes them per record). A source's
// Read must not block (see Source): the task's checkpoint messages are
// handled between its reads. A task's watermark is the minimum over its
// inputs that are neither ended nor idle; if all are idle, its output is
// marked idle. At the end of input the watermark jumps to MaxWatermark, so
// every window and event-time timer fires; records can still come after it
// inside a loop and downstream of one, and a keyed process fires the
// event-time timers they register once their batch is processed (no
// watermark follows the last). A loop ends only once its body holds no
// pending timer (see LoopHead).
//
// # Keyed state and checkpoints
//
// Keyed operators keep state in copy-on-write tables (snapshot/cow), one
// per named state, addressed by key group. Every state is declared as its
// operator opens (Context.Declare), by a name unique in the operator — the
// built-in operators name theirs ("reduce", "windows", "txns", ...), a
// ProcessFunc names each of its own — and with the layout of its types
// (Layout). Checkpoints store state under the operator's name and the
// state's, and record the declarations, so that a restore can match them
// by name and refuse a changed type instead of misreading its bytes. SnapshotState freezes them in
// time proportional to the number of key groups; a background writer
// serializes the frozen tables (reusing, or extending with deltas, the
// blobs of the previous checkpoint when few keys changed). Timers of
// windows and joins follow from their state and are rebuilt on restore;
// a ProcessFunc's timers are kept in state tables of their own.
//
// A task takes part in checkpoints through Checkpoints: coordinator
// messages arrive in a mailbox (checked before each step, and before the
// worker may park), sources snapshot and send barriers when triggered, and
// tasks with inputs feed barriers and END to an align.Aligner and carry out
// its actions. For unaligned checkpoints a task scans ahead of its read
// positions for barriers, copies the DATA frames in front of them as
// channel state, and records output frames still waiting for room; barriers
// then go ahead of that waiting output, through the ring's control reserve.
// A restored task replays recorded channel state before it reads its rings.
//
// Two-phase-commit sinks (TwoPhaseSink, run by TxnSink) pre-commit at each
// checkpoint and commit when it completes; the final checkpoint, taken at
// the end of input, is always aligned, so that its commit covers all
// output. So are savepoints and stop checkpoints (TriggerKind): after a
// stop checkpoint's trigger a source reads no more, and once it completed
// the job tells every task Complete, then Stop, which ends the task where
// it is, without ending its input (its state stays in the checkpoint).
// A source restored at another parallelism than its checkpoint's shares
// its splits out anew if it has some (SplitSource).
package operator
