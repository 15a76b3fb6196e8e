package nexmark

import "fmt"

// Text16, Text32 and Text128 are strings stored inline: byte 0 holds the
// length, the rest the bytes. They keep Person and Auction pointer-free and
// fixed-size, so an Event moves through a ring as a plain copy and the
// generator never allocates. Every string the generator makes fits: names
// and e-mail addresses are at most 15 bytes, credit cards 19, item names 19,
// descriptions 99.
type (
	Text16  [16]byte
	Text32  [32]byte
	Text128 [128]byte
)

// String returns a copy of the text (it allocates).
func (t *Text16) String() string { return string(textBytes(t[:])) }

// Bytes returns the text; the slice aliases t.
func (t *Text16) Bytes() []byte { return textBytes(t[:]) }

// Set stores s, or reports that it does not fit.
func (t *Text16) Set(s string) error { return setText(t[:], s) }

// String returns a copy of the text (it allocates).
func (t *Text32) String() string { return string(textBytes(t[:])) }

// Bytes returns the text; the slice aliases t.
func (t *Text32) Bytes() []byte { return textBytes(t[:]) }

// Set stores s, or reports that it does not fit.
func (t *Text32) Set(s string) error { return setText(t[:], s) }

// String returns a copy of the text (it allocates).
func (t *Text128) String() string { return string(textBytes(t[:])) }

// Bytes returns the text; the slice aliases t.
func (t *Text128) Bytes() []byte { return textBytes(t[:]) }

// Set stores s, or reports that it does not fit.
func (t *Text128) Set(s string) error { return setText(t[:], s) }

func textBytes(b []byte) []byte {
	n := int(b[0])
	if n > len(b)-1 { // only a hand-corrupted value; never read past the array
		n = len(b) - 1
	}
	return b[1 : 1+n]
}

func setText(b []byte, s string) error {
	if len(s) > len(b)-1 {
		return fmt.Errorf("nexmark: text %q is %d bytes, capacity %d", s, len(s), len(b)-1)
	}
	b[0] = byte(len(s))
	clear(b[1+copy(b[1:], s):]) // so that equal texts are == equal
	return nil
}

// Extra is the `extra` padding field of an event, stored as the recipe that
// makes it rather than its bytes: the java.util.Random state at the point
// where Beam's nextExactString starts, and the length, in 8 bytes. AppendTo replays it
// and yields exactly Beam's string. Extra is always the last field Beam
// draws, so deferring it changes no other field; it keeps Event small (the
// padding averages 68 bytes for a bid, ~400 for an auction) and spares
// queries that never read it (all of q0-q11) the cost of making it.
type Extra struct {
	// The javaRandom state before the first character in the low 48 bits,
	// the length in the top 16 (Config.Validate keeps it below 2^16).
	packed uint64
}

func makeExtra(state uint64, n int) Extra { return Extra{packed: state&jrMask | uint64(n)<<48} }

// Len is the length of the extra string in bytes.
func (x Extra) Len() int { return int(x.packed >> 48) }

// AppendTo appends the extra string to dst: Beam's nextExactString, six
// base-26 characters per nextInt(). Java's % keeps the dividend's sign, so a
// negative draw yields characters below 'a' (down to 'H'), as in Beam.
func (x Extra) AppendTo(dst []byte) []byte {
	r := javaRandom{seed: x.packed & jrMask}
	var rnd int32
	left := 0
	for range x.Len() {
		if left == 0 {
			rnd = r.nextInt()
			left = 6 // log_26(2^31)
		}
		dst = append(dst, byte('a'+rnd%26))
		rnd /= 26
		left--
	}
	return dst
}

// String returns the extra string (it allocates).
func (x Extra) String() string { return string(x.AppendTo(nil)) }
