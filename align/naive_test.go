package align

import (
	"fmt"
	"sort"
)

// naiveAligner is the oracle of TestRandomAgainstNaive: the same rules as
// Aligner, written as plainly as possible (maps, full rescans, no counters,
// no reuse), so that bookkeeping mistakes in Aligner show up as
// disagreements.
type naiveAligner struct {
	cfg     Config
	ended   map[int]bool
	pending []*naiveCheckpoint // increasing ids
	maxID   uint64
	nowNs   int64
	events  []string

	endReported bool
}

type naiveCheckpoint struct {
	b         Barrier
	read      map[int]bool
	recording map[int]bool
	unaligned bool
}

func newNaive(cfg Config) *naiveAligner {
	return &naiveAligner{cfg: cfg, ended: map[int]bool{}}
}

// step applies in and returns the events it caused, sorted.
func (n *naiveAligner) step(in Input) []string {
	n.events = n.events[:0]
	n.nowNs = in.NowNs
	c, b := in.Channel, in.Barrier
	switch in.Type {
	case InputBarrier:
		if p := n.lookup(b, true); p != nil {
			p.read[c] = true
			switch {
			case n.cfg.Mode == AtLeastOnce:
				if n.allAligned(p) {
					n.complete(p)
				}
			case p.unaligned:
				n.stop(p, c)
			case n.allAligned(p):
				n.complete(p)
			case n.switchNow(p, b.Kind):
				n.switchUnaligned(p)
			}
		}
	case InputPeekedBarrier:
		if p := n.lookup(b, false); p != nil && n.cfg.Mode == ExactlyOnce {
			if p.unaligned {
				n.stop(p, c)
			} else if n.switchNow(p, b.Kind) {
				n.switchUnaligned(p)
			}
		}
	case InputEnd:
		n.end(c)
	case InputAbort:
		if p := n.find(b.ID); p != nil {
			n.abort(p, ReasonAborted)
		} else if b.ID > n.maxID {
			n.maxID = b.ID
		}
	}
	for _, p := range n.pending {
		if n.switchNow(p, p.b.Kind) {
			n.switchUnaligned(p)
			break
		}
	}
	sort.Strings(n.events)
	return n.events
}

func (n *naiveAligner) end(c int) {
	n.ended[c] = true
	for again := true; again; {
		again = false
		for _, p := range n.pending {
			if p.unaligned {
				n.stop(p, c)
			} else if n.allAligned(p) {
				n.complete(p)
				again = true
				break
			}
		}
	}
	if len(n.ended) == n.cfg.Channels && !n.endReported {
		n.events = append(n.events, "end-of-input")
		n.endReported = true
	}
}

func (n *naiveAligner) find(id uint64) *naiveCheckpoint {
	for _, p := range n.pending {
		if p.b.ID == id {
			return p
		}
	}
	return nil
}

func (n *naiveAligner) lookup(b Barrier, read bool) *naiveCheckpoint {
	if n.cfg.Mode == AtLeastOnce && !read {
		return nil
	}
	if p := n.find(b.ID); p != nil {
		return p
	}
	if b.ID <= n.maxID {
		return nil
	}
	if n.cfg.Mode == ExactlyOnce && len(n.pending) > 0 {
		if !read {
			return nil
		}
		n.abort(n.pending[0], ReasonSubsumed)
	}
	if len(n.pending) == n.cfg.maxConcurrent() {
		n.abort(n.pending[0], ReasonTooMany)
	}
	p := &naiveCheckpoint{b: b, read: map[int]bool{}, recording: map[int]bool{}}
	n.pending = append(n.pending, p)
	n.maxID = b.ID
	return p
}

func (n *naiveAligner) allAligned(p *naiveCheckpoint) bool {
	for c := 0; c < n.cfg.Channels; c++ {
		if !p.read[c] && !n.ended[c] {
			return false
		}
	}
	return true
}

func (n *naiveAligner) switchNow(p *naiveCheckpoint, k Kind) bool {
	if n.cfg.Mode != ExactlyOnce || n.cfg.AlignmentTimeout < 0 || p.unaligned || p.b.Kind == KindSavepoint {
		return false
	}
	return k == KindUnaligned || n.cfg.AlignmentTimeout == 0 ||
		n.nowNs-p.b.TriggerNs >= int64(n.cfg.AlignmentTimeout)
}

func (n *naiveAligner) switchUnaligned(p *naiveCheckpoint) {
	p.unaligned = true
	n.events = append(n.events, fmt.Sprintf("snapshot %d unaligned", p.b.ID),
		fmt.Sprintf("forward %d %v", p.b.ID, KindUnaligned))
	for c := 0; c < n.cfg.Channels; c++ {
		if !p.read[c] && !n.ended[c] {
			p.recording[c] = true
			n.events = append(n.events, fmt.Sprintf("record %d ch%d", p.b.ID, c))
		}
	}
	if len(p.recording) == 0 {
		n.finish(p)
	}
}

func (n *naiveAligner) stop(p *naiveCheckpoint, c int) {
	if !p.recording[c] {
		return
	}
	delete(p.recording, c)
	n.events = append(n.events, fmt.Sprintf("stop-record %d ch%d", p.b.ID, c))
	if len(p.recording) == 0 {
		n.finish(p)
	}
}

func (n *naiveAligner) complete(p *naiveCheckpoint) {
	for n.pending[0] != p {
		n.abort(n.pending[0], ReasonSubsumed)
	}
	k := p.b.Kind
	if k == KindUnaligned {
		k = KindAligned
	}
	n.events = append(n.events, fmt.Sprintf("snapshot %d aligned", p.b.ID), fmt.Sprintf("forward %d %v", p.b.ID, k))
	n.finish(p)
}

func (n *naiveAligner) abort(p *naiveCheckpoint, r Reason) {
	for c := range p.recording {
		n.events = append(n.events, fmt.Sprintf("stop-record %d ch%d", p.b.ID, c))
	}
	n.events = append(n.events, fmt.Sprintf("abort %d %v", p.b.ID, r))
	n.remove(p)
}

func (n *naiveAligner) finish(p *naiveCheckpoint) {
	n.events = append(n.events, fmt.Sprintf("complete %d unaligned=%v", p.b.ID, p.unaligned))
	n.remove(p)
}

func (n *naiveAligner) remove(p *naiveCheckpoint) {
	for i, q := range n.pending {
		if q == p {
			n.pending = append(n.pending[:i], n.pending[i+1:]...)
			return
		}
	}
}

// blocked derives channel c's block from the pending checkpoints.
func (n *naiveAligner) blocked(c int) bool {
	for _, p := range n.pending {
		if n.cfg.Mode == ExactlyOnce && !p.unaligned && p.read[c] {
			return true
		}
	}
	return false
}

// recordingFor derives which checkpoint channel c records.
func (n *naiveAligner) recordingFor(c int) uint64 {
	for _, p := range n.pending {
		if p.recording[c] {
			return p.b.ID
		}
	}
	return 0
}

// eventsOf renders Aligner actions as the naive aligner's events, sorted.
func eventsOf(acts []Action) []string {
	var out []string
	for _, a := range acts {
		id := a.Barrier.ID
		switch a.Op {
		case OpSnapshot:
			out = append(out, fmt.Sprintf("snapshot %d %s", id, alignedWord(a.Unaligned)))
		case OpForward:
			out = append(out, fmt.Sprintf("forward %d %v", id, a.Barrier.Kind))
		case OpRecord:
			out = append(out, fmt.Sprintf("record %d ch%d", id, a.Channel))
		case OpStopRecord:
			out = append(out, fmt.Sprintf("stop-record %d ch%d", id, a.Channel))
		case OpComplete:
			out = append(out, fmt.Sprintf("complete %d unaligned=%v", id, a.Unaligned))
		case OpAbort:
			out = append(out, fmt.Sprintf("abort %d %v", id, a.Reason))
		case OpEndOfInput:
			out = append(out, "end-of-input")
		}
	}
	sort.Strings(out)
	return out
}
