package nexmark

import "math"

// The fixed vocabularies of Beam's PersonGenerator, kept small "so that the
// example queries will find results even with a small batch of events".
var (
	usStates   = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// fillString writes Beam's nextString(maxLength) into b and returns its
// length: 3 + nextInt(maxLength-3) characters, each `special` with
// probability 1/13 and otherwise a lower-case letter, then trimmed of spaces
// at both ends as Java's String.trim does (it removes every char <= ' ';
// only ' ' can occur). b must hold maxLength-1 bytes.
func fillString(b []byte, r *javaRandom, maxLength int32, special byte) int {
	n := int(minStringLen + r.nextIntn(maxLength-minStringLen))
	for i := range n {
		if r.nextInt13() == 0 {
			b[i] = special
		} else {
			b[i] = byte('a' + r.nextInt26())
		}
	}
	start, end := 0, n
	for start < end && b[start] <= ' ' {
		start++
	}
	for end > start && b[end-1] <= ' ' {
		end--
	}
	copy(b, b[start:end])
	clear(b[end-start : n]) // canonical: nothing but zeros past the text
	return end - start
}

// appendString appends nextString(maxLength) with the given special char.
func appendString(dst []byte, r *javaRandom, maxLength int32, special byte) []byte {
	var buf [128]byte
	n := fillString(buf[:], r, maxLength, special)
	return append(dst, buf[:n]...)
}

// setRandomText stores nextString(maxLength) in a text's backing bytes.
func setRandomText(t []byte, r *javaRandom, maxLength int32) int {
	n := fillString(t[1:], r, maxLength, ' ')
	t[0] = byte(n)
	return n
}

// nextExtra is Beam's StringsGenerator.nextExtra: a length that brings the
// event to desiredAverageSize bytes on average, ±20%, whose characters
// Extra.AppendTo makes later from the saved state. No draw happens when the
// event is already larger than the average.
func nextExtra(r *javaRandom, currentSize, desiredAverageSize int) Extra {
	if currentSize > desiredAverageSize {
		return Extra{}
	}
	d := desiredAverageSize - currentSize
	delta := int(javaRound(float64(d) * 0.2))
	size := d - delta
	if delta != 0 {
		size += int(r.nextIntn(int32(2 * delta)))
	}
	return makeExtra(r.seed, size)
}

// javaRound is Java's Math.round(double): the closest long, ties toward
// positive infinity. Arguments here are finite and far below 2^63.
func javaRound(x float64) int64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		f++
	}
	return int64(f)
}

// setCreditCard writes four zero-padded 4-digit groups separated by spaces.
func setCreditCard(t *Text32, r *javaRandom) int {
	b := t[1:]
	for g := range 4 {
		v := r.nextIntn(10000)
		o := g * 5
		if g > 0 {
			b[o-1] = ' '
		}
		b[o] = byte('0' + v/1000)
		b[o+1] = byte('0' + v/100%10)
		b[o+2] = byte('0' + v/10%10)
		b[o+3] = byte('0' + v%10)
	}
	t[0] = 19
	return 19
}

// setEmail writes nextString(7) + "@" + nextString(5) + ".com".
func setEmail(t *Text16, r *javaRandom) int {
	b := t[1:]
	n := fillString(b, r, 7, ' ')
	b[n] = '@'
	n++
	n += fillString(b[n:], r, 5, ' ')
	n += copy(b[n:], ".com")
	t[0] = byte(n)
	return n
}

// setWord stores a vocabulary word.
func setWord(b []byte, s string) int {
	b[0] = byte(len(s))
	copy(b[1:], s)
	return len(s)
}
