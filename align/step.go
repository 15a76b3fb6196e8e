package align

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is the kind of checkpoint a barrier announces; the ring carries it in
// the barrier frame.
type Kind uint8

const (
	// KindAligned starts aligned and switches to unaligned when the
	// alignment timeout passes. It is the zero value.
	KindAligned Kind = iota
	// KindUnaligned is forwarded by a task whose snapshot was unaligned (or
	// by a source when the timeout is 0). A task that allows unaligned
	// checkpoints switches as soon as it sees one: its upstream did not
	// wait, so waiting here would only stall.
	KindUnaligned
	// KindSavepoint is always aligned, whatever the timeout (as Flink's
	// savepoints).
	KindSavepoint
)

func (k Kind) String() string {
	switch k {
	case KindAligned:
		return "aligned"
	case KindUnaligned:
		return "unaligned"
	case KindSavepoint:
		return "savepoint"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Barrier is the content of a barrier frame.
type Barrier struct {
	// ID is the checkpoint id; ids start at 1 and grow.
	ID uint64
	// TriggerNs is when the coordinator triggered the checkpoint, in
	// nanoseconds on the clock that also gives Input.NowNs (ring barriers
	// carry wall-clock time: time.Time.UnixNano).
	TriggerNs int64
	// Kind is the checkpoint kind.
	Kind Kind
}

// InputType says what the runtime saw.
type InputType uint8

const (
	// InputBarrier: the runtime read a barrier frame at channel Channel's
	// read position, so every record before it has been processed.
	InputBarrier InputType = iota + 1
	// InputPeekedBarrier: the runtime found a barrier ahead of channel
	// Channel's read position, behind data it has not processed. The
	// runtime reports barriers in ring order from its read position; it may
	// report the same one again.
	InputPeekedBarrier
	// InputEnd: the runtime read END on channel Channel; nothing follows.
	InputEnd
	// InputTick: time passed; the runtime ticks by Deadline.
	InputTick
	// InputAbort: the coordinator aborted checkpoint Barrier.ID.
	InputAbort
)

var inputNames = [...]string{
	InputBarrier:       "barrier",
	InputPeekedBarrier: "peek-barrier",
	InputEnd:           "end",
	InputTick:          "tick",
	InputAbort:         "abort",
}

func (t InputType) String() string {
	if int(t) < len(inputNames) && inputNames[t] != "" {
		return inputNames[t]
	}
	return fmt.Sprintf("InputType(%d)", uint8(t))
}

// Input is one thing the runtime saw.
type Input struct {
	Type InputType
	// Channel is the input channel, for barriers and END.
	Channel int
	// Barrier is the barrier seen; for InputAbort only ID is used.
	Barrier Barrier
	// NowNs is the current time, on the clock of Barrier.TriggerNs. A time
	// before an earlier input's counts as that earlier time.
	NowNs int64
}

// Op is what an Action asks the runtime to do.
type Op uint8

const (
	// OpBlock: stop reading Channel; its data stays in the ring.
	OpBlock Op = iota + 1
	// OpUnblock: read Channel again.
	OpUnblock
	// OpSnapshot: snapshot operator state for checkpoint ID now, before
	// processing any other record. Unaligned says which kind it is.
	OpSnapshot
	// OpForward: write barrier Barrier into every output; when
	// Barrier.Kind is KindUnaligned, through the ring's control reserve.
	OpForward
	// OpRecord: Channel's in-flight data before its barrier ID is channel
	// state of checkpoint ID. Copy every data frame from the read position
	// on (queued ones now, later ones as they arrive, each before it is
	// consumed) until OpStopRecord, and keep processing those records as
	// usual. Report every barrier the copying meets with
	// InputPeekedBarrier: that is how the stop comes.
	OpRecord
	// OpStopRecord: barrier ID (or END) was seen on Channel, so Channel's
	// state for checkpoint ID is complete: every data frame from where
	// recording started up to that barrier or END, none after it. If the
	// barrier was found by a peek ahead of the copy, finish copying up to
	// it first. Before OpAbort, it just ends the recording.
	OpStopRecord
	// OpComplete: this task's part of checkpoint ID is captured (snapshot
	// and all channel state); Stats describes it. Acknowledge it.
	OpComplete
	// OpAbort: checkpoint ID is dropped here, for Reason; discard its
	// snapshot and channel state if any.
	OpAbort
	// OpEndOfInput: every input channel has ended; forward END.
	OpEndOfInput
)

var opNames = [...]string{
	OpBlock:      "block",
	OpUnblock:    "unblock",
	OpSnapshot:   "snapshot",
	OpForward:    "forward",
	OpRecord:     "record",
	OpStopRecord: "stop-record",
	OpComplete:   "complete",
	OpAbort:      "abort",
	OpEndOfInput: "end-of-input",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Reason says why a checkpoint was aborted.
type Reason uint8

const (
	// ReasonSubsumed: a barrier of a newer checkpoint came first (on a
	// channel that never delivered this one), or, at-least-once, a newer
	// checkpoint completed.
	ReasonSubsumed Reason = iota + 1
	// ReasonAborted: the coordinator aborted it.
	ReasonAborted
	// ReasonTooMany: at-least-once had MaxConcurrent checkpoints pending
	// when a newer one started, so the coordinator gave up on the oldest.
	ReasonTooMany
)

func (r Reason) String() string {
	switch r {
	case ReasonSubsumed:
		return "subsumed"
	case ReasonAborted:
		return "aborted"
	case ReasonTooMany:
		return "too-many-pending"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Action is one thing for the runtime to do. Fields not named by Op's
// documentation are zero.
type Action struct {
	Op      Op
	Channel int
	// Barrier: ID for every op about a checkpoint; Kind and TriggerNs
	// for OpForward.
	Barrier   Barrier
	Unaligned bool   // OpSnapshot, OpComplete
	Reason    Reason // OpAbort
	Stats     Stats  // OpComplete
}

// String formats the action as the golden tests print it.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(a.Op.String())
	switch a.Op {
	case OpBlock, OpUnblock:
		fmt.Fprintf(&b, " ch=%d", a.Channel)
	case OpRecord, OpStopRecord:
		fmt.Fprintf(&b, " ch=%d id=%d", a.Channel, a.Barrier.ID)
	case OpSnapshot:
		fmt.Fprintf(&b, " id=%d %s", a.Barrier.ID, alignedWord(a.Unaligned))
	case OpForward:
		fmt.Fprintf(&b, " id=%d kind=%s trigger=%v", a.Barrier.ID, a.Barrier.Kind,
			time.Duration(a.Barrier.TriggerNs))
	case OpComplete:
		fmt.Fprintf(&b, " id=%d %s", a.Barrier.ID, a.Stats.String())
	case OpAbort:
		fmt.Fprintf(&b, " id=%d reason=%s", a.Barrier.ID, a.Reason)
	}
	return b.String()
}

func alignedWord(unaligned bool) string {
	if unaligned {
		return "unaligned"
	}
	return "aligned"
}

// Stats are the facts about one task's part of one checkpoint that the
// checkpoint statistics and the stall report need. Times are in the
// runtime's nanoseconds.
type Stats struct {
	ID        uint64
	TriggerNs int64
	// FirstBarrierNs is when the task first saw a barrier of the
	// checkpoint, read or peeked.
	FirstBarrierNs int64
	// AlignStartNs is when the first barrier was read (the first channel
	// blocked); SnapshotNs when none was read before the snapshot.
	AlignStartNs int64
	// SnapshotNs is when the snapshot was taken: alignment ended.
	SnapshotNs int64
	// CompleteNs is when the last channel state was recorded; SnapshotNs
	// for an aligned checkpoint.
	CompleteNs int64
	// Unaligned says whether the snapshot was unaligned.
	Unaligned bool
	// WaitedOn is the input channel whose barrier (or END) came last: the
	// one the task waited on longest (aligned: the one that ended the
	// alignment; unaligned: the last whose channel state was complete).
	// -1 if unknown.
	WaitedOn int
	// RecordedChannels counts the channels whose in-flight data is part
	// of the checkpoint.
	RecordedChannels int
}

// StartDelay is the time from trigger to the first barrier seen here.
func (s Stats) StartDelay() time.Duration { return time.Duration(s.FirstBarrierNs - s.TriggerNs) }

// Alignment is how long processing of some channel was held back: from the
// first barrier read to the snapshot.
func (s Stats) Alignment() time.Duration { return time.Duration(s.SnapshotNs - s.AlignStartNs) }

// String formats the stats compactly, as the golden tests print them.
func (s Stats) String() string {
	var b strings.Builder
	b.WriteString(alignedWord(s.Unaligned))
	fmt.Fprintf(&b, " start-delay=%v alignment=%v", s.StartDelay(), s.Alignment())
	if s.Unaligned {
		fmt.Fprintf(&b, " capture=%v recorded=%d", time.Duration(s.CompleteNs-s.SnapshotNs), s.RecordedChannels)
	}
	b.WriteString(" waited-on=")
	if s.WaitedOn < 0 {
		b.WriteString("none")
	} else {
		b.WriteString("ch" + strconv.Itoa(s.WaitedOn))
	}
	return b.String()
}
