// Package pipelines holds the five workloads of `dfbench run`, each written
// twice from the same generator: once on ringflow (its public API only), and
// once the way a Go programmer would write it without ringflow — goroutines
// per operator instance connected by buffered channels of record batches
// (the "chan" baseline). Both versions produce the same output, which the
// sinks reduce to a count and an order-independent checksum, so a run can
// prove that engine and baseline did the same work.
//
// # Records
//
// Every source generates Record values (32 bytes, no pointers, so ringflow
// moves them by raw copy and reads them in place; see Record for why not
// more). Record seq of a source with seed s is
//
//	h        = splitmix64(s + (seq+1)·φ)         φ = 0x9e3779b97f4a7c15
//	Key      = ⌊h · Keys / 2⁶⁴⌋                  uniform in [0, Keys) (see HotKeys below for the other pattern)
//	Value    = 1                                 a count of one, as in a word count
//	SrcNanos = wall clock (Unix ns) if h mod 1024 = 0, else 0
//
// and, in the event-time pipelines, its event time is seq / EventStride
// epoch milliseconds (computed from Seq by the timestamp assigner, not
// stored).
//
// A source of parallelism P is P subtasks; subtask i generates seq i, i+P,
// i+2P, ... below Records (ringflow.Generate's split), so with --records N
// the sequence numbers 0..N-1 are each generated once.
//
// # Pipelines
//
// All operators have parallelism P. "keyBy" partitions by Key.
//
//	passthrough   source → sink
//	              sink sees every record; digest (Seq, Key, Value)
//	map-filter    source → map (Value += Key) → filter (keep odd Value, about half) → sink
//	              digest (Seq, Key, Value)
//	keyed-count   source → keyBy → rolling count per key → sink
//	              the sink sees every update: the record with Value = the number of
//	              records of its key so far; digest (Key, Value)
//	window        event-time source (watermark = newest event time - 1 ms) → keyBy →
//	              tumbling 1 s window counting records per key → sink
//	              one result per key and window; digest (Key, Start, Count)
//	join          two event-time sources, "left" (seed 1) and "right" (seed 2), of
//	              ⌈N/2⌉ and ⌊N/2⌋ records → keyBy both → 1 s tumbling window inner
//	              join → sink; one result per (left, right) pair of one key in one
//	              window; digest (Key, left Seq, right Seq)
//
// The checksum is the sum (mod 2⁶⁴) of the digests of the sink's records,
// so it does not depend on the order in which parallel subtasks deliver
// them. Wall-clock fields never enter a digest.
//
// EventStride defaults so that a key expects about ten records per source
// per window in the window pipeline (EventStride = ⌈10·Keys/1000⌉) and about
// one in the join (⌈Keys/1000⌉), which keeps the join's output about as
// large as its input.
//
// # Measurements
//
// Records is the number of records the sources produced; records per
// second divides it by the wall time of the run, from starting the job (or
// the goroutines) to the last sink finishing. With a Duration the sources
// are unbounded and the run is cancelled after it; what the rings or
// channels held at that moment is counted as produced but never reaches a
// sink, which is bounded by their capacities. Event-time windows do not
// fire on cancellation.
//
// CPUSeconds is the CPU time the whole process used during the run (user
// and system, from getrusage): on a machine shared with other work, records
// per CPU second is steadier than records per second. ringflow's idle
// workers spin before they park, which counts.
//
// Latency is sampled: about one record in Config.SampleEvery (1024 by
// default) carries the wall clock of its generation in SrcNanos, and the sink records now - SrcNanos in a
// log-bucketed Histogram (relative error under 1.6%); with a Warmup, only
// records generated after it count. Keyed counts carry the
// sampled record's own time. A window result carries the newest sampled
// time among its key's records in the window, and a join pair the newer of
// its two records' times: their latency includes waiting for the window to
// close, which, because event time is generated rather than wall time,
// depends on the throughput. With Config.KeepSamples the run also returns
// every sample (generation time and latency) in Result.Samples, to place
// the slow ones against the checkpoints' trigger times. With
// Config.CheckpointWindows a ringflow run alternates windows with its
// checkpoints paused and on, and Result.Windows gives the latency of the
// samples generated in each kind apart (each window's first checkpoint
// interval left out): checkpoints' cost to latency within one run.
//
// # The baseline
//
// Each operator instance is a goroutine; edges are buffered channels of
// *batch (1024 records), recycled through a sync.Pool. Forward edges pair
// instance i with instance i. A keyed edge is one channel per downstream
// instance shared by every upstream instance; the sender appends each
// record to the batch of instance Key mod P and sends a batch when it is
// full, and all its partial batches when it has nothing more to do right
// now (a paced source waiting for its next record) or at the end. Keyed
// state is a Go map per instance; windows are a map per window start.
// Watermarks travel in the batches: each batch says its sender's watermark
// after its records, and a window instance fires the windows the minimum
// over its senders has passed. Maps and filters work on the batch in place
// and forward it.
//
// # ringflow
//
// The ringflow versions use only the public API: a Source (the same
// generator as the baseline's, as an operator.Source and operator.Pacer),
// SourceWithEventTime, Map, Filter, KeyBy, MapWithState, Window with an
// AggregateFunc, WindowJoin and SinkBatches. (ringflow.Generate would do,
// but it calls its function once per record, which costs more than
// generating the record; see BenchmarkGenerateRead.) Each sink subtask
// counts into its own lane, a batch at a time, as each baseline sink
// goroutine does. The file sink's "tally" map (below) is one function
// shared by every subtask, so it spreads its counters over lanes that no
// two subtasks share: on forward pipelines the lane is the source subtask
// (Seq mod P); after a keyed operator it is the key's key group
// (keygroups.Of(keygroups.HashUint64(Key), 128)), which belongs to
// exactly one subtask. The job's MaxParallelism is therefore fixed at 128.
//
// # Checkpoints, recovery and the file sink (ringflow only)
//
// Config.Checkpoint is passed to ringflow as is, and Result.Checkpoints
// returns Job.Checkpoints. A run on a state directory that holds a
// complete checkpoint resumes from it (the engine does that): its sources
// start at their recorded positions, so Records, SinkRecords and the
// checksum then cover only this run's share.
//
// With Config.SinkDir the output goes through ringflow.TxnSink and
// ringflow.FileSink: the directory holds committed part files only, one
// line per output record, unsigned decimal fields separated by a space:
//
//	passthrough, map-filter   Seq Key Value
//	keyed-count               Key Value          (Value: the key's count so far)
//	window                    Key Start Count
//	join                      Key LeftSeq RightSeq
//
// The sink formats the lines itself (ringflow.FileSinkOf), into a buffer
// it reuses, so that writing a record allocates nothing; a "tally" map in
// front of it counts each record in its lane, so Result keeps its count,
// checksum and latency; after an in-place restart those include the
// replayed records, while the committed lines hold each record exactly
// once.
//
// Config.FailAfter adds a "fail" map behind the (left) source that
// panics once per Run, at the first record after FailAfter it sees; with
// Config.Restart the job then restores its latest complete checkpoint in
// place.
//
// Config.Control steers a run from outside while it goes on: Control.Fail
// makes the "fail" map panic at its next record, and Control.Stop ends
// every source at its next read, so that the job takes its final
// checkpoint and commits all its output; Control.Ends then says how many
// records each source subtask generated. With Records = UntilStopped a
// run goes on until Stop. KeyedCountOutput checks a keyed-count run's
// committed lines against those records: every key's rolling counts 1 to
// n, each exactly once. Config.LiveLatency receives every latency sample
// as it is taken, for another goroutine to drain (a latency per second).
//
// Config.HotKeys makes the key pattern that measures incremental
// checkpoints: records 0..Keys-1 take keys 0..Keys-1 in order (every key
// enters the state once), and every later record a key drawn uniformly
// below HotKeys. After the first Keys records, a checkpoint interval
// changes at most HotKeys keys of the Keys in the state.
package pipelines
