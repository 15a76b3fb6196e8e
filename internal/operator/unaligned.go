package operator

import (
	"fmt"
	"time"

	"github.com/ringflow/ringflow/align"
	"github.com/ringflow/ringflow/ring"
)

// chanRecord is the channel state being recorded for an unaligned
// checkpoint: copies of the channel's DATA frames from where recording
// started up to the checkpoint's barrier.
type chanRecord struct {
	id   uint64
	buf  []byte
	upTo uint64 // ring position up to which frames have been copied
}

// record copies DATA frame f of channel c into its channel state, once.
func (c *Channel) record(f ring.Frame) {
	if c.rec == nil || f.Type != ring.FrameData || f.End() <= c.rec.upTo {
		return
	}
	c.rec.buf = AppendChannelFrame(c.rec.buf, f.Count, f.Payload)
	c.rec.upTo = f.End()
}

// recordBuffer returns the buffer to record the channel's state into,
// called as recording starts. NB: the recording copies every frame from
// the read position to the barrier, often a ring's worth: into a fresh
// buffer, grown as it goes, that cost more in page faults and copies of
// the growing buffer than the frames themselves. So the buffer of the last
// recording is reused, and it is sized up front for what lies between the
// read position and the scan position (the barrier, if the scan met it).
func (c *Channel) recordBuffer() []byte {
	var buf []byte
	if p := c.spare.Swap(nil); p != nil {
		buf = *p
	}
	if ahead := int(c.scan - c.Reader.Pos()); c.scan > c.Reader.Pos() && cap(buf) < ahead {
		// NB: a channel frame's header is at most as long as a ring
		// frame's, so ahead bytes hold what is ahead.
		buf = make([]byte, 0, ahead)
	}
	return buf
}

// maxScan bounds the frames one scan of a channel looks at.
const maxScan = 1024

// scanBarriers looks ahead of every live channel's read position for
// barriers, copying recorded channels' frames on the way: a barrier found
// this way can start, or finish, an unaligned checkpoint before the data
// in front of it is processed — also while the task cannot run because
// its output is full.
func (t *Task) scanBarriers(now time.Time) error {
	for _, c := range t.Inputs {
		if c.ended {
			continue
		}
		if err := t.scan(c, now); err != nil {
			return err
		}
	}
	return nil
}

func (t *Task) scan(c *Channel, now time.Time) error {
	for restarts := 0; restarts < 3; restarts++ {
		p := c.Reader.PeekFrom(c.scan)
		restart := false
		for k := 0; k < maxScan && p.Next(); k++ {
			f := p.Frame()
			c.record(f)
			c.scan = f.End()
			if f.Type != ring.FrameBarrier {
				continue
			}
			b := f.Barrier()
			now := time.Now() // statistics time the barrier, not the step
			in := align.Input{Type: align.InputPeekedBarrier, Channel: c.Index, NowNs: now.UnixNano(),
				Barrier: align.Barrier{ID: b.ID, TriggerNs: b.Trigger.UnixNano(), Kind: align.Kind(b.Kind)}}
			if err := t.step(in, now); err != nil {
				return err
			}
			if c.rec != nil && c.rec.upTo < f.End() {
				// The barrier started recording behind it: copy from the
				// read position, and meet the barrier again.
				restart = true
				break
			}
		}
		if err := p.Err(); err != nil {
			return fmt.Errorf("input channel %d: %w", c.Index, err)
		}
		if !restart {
			return nil
		}
	}
	return nil
}

// replay pushes restored channel state into the channels' operators before
// they read anything from their rings.
func (t *Task) replay() error {
	for _, c := range t.Inputs {
		states := c.Replay
		c.Replay = nil
		for _, st := range states {
			err := ReadChannelFrames(st.Data, func(count int, payload []byte) error {
				f := ring.Frame{Type: ring.FrameData, Count: count, Payload: payload}
				if st.Keep != nil {
					if c.pushKept == nil {
						return fmt.Errorf("keyed channel state for a channel without a key")
					}
					return c.pushKept(f, st.Keep)
				}
				return c.push(f)
			})
			if err != nil {
				return fmt.Errorf("input channel %d: replay channel state: %w", c.Index, err)
			}
		}
	}
	return nil
}
