package nexmark

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPow10Accuracy bounds pow10's relative error against math.Pow, which
// nextPrice's tie margin of 1e-4 (absolute, at prices up to 1e8) relies on.
func TestPow10Accuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 1))
	worst := 0.0
	check := func(y float64) {
		want := math.Pow(10, y)
		if rel := math.Abs(pow10(y)-want) / want; rel > worst {
			worst = rel
		}
	}
	for i := range 6001 {
		check(float64(i) / 1000)
	}
	for range 1_000_000 {
		check(rng.Float64() * 6)
	}
	if worst > 1e-13 {
		t.Fatalf("pow10 relative error up to %g, want <= 1e-13", worst)
	}
	t.Logf("pow10 worst relative error %g", worst)
}

// TestPriceMatchesPow checks that the fast price path rounds exactly as
// javaRound(math.Pow(10, 6u) * 100) does, draw for draw.
func TestPriceMatchesPow(t *testing.T) {
	seed := int64(seeds.Seed(t) >> 1)
	fast, slow := newJavaRandom(seed), newJavaRandom(seed)
	for i := range 2_000_000 {
		got := nextPrice(&fast)
		want := javaRound(math.Pow(10, slow.nextDouble()*6) * 100)
		if got != want {
			t.Fatalf("draw %d: price %d, math.Pow says %d", i, got, want)
		}
	}
}
