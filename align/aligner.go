package align

import (
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/ringflow/ringflow/internal/invariants"
)

// Aligner is the barrier state machine of one task. It is not safe for
// concurrent use: the worker running the task owns it.
type Aligner struct {
	cfg   Config
	chans []channel
	// ended counts channels that read END.
	ended int
	// pending holds the checkpoints started here and not yet complete or
	// aborted, in increasing id order. Exactly-once keeps at most one.
	pending []*checkpoint
	free    []*checkpoint
	// maxID is the highest checkpoint id started or aborted here. A barrier
	// with a smaller or equal id that is not pending is stale: ignored.
	maxID     uint64
	nowNs     int64
	endOutput bool // OpEndOfInput was emitted
	out       []Action
}

// channel is the per-input state the runtime asks about on its hot path.
type channel struct {
	blocked bool
	ended   bool
	// recording is the checkpoint whose channel state this channel is
	// recording, 0 when none.
	recording uint64
}

// checkpoint is one pending checkpoint at this task.
type checkpoint struct {
	Barrier
	// read: channels whose barrier was read. recording: after the switch
	// to unaligned, channels whose state is still being recorded.
	read, recording roaring.Bitmap
	// aligned counts channels that read the barrier or ended: the
	// checkpoint is aligned when aligned == Channels.
	aligned   int
	unaligned bool // switched: snapshot taken, recording channel state
	stats     Stats
	// seen and doneAt are, by channel, when its barrier was first seen
	// (read or peeked) and when the channel was done with the checkpoint
	// (the barrier read, or found ahead of a recording), in the runtime's
	// nanoseconds; 0 before.
	seen, doneAt []int64
}

// New returns an Aligner for cfg, or an error wrapping ErrInvalidConfig
// naming what is wrong.
func New(cfg Config) (*Aligner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Aligner{
		cfg:   cfg,
		chans: make([]channel, cfg.Channels),
		out:   make([]Action, 0, 8),
	}
	for i := 0; i < cfg.maxConcurrent(); i++ {
		a.free = append(a.free, &checkpoint{seen: make([]int64, cfg.Channels), doneAt: make([]int64, cfg.Channels)})
	}
	a.pending = make([]*checkpoint, 0, cfg.maxConcurrent())
	return a, nil
}

// Config returns the configuration the Aligner was built with.
func (a *Aligner) Config() Config { return a.cfg }

// Blocked reports whether the runtime must not read channel c. c must be in
// [0, Channels).
func (a *Aligner) Blocked(c int) bool { return a.chans[c].blocked }

// Recording returns the checkpoint whose channel state channel c is
// recording, or 0.
func (a *Aligner) Recording(c int) uint64 { return a.chans[c].recording }

// Ended reports whether every input channel has ended.
func (a *Aligner) Ended() bool { return a.ended == len(a.chans) }

// Pending returns the number of checkpoints started here and not yet
// complete or aborted.
func (a *Aligner) Pending() int { return len(a.pending) }

// Deadline returns when the earliest alignment in progress times out, so
// the runtime can tick then; ok is false when nothing can time out.
func (a *Aligner) Deadline() (ns int64, ok bool) {
	for _, cp := range a.pending {
		if d, can := a.deadline(cp); can && (!ok || d < ns) {
			ns, ok = d, true
		}
	}
	return ns, ok
}

// Step feeds one input and returns the actions to execute, in order, before
// the runtime reads any further frame. The slice is valid until the next
// call. On error (wrapping ErrBadInput) the state is unchanged and there
// are no actions.
//
// Order within one step: a checkpoint dropped by this input is aborted
// (after stopping its recordings and unblocking its channels) before
// anything of a newer one; a checkpoint's OpSnapshot comes before its
// OpForward, which comes before its unblocks and recordings; OpComplete
// comes after its snapshot and its last OpStopRecord; OpEndOfInput is last,
// after the forward of any barrier the final END completed.
func (a *Aligner) Step(in Input) ([]Action, error) {
	a.out = a.out[:0]
	if err := a.check(in); err != nil {
		return nil, err
	}
	// NB: trigger times are wall-clock (the coordinator's), so NowNs is
	// too, and a wall clock can step back; that is no time passing.
	a.nowNs = max(a.nowNs, in.NowNs)
	switch in.Type {
	case InputBarrier:
		a.onBarrier(in.Channel, in.Barrier)
	case InputPeekedBarrier:
		a.onPeek(in.Channel, in.Barrier)
	case InputEnd:
		a.onEnd(in.Channel)
	case InputAbort:
		a.onAbort(in.Barrier.ID)
	}
	a.checkTimeouts()
	if invariants.Enabled {
		a.checkInvariants()
	}
	return a.out, nil
}

// check validates in against the current state, so Step mutates nothing
// when the input is bad.
func (a *Aligner) check(in Input) error {
	switch in.Type {
	case InputTick:
		return nil
	case InputAbort:
		if in.Barrier.ID == 0 {
			return fmt.Errorf("%w: abort: checkpoint id 0 (ids start at 1)", ErrBadInput)
		}
		return nil
	case InputBarrier, InputPeekedBarrier, InputEnd:
		return a.checkChannelInput(in)
	}
	return fmt.Errorf("%w: unknown input type %d", ErrBadInput, uint8(in.Type))
}

func (a *Aligner) checkChannelInput(in Input) error {
	c, b := in.Channel, in.Barrier
	if c < 0 || c >= len(a.chans) {
		return fmt.Errorf("%w: %v on channel %d: channel out of range [0,%d)",
			ErrBadInput, in.Type, c, len(a.chans))
	}
	ch := &a.chans[c]
	switch {
	case ch.ended:
		return fmt.Errorf("%w: %v on channel %d after its END", ErrBadInput, in.Type, c)
	case ch.blocked && in.Type != InputPeekedBarrier:
		return fmt.Errorf("%w: %v read on channel %d while it is blocked", ErrBadInput, in.Type, c)
	case in.Type == InputEnd:
		return nil
	case b.ID == 0:
		return fmt.Errorf("%w: %v on channel %d: checkpoint id 0 (ids start at 1)", ErrBadInput, in.Type, c)
	case b.Kind > KindSavepoint:
		return fmt.Errorf("%w: %v %d on channel %d: unknown kind %d", ErrBadInput, in.Type, b.ID, c, uint8(b.Kind))
	}
	if cp := a.find(b.ID); cp != nil && cp.read.Contains(uint32(c)) {
		if in.Type == InputBarrier {
			return fmt.Errorf("%w: barrier %d read twice on channel %d", ErrBadInput, b.ID, c)
		}
		return fmt.Errorf("%w: barrier %d peeked on channel %d after it was read", ErrBadInput, b.ID, c)
	}
	return nil
}

func (a *Aligner) find(id uint64) *checkpoint {
	for _, cp := range a.pending {
		if cp.ID == id {
			return cp
		}
	}
	return nil
}

// onBarrier handles a barrier read on channel c: every record before it on
// c has been processed.
func (a *Aligner) onBarrier(c int, b Barrier) {
	cp := a.lookup(b, true /* read */)
	if cp == nil {
		return // stale
	}
	if !cp.unaligned && cp.read.IsEmpty() {
		cp.stats.AlignStartNs = a.nowNs
	}
	cp.saw(c, a.nowNs)
	if cp.doneAt[c] == 0 {
		cp.doneAt[c] = a.nowNs
	}
	cp.read.Add(uint32(c))
	cp.aligned++
	switch {
	case a.cfg.Mode == AtLeastOnce:
		cp.stats.WaitedOn = c
		if cp.aligned == len(a.chans) {
			a.completeAtLeastOnce(cp)
		}
	case cp.unaligned:
		// The switch found c's barrier still to come: its state is
		// recorded up to here.
		a.stopRecording(cp, c)
	case cp.aligned == len(a.chans):
		cp.stats.WaitedOn = c
		a.completeAligned(cp)
	case a.shouldSwitch(cp, b.Kind):
		cp.stats.WaitedOn = c
		a.switchUnaligned(cp)
	default:
		cp.stats.WaitedOn = c
		a.chans[c].blocked = true
		a.emit(Action{Op: OpBlock, Channel: c})
	}
}

// onPeek handles a barrier found ahead of channel c's read position. Only
// exactly-once cares: an unaligned checkpoint may start from it, and a
// recording channel stops at it.
func (a *Aligner) onPeek(c int, b Barrier) {
	if a.cfg.Mode == AtLeastOnce {
		return
	}
	cp := a.lookup(b, false /* read */)
	if cp == nil {
		return
	}
	cp.saw(c, a.nowNs)
	switch {
	case cp.unaligned:
		a.stopRecording(cp, c)
	case a.shouldSwitch(cp, b.Kind):
		a.switchUnaligned(cp)
	}
}

// onEnd handles END read on channel c: c counts as aligned for every
// pending and later checkpoint.
func (a *Aligner) onEnd(c int) {
	a.chans[c].ended = true
	a.ended++
	for i := 0; i < len(a.pending); i++ {
		cp := a.pending[i]
		if !cp.read.Contains(uint32(c)) {
			cp.aligned++
		}
		switch {
		case cp.unaligned:
			a.stopRecording(cp, c)
		case cp.aligned < len(a.chans):
		case a.cfg.Mode == AtLeastOnce:
			cp.stats.WaitedOn = c
			a.completeAtLeastOnce(cp)
			i = -1 // cp and everything older are gone; rescan the newer ones
		default:
			cp.stats.WaitedOn = c
			a.completeAligned(cp)
			i = -1
		}
	}
	if a.ended == len(a.chans) && !a.endOutput {
		a.endOutput = true
		a.emit(Action{Op: OpEndOfInput})
	}
}

func (a *Aligner) onAbort(id uint64) {
	if cp := a.find(id); cp != nil {
		a.abort(cp, ReasonAborted)
		return
	}
	// Barriers of it may still come; they are stale.
	a.maxID = max(a.maxID, id)
}

// lookup returns the pending checkpoint for b, starting it if b is newer
// than anything seen, or nil if b is stale (or, peeked, must wait for
// reads to decide).
func (a *Aligner) lookup(b Barrier, read bool) *checkpoint {
	if cp := a.find(b.ID); cp != nil {
		return cp
	}
	if b.ID <= a.maxID {
		return nil
	}
	if a.cfg.Mode == ExactlyOnce && len(a.pending) > 0 {
		// A newer barrier read on a channel that has not delivered the
		// pending one: that channel's upstream gave it up, so it can
		// never align. A peek proves nothing (the pending barrier may
		// precede it on a blocked channel): wait for the read.
		if !read {
			return nil
		}
		a.abort(a.pending[0], ReasonSubsumed)
	}
	if len(a.pending) == a.cfg.maxConcurrent() {
		a.abort(a.pending[0], ReasonTooMany)
	}
	return a.start(b)
}

func (a *Aligner) start(b Barrier) *checkpoint {
	cp := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	cp.Barrier = b
	cp.aligned = a.ended
	cp.unaligned = false
	clear(cp.seen)
	clear(cp.doneAt)
	cp.stats = Stats{
		ID:             b.ID,
		TriggerNs:      b.TriggerNs,
		FirstBarrierNs: a.nowNs,
		WaitedOn:       -1,
	}
	a.pending = append(a.pending, cp)
	a.maxID = b.ID
	return cp
}

// saw notes that channel c's barrier of cp was seen at nowNs, if it is the
// first time.
func (cp *checkpoint) saw(c int, nowNs int64) {
	if cp.seen[c] == 0 {
		cp.seen[c] = nowNs
	}
}

// ChannelTimes returns, by input channel, when its barrier of checkpoint id
// was first seen (read, or found ahead of the read position) and when the
// channel was done with the checkpoint: its barrier read (an aligned
// channel is blocked from then until the snapshot) or, for a channel whose
// state an unaligned checkpoint records, found ahead of the recording.
// Times are the runtime's nanoseconds; 0 for a channel that ended before
// its barrier came, or whose barrier has not come yet. ok is
// false when id is neither pending nor the checkpoint last completed or
// aborted. The slices are the Aligner's, valid until the next Step: the
// runtime reads them when it handles id's OpComplete.
func (a *Aligner) ChannelTimes(id uint64) (seen, done []int64, ok bool) {
	if cp := a.find(id); cp != nil {
		return cp.seen, cp.doneAt, true
	}
	for _, cp := range a.free {
		if cp.ID == id && cp.seen != nil {
			return cp.seen, cp.doneAt, true
		}
	}
	return nil, nil, false
}

// deadline returns when cp's alignment times out, if it can.
func (a *Aligner) deadline(cp *checkpoint) (int64, bool) {
	if !a.cfg.unaligned() || cp.unaligned || cp.Kind == KindSavepoint {
		return 0, false
	}
	t := a.cfg.AlignmentTimeout.Nanoseconds()
	if cp.TriggerNs > math.MaxInt64-t {
		return math.MaxInt64, true
	}
	return cp.TriggerNs + t, true
}

// shouldSwitch reports whether cp, still aligning, goes unaligned now
// that a barrier of kind k was seen.
func (a *Aligner) shouldSwitch(cp *checkpoint, k Kind) bool {
	d, ok := a.deadline(cp)
	return ok && (k == KindUnaligned || a.cfg.AlignmentTimeout == 0 || a.nowNs >= d)
}

func (a *Aligner) checkTimeouts() {
	for _, cp := range a.pending {
		if a.shouldSwitch(cp, cp.Kind) {
			a.switchUnaligned(cp)
			return // exactly-once: the only one
		}
	}
}

func (a *Aligner) emit(act Action) { a.out = append(a.out, act) }
