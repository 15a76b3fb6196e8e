package nexmark

// javaRandom is a bit-exact port of java.util.Random, the 48-bit linear
// congruential generator specified in the Java SE API documentation of
// java.util.Random (and in Knuth, TAOCP vol. 2, §3.2.1):
//
//	setSeed(s):  seed = (s ^ 0x5DEECE66D) & (2^48 - 1)
//	next(bits):  seed = (seed * 0x5DEECE66D + 0xB) & (2^48 - 1)
//	             return (int)(seed >>> (48 - bits))
//
// Every public method below follows the algorithm the Java documentation
// gives for it, including the Java int and long overflow behaviour, so a
// seed yields the same sequence here as in any JVM. Beam's Nexmark generator
// seeds one Random with each event id; reproducing it bit for bit is what
// makes this generator's events equal Beam's.
//
// It is a value type with no pointers: seeding one costs two instructions,
// so the generator seeds a fresh one per event instead of allocating.
type javaRandom struct {
	seed uint64 // the 48-bit state
}

const (
	jrMultiplier = 0x5DEECE66D
	jrAddend     = 0xB
	jrMask       = 1<<48 - 1
)

// newJavaRandom is `new java.util.Random(seed)`.
func newJavaRandom(seed int64) javaRandom {
	return javaRandom{seed: (uint64(seed) ^ jrMultiplier) & jrMask}
}

// next is Random.next(bits): the top bits of the advanced state, as a
// (possibly negative) Java int.
func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*jrMultiplier + jrAddend) & jrMask
	return int32(r.seed >> (48 - bits))
}

// nextInt is Random.nextInt(): 32 random bits as a signed int.
func (r *javaRandom) nextInt() int32 { return r.next(32) }

// nextIntn is Random.nextInt(bound) for bound > 0: the power-of-two fast path
// takes the high bits; otherwise the rejection loop discards the top partial
// range, detected, as in Java, by int32 overflow of u - r + (bound-1).
// Callers guarantee bound > 0 (Config.Validate checks every configured bound).
func (r *javaRandom) nextIntn(bound int32) int32 {
	x := r.next(31)
	m := bound - 1
	if bound&m == 0 {
		return int32((int64(bound) * int64(x)) >> 31)
	}
	for u := x; ; u = r.next(31) {
		x = u % bound
		if u-x+m >= 0 { // NB: int32 arithmetic; a negative sum is Java's overflow test.
			return x
		}
	}
}

// nextInt13 and nextInt26 are nextIntn(13) and nextIntn(26) with constant
// divisors, which the compiler turns into multiplications: string
// generation draws them for every character.
func (r *javaRandom) nextInt13() int32 {
	for {
		u := r.next(31)
		if x := u % 13; u-x+12 >= 0 {
			return x
		}
	}
}

func (r *javaRandom) nextInt26() int32 {
	for {
		u := r.next(31)
		if x := u % 26; u-x+25 >= 0 {
			return x
		}
	}
}

// nextLong is Random.nextLong(): ((long)next(32) << 32) + next(32), with the
// second term sign-extended exactly as Java adds an int to a long.
func (r *javaRandom) nextLong() int64 {
	hi := int64(r.next(32))
	lo := int64(r.next(32))
	return hi<<32 + lo
}

// nextDouble is Random.nextDouble(): 53 random bits scaled to [0, 1).
func (r *javaRandom) nextDouble() float64 {
	hi := int64(r.next(26))
	lo := int64(r.next(27))
	return float64(hi<<27+lo) * (1.0 / (1 << 53))
}

// nextBoolean is Random.nextBoolean().
func (r *javaRandom) nextBoolean() bool { return r.next(1) != 0 }

// nextLongn is Beam's LongGenerator.nextLong(random, n): nextInt(n) when n
// fits an int, else the (skewed) |nextLong() % n|. Java's % truncates toward
// zero like Go's, so the absolute value is always below n.
func (r *javaRandom) nextLongn(n int64) int64 {
	if n < 1<<31-1 {
		return int64(r.nextIntn(int32(n)))
	}
	v := r.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}
