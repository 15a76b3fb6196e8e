// Package compare runs one pipeline under aligned, unaligned and
// alignment-timeout checkpoints (and without checkpoints), back to back on
// the same input, and reports what each costs: throughput, checkpoint
// duration, alignment and start delay, in-flight bytes persisted,
// checkpoint size and the time to restore. It is `dfbench compare`.
//
// # Workload
//
// Every source subtask i of P generates the sequence numbers i, i+P, ...
// as Record values (32 bytes, no pointers: rings move them by raw copy).
// Record seq of a source with seed s is
//
//	h     = splitmix64(s·0x632be59bd9b4e019 + seq)
//	Key   = 0 (the hot key)         if h mod 2²⁰ < Skew·2²⁰
//	        1 + (h>>20) mod Keys     otherwise
//	TsMs  = seq·mul/div              event time (window, join)
//
// so a fraction Skew of the records carries key 0 and lands on one keyed
// subtask: that subtask's input channels are the slow ones. Sources are
// unbounded; each mode runs for Duration and is then cancelled.
//
// Pipelines, all operators of parallelism P (default 2):
//
//	keyed-count  source → keyBy → rolling count (Reduce) → sink
//	window       event-time source → keyBy → 1 s tumbling count → sink
//	             (div = 10·Keys/1000: about ten records per key and window)
//	join         sources "left" and "right" → keyBy both → 1 s tumbling
//	             window join → sink (mul = 100: about ten records per side
//	             and window, so the hot key's pairs per window stay few)
//
// The sink busy-waits SlowSink per record it receives — a busy wait, not a
// sleep, so its worker stays occupied and backpressure is real and steady.
// The sink is chained to the keyed operator, so the hot key's subtask is
// slow, its input rings fill, and its barriers queue behind data. In the
// window pipeline the sink sees one record per key and window, far fewer
// than the input, so it needs a larger SlowSink for the same backpressure.
//
// # Modes
//
//	aligned    CheckpointConfig{Interval}                       (never switches)
//	unaligned  CheckpointConfig{Interval, Unaligned: true}      (Flink's timeout 0)
//	timeout    CheckpointConfig{Interval, AlignmentTimeout}     (default 10 ms)
//	none       no checkpoints: the throughput reference
//
// Each checkpointed mode gets a fresh temporary state directory, removed
// after the mode. Checkpoint failures are tolerated (and counted): a
// failed checkpoint is a measurement, not a reason to stop.
//
// # Figures
//
// RecordsPerSec is the records the sink received divided by the wall time
// of Run, start to cancellation (start-up included, the same for every
// mode). Checkpoint figures cover the completed, non-final checkpoints of
// the run (a cancelled run takes no final one):
//
//	checkpoint_ms     CheckpointStats.Duration, trigger to completion: p50, p99, max (nearest rank)
//	alignment_ms      SubtaskCheckpointStats.Alignment over the non-source subtasks
//	start_delay_ms    SubtaskCheckpointStats.StartDelay over the non-source subtasks
//	inflight_bytes    InflightBytes summed over every subtask and checkpoint
//	inflight_bytes_max  the most InflightBytes one checkpoint persisted (all subtasks)
//	checkpoint_bytes  the median BytesWritten of a checkpoint
//	unaligned_parts   non-source subtask parts taken unaligned, of parts
//
// The in-flight bound: a checkpoint persists at most what the rings between
// tasks hold, Rings × RingCapacity. Every keyBy edge has one ring per
// (upstream, downstream) subtask pair and the sink is chained, so Rings is
// P² for keyed-count and window and 2·P² for join. (Output frames waiting
// for room in a full ring are persisted too; the comparison reports
// inflight_bytes_max beside the bound so that a breach shows.)
//
// # Restore time
//
// After a checkpointed mode's run is cancelled, the same job is built again
// on the same state directory, with sources that produce one record past
// their restored position and end. Run resumes from the latest complete
// checkpoint (RestoredFrom says which; 0: the run completed none). Two
// figures:
//
//	restore_ms      from calling Run until the restored job's sink receives its
//	                first record: opening the store, reading state, replaying
//	                persisted in-flight data (which comes first on its channel)
//	restore_run_ms  the whole restored Run, which also drains the replayed
//	                in-flight data through the slow sink and waits for the
//	                final checkpoint (triggered on the checkpoint interval)
//
// # Stall report
//
// With ProfileDir, each mode's run (not its restore) is covered by an
// fgprof wall-clock profile, <mode>.fgprof.pprof (on-CPU and off-CPU
// goroutine stacks; `go tool pprof` reads it), and stalls.txt lists, per
// checkpoint (completed or failed, not final), the subtask that waited
// longest, by StartDelay + Alignment, with both parts, whether its part was
// unaligned, the in-flight bytes it persisted, and the input channel whose
// barrier came last (SubtaskCheckpointStats.WaitedOn; -1 for a source).
//
// # What bounds an unaligned checkpoint here
//
// A worker runs a task for a step of up to 16 input frames (the engine also
// ends a step after a millisecond, checking the clock every 4 frames) and
// looks for
// triggers and barriers between steps. With the sink chained to the keyed
// operator, a step costs up to 16 × (FrameBytes/32) × SlowSink: 41 ms with
// 4 KiB frames and a 20 µs sink. The source that must inject the barrier
// shares the workers with those steps, and the keyed task peeks for it only
// after its current step, so an unaligned checkpoint lasts one or two steps
// however little it persists; --frame-bytes shortens the steps. Aligned
// checkpoints instead wait for the rings in front of the barrier to drain,
// about P × RingCapacity/32 × SlowSink on the hot subtask.
package compare
