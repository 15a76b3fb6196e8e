package operator

import (
	"encoding/binary"
	"fmt"
)

// Channel state — the in-flight DATA frames an unaligned checkpoint records
// for an input or output channel — is stored as a run of frames:
//
//	+----------------+-----------------+---------------+
//	| count uvarint  | length uvarint  | payload bytes | ...
//	+----------------+-----------------+---------------+
//
// The payload is the frame's payload exactly as the ring carried it, so a
// restore replays it through the channel's own decoder.

// AppendChannelFrame appends one recorded frame to dst.
func AppendChannelFrame(dst []byte, count int, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(count))
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	return append(dst, payload...)
}

// ReadChannelFrames calls f for every frame recorded in state, in order.
func ReadChannelFrames(state []byte, f func(count int, payload []byte) error) error {
	for len(state) > 0 {
		count, k1 := binary.Uvarint(state)
		if k1 <= 0 || count > 1<<24 {
			return fmt.Errorf("channel state: bad record count")
		}
		n, k2 := binary.Uvarint(state[k1:])
		if k2 <= 0 || n > uint64(len(state)-k1-k2) {
			return fmt.Errorf("channel state: frame of %d bytes runs past the end", n)
		}
		start := k1 + k2
		if err := f(int(count), state[start:start+int(n)]); err != nil {
			return err
		}
		state = state[start+int(n):]
	}
	return nil
}
