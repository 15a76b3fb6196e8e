package nexmark

import "math"

// nextPrice is Beam's PriceGenerator: round(10^(6u) * 100) for uniform u in
// [0, 1), log-uniform in [100, 1e8].
//
// math.Pow costs more than the rest of a bid together, so the price comes
// from pow10, which is accurate to ~1e-14 relative, whenever that value is
// more than 1e-4 from a rounding tie (x.5): there both agree on the rounded
// price whatever their last bits. Within 1e-4 of a tie (2 draws in 10,000)
// it falls back to math.Pow.
//
// NB: Java's Math.pow is only specified to within 1 ulp, and Go's math.Pow
// is a different implementation, so the price can differ from a JVM's where
// 10^(6u)*100 lies within an ulp or two of a half-integer: a chance of about
// 1e-8 per price at the top of the range, and far less below. The golden
// tests (200,000 events against a JVM) have found none.
func nextPrice(r *javaRandom) int64 {
	y := r.nextDouble() * 6.0
	x := pow10(y) * 100.0
	f := math.Floor(x)
	switch d := x - f - 0.5; {
	case d > 1e-4:
		return int64(f) + 1
	case d < -1e-4:
		return int64(f)
	}
	return javaRound(math.Pow(10.0, y) * 100.0)
}

// pow10 is 10^y for y in [0, 6], to about 1e-14 relative: 2^t with t = y*log2(10)
// split into an integer, a table step of 1/256, and a remainder below 1/256
// whose 2^d = e^(d*ln2) a degree-5 Taylor polynomial gives to ~1e-17.
func pow10(y float64) float64 {
	t := y * (math.Log2E * math.Ln10) // in [0, 19.94]: int() truncation is floor
	n := int(t)
	r := (t - float64(n)) * 256
	j := int(r)
	z := (r - float64(j)) * (math.Ln2 / 256)
	p := 1 + z*(1+z*(1.0/2+z*(1.0/6+z*(1.0/24+z*(1.0/120)))))
	return exp2Table[j&255] * p * float64(uint64(1)<<(n&63))
}

// exp2Table[j] is 2^(j/256).
var exp2Table = func() (t [256]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 256)
	}
	return t
}()
