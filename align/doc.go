// Package align is the barrier state machine of one task: it decides, from
// the barriers, ENDs and clock ticks the task sees on its input channels,
// when to block and unblock channels, when to snapshot, when to forward the
// barrier, and which in-flight bytes become channel state.
//
// It is a deterministic core in the manner of etcd's raft: no goroutines, no
// clocks, no rings. The runtime feeds one Input at a time to Aligner.Step
// and executes the Actions it returns, in order, before reading any further
// frame. Time is an input (Input.NowNs, Barrier.TriggerNs); Deadline says
// when the runtime should tick next. The per-record path never calls in:
// before reading a channel the runtime asks Blocked(c) (a slice index), and
// while Recording(c) is set it copies what it reads first.
//
// # Inputs and actions
//
//	input                   meaning                                     typical actions
//	InputBarrier c b        barrier b read at c's read position         block c | snapshot, forward, unblock..., complete
//	InputPeekedBarrier c b  barrier b found ahead of c's read position  (switch) | stop-record c
//	InputEnd c              END read on c                               (complete) | stop-record c | end-of-input
//	InputTick               time passed                                 (switch to unaligned)
//	InputAbort id           the coordinator aborted checkpoint id       unblock..., stop-record..., abort
//
// # The state machine (exactly-once), per checkpoint n
//
//	              first barrier n (read; or peeked while nothing is pending)
//	  +------+   ------------------------------------------------->   +--------------+
//	  | idle |                                                        | ALIGNING n   | <-+ barrier n read on c:
//	  +------+   <-------------------------------------------------   | read bitmap, |   |   set bit c, block c
//	     ^        every live channel read n (END counts as read):     | blocked chs  | --+ END on c: c counts
//	     |        snapshot, forward n, unblock all, complete n        +--------------+
//	     |                                                                   |
//	     |             now >= trigger(n) + timeout, or timeout 0, or         |
//	     |             a barrier n of kind unaligned (read or peeked):       |
//	     |             snapshot (unaligned), forward n (unaligned),          v
//	     |             unblock all, record every channel         +-----------------------+
//	     |             that has neither read n nor ended         | RECORDING n           | <-+ barrier n read or
//	     +-------------------------------------------------------| recording bitmap:     |   |   peeked on c, or
//	        the last recording channel stopped: complete n       | channels still to go  | --+   END on c:
//	                                                             +-----------------------+       stop-record c
//
//	From ALIGNING or RECORDING:
//	  a barrier m > n read on a channel (that channel never delivered n, so its
//	  upstream gave n up): abort n (subsumed): unblock, stop recording; start m.
//	  InputAbort n: abort n (aborted).
//
// Exactly-once keeps at most one checkpoint pending: blocked channels cannot
// deliver a newer barrier, and a newer barrier on an unblocked channel
// proves the pending one dead. A peeked newer barrier proves nothing (it may
// sit behind barrier n on a blocked channel) and is ignored until read.
//
// At-least-once never blocks and never records: it keeps up to
// MaxConcurrent checkpoints pending, each with its bitmap, snapshots and
// forwards n when every live channel has read n, and then aborts older
// pending checkpoints as subsumed. A new checkpoint beyond MaxConcurrent
// aborts the oldest (too-many-pending): the coordinator only triggers it
// once an older one is over.
//
// # Ids, kinds and bad input
//
// Checkpoint ids start at 1 and grow. A barrier whose id is not pending and
// not above the highest id started or aborted here is stale (its checkpoint
// was completed, subsumed or aborted) and is ignored: it is normal after a
// subsumption or an unaligned checkpoint (the barrier found by peek is read
// later). Inputs that cannot happen on a correct ring are errors wrapping
// ErrBadInput and change nothing: a channel out of range, a read of a
// blocked channel, anything after END, the same barrier read twice, a
// barrier peeked after it was read, id 0, an unknown kind. (Time going
// backwards is not an error: trigger times are wall-clock, and a wall clock
// may step back; it counts as no time passing.) New rejects invalid Configs with ErrInvalidConfig: unaligned
// checkpoints (AlignmentTimeout >= 0) need exactly-once and MaxConcurrent 1.
//
// Kinds: KindAligned may time out; KindSavepoint never does; KindUnaligned
// (forwarded by a task that switched) makes a receiving task switch at once,
// as in Flink, since waiting behind data its upstream did not wait for only
// stalls. A task that snapshots aligned forwards KindAligned (or
// KindSavepoint); one that switched forwards KindUnaligned, which the
// runtime writes through the ring's control reserve so it gets in even when
// the ring is full of data. Nothing overtakes anything in the ring: the
// downstream task finds that barrier by peeking.
//
// # The channel-state invariant
//
// For every checkpoint n and every input channel c, the records before
// barrier n on c (all of c's records if c ended without it) are either
// processed before snapshot n or recorded as channel state of n — never
// both, never neither (DESIGN.md invariant 4). Aligned, it holds because a
// channel is blocked exactly from its barrier to the snapshot. Unaligned,
// the records of c processed before the snapshot are those before c's read
// position at that moment; recording starts there (OpRecord) and ends at
// barrier n or END (OpStopRecord), so it holds provided the runtime keeps
// its side of the contract:
//
//   - OpRecord c n: from the read position on, copy every data frame of c
//     (each before consuming it), including ones that arrive later, and keep
//     processing them as usual.
//   - Report every barrier that copying meets with InputPeekedBarrier; a
//     worker that peeks into a backpressured task reports the barriers it
//     finds too, in ring order from the read position.
//   - OpStopRecord c n: c's state is complete up to barrier n (or END). If
//     the barrier was found by a peek ahead of the copy, finish copying up to
//     it; nothing after it is channel state of n.
//   - OpAbort n: discard n's snapshot and channel state.
//
// TestRandomAgainstNaive checks the invariant on random channel contents and
// interleavings, and every decision against a deliberately naive aligner;
// testdata/*.txt are the narrated golden scenarios.
//
// # Statistics
//
// OpComplete carries Stats: trigger time, first barrier seen (start delay),
// first barrier read and snapshot time (alignment: how long some channel was
// held back), completion time (capture of channel state), aligned or
// unaligned, the number of recorded channels, and WaitedOn, the channel whose
// barrier came last — with Alignment, the "which input channel did this
// subtask wait on, and how long" of the stall report.
//
// # Cost
//
// Blocked and Recording are a slice index. Step reuses its action slice; a
// barrier costs one or two roaring bitmap operations and one action, and the
// snapshot loops once over the channels. Bitmaps are kept and cleared
// between checkpoints; roaring still allocates a container per checkpoint
// (a few allocations per checkpoint, none per record). See BenchmarkCheckpoint.
package align
