package align

import "github.com/ringflow/ringflow/internal/invariants"

// completeAligned ends an exactly-once alignment: every live channel
// delivered the barrier, so the state reflects exactly the records before
// it on every channel.
func (a *Aligner) completeAligned(cp *checkpoint) {
	cp.stats.SnapshotNs = a.nowNs
	if cp.read.IsEmpty() {
		cp.stats.AlignStartNs = a.nowNs
	}
	a.emit(Action{Op: OpSnapshot, Barrier: cp.Barrier})
	a.emit(Action{Op: OpForward, Barrier: forwarded(cp.Barrier, false)})
	a.unblockAll()
	a.finish(cp)
}

// completeAtLeastOnce snapshots when the last barrier arrived. Older
// pending checkpoints can no longer be useful: the coordinator completes
// checkpoints in order, so they are subsumed.
func (a *Aligner) completeAtLeastOnce(cp *checkpoint) {
	for a.pending[0] != cp {
		a.abort(a.pending[0], ReasonSubsumed)
	}
	cp.stats.SnapshotNs = a.nowNs
	if cp.read.IsEmpty() {
		cp.stats.AlignStartNs = a.nowNs
	}
	a.emit(Action{Op: OpSnapshot, Barrier: cp.Barrier})
	a.emit(Action{Op: OpForward, Barrier: forwarded(cp.Barrier, false)})
	a.finish(cp)
}

// switchUnaligned snapshots at once and turns every channel whose barrier
// has not been read into recorded channel state. Channels that read it are
// unblocked: what follows their barrier belongs to the next checkpoint.
func (a *Aligner) switchUnaligned(cp *checkpoint) {
	cp.unaligned = true
	cp.stats.Unaligned = true
	cp.stats.SnapshotNs = a.nowNs
	if cp.read.IsEmpty() {
		cp.stats.AlignStartNs = a.nowNs
	}
	a.emit(Action{Op: OpSnapshot, Barrier: cp.Barrier, Unaligned: true})
	a.emit(Action{Op: OpForward, Barrier: forwarded(cp.Barrier, true)})
	for c := range a.chans {
		ch := &a.chans[c]
		switch {
		case ch.blocked:
			ch.blocked = false
			a.emit(Action{Op: OpUnblock, Channel: c})
		case ch.ended || cp.read.Contains(uint32(c)):
		default:
			ch.recording = cp.ID
			cp.recording.Add(uint32(c))
			cp.stats.RecordedChannels++
			a.emit(Action{Op: OpRecord, Channel: c, Barrier: Barrier{ID: cp.ID}})
		}
	}
	if cp.recording.IsEmpty() {
		cp.stats.CompleteNs = a.nowNs
		a.finish(cp)
	}
}

// stopRecording ends channel c's state for cp, if c is recording it, and
// completes cp when it was the last.
func (a *Aligner) stopRecording(cp *checkpoint, c int) {
	if !cp.recording.CheckedRemove(uint32(c)) {
		return
	}
	a.chans[c].recording = 0
	if cp.doneAt[c] == 0 {
		cp.doneAt[c] = a.nowNs
	}
	cp.stats.WaitedOn = c
	a.emit(Action{Op: OpStopRecord, Channel: c, Barrier: Barrier{ID: cp.ID}})
	if cp.recording.IsEmpty() {
		cp.stats.CompleteNs = a.nowNs
		a.finish(cp)
	}
}

// abort drops cp: its blocked channels are released (exactly-once has one
// pending checkpoint, so every blocked channel is cp's) and its recording
// stops.
func (a *Aligner) abort(cp *checkpoint, r Reason) {
	for c := range a.chans {
		ch := &a.chans[c]
		if ch.recording == cp.ID {
			ch.recording = 0
			a.emit(Action{Op: OpStopRecord, Channel: c, Barrier: Barrier{ID: cp.ID}})
		}
		if ch.blocked {
			ch.blocked = false
			a.emit(Action{Op: OpUnblock, Channel: c})
		}
	}
	a.emit(Action{Op: OpAbort, Barrier: Barrier{ID: cp.ID}, Reason: r})
	a.release(cp)
}

// finish reports cp complete and releases it.
func (a *Aligner) finish(cp *checkpoint) {
	if !cp.unaligned {
		cp.stats.CompleteNs = cp.stats.SnapshotNs
	}
	a.emit(Action{Op: OpComplete, Barrier: Barrier{ID: cp.ID}, Unaligned: cp.unaligned, Stats: cp.stats})
	a.release(cp)
}

func (a *Aligner) unblockAll() {
	for c := range a.chans {
		if a.chans[c].blocked {
			a.chans[c].blocked = false
			a.emit(Action{Op: OpUnblock, Channel: c})
		}
	}
}

// release removes cp from pending and keeps it, cleared, for reuse.
func (a *Aligner) release(cp *checkpoint) {
	for i, p := range a.pending {
		if p == cp {
			copy(a.pending[i:], a.pending[i+1:])
			a.pending[len(a.pending)-1] = nil
			a.pending = a.pending[:len(a.pending)-1]
			break
		}
	}
	cp.read.Clear()
	cp.recording.Clear()
	a.free = append(a.free, cp)
}

// forwarded is the barrier this task writes to its outputs.
func forwarded(b Barrier, unaligned bool) Barrier {
	switch {
	case unaligned:
		b.Kind = KindUnaligned
	case b.Kind == KindUnaligned:
		// Aligned here after all (a local AlwaysAligned, or one channel):
		// downstream has no reason to hurry.
		b.Kind = KindAligned
	}
	return b
}

// checkInvariants cross-checks the redundant state; run under
// invariants.Enabled.
func (a *Aligner) checkInvariants() {
	blocked, recording, ended := 0, 0, 0
	for c := range a.chans {
		ch := &a.chans[c]
		if ch.blocked {
			blocked++
			invariants.Check(a.cfg.Mode == ExactlyOnce && len(a.pending) == 1 && !a.pending[0].unaligned &&
				a.pending[0].read.Contains(uint32(c)), "align: channel %d blocked outside an alignment", c)
			invariants.Check(!ch.ended, "align: channel %d blocked and ended", c)
		}
		if ch.recording != 0 {
			recording++
			cp := a.find(ch.recording)
			invariants.Check(cp != nil && cp.unaligned && cp.recording.Contains(uint32(c)),
				"align: channel %d records checkpoint %d, which is not recording it", c, ch.recording)
		}
		if ch.ended {
			ended++
		}
	}
	invariants.Check(ended == a.ended, "align: %d channels ended, counted %d", ended, a.ended)
	invariants.Check(len(a.pending)+len(a.free) == a.cfg.maxConcurrent(), "align: checkpoint leaked")
	invariants.Check(a.cfg.Mode == AtLeastOnce || len(a.pending) <= 1, "align: %d pending exactly-once", len(a.pending))
	total := 0
	for i, cp := range a.pending {
		invariants.Check(i == 0 || a.pending[i-1].ID < cp.ID, "align: pending ids out of order")
		invariants.Check(cp.aligned <= len(a.chans) && (cp.unaligned || cp.aligned < len(a.chans)),
			"align: checkpoint %d aligned count %d of %d", cp.ID, cp.aligned, len(a.chans))
		total += int(cp.recording.GetCardinality())
	}
	invariants.Check(total == recording, "align: %d channels recording, bitmaps say %d", recording, total)
}
