// Package testseed gives a randomised test its seed: a fresh one, logged so
// that a failure can be replayed, or the one a flag (or, if a package names
// one, an environment variable) asks for.
//
// A package's tests declare their seed source once, at package level, so
// that the flag is registered before flag parsing:
//
//	var seeds = testseed.Flag("snapshot.seed", "SNAPSHOT_SEED")
//
// and each randomised test starts with
//
//	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
//
// `go test -run TestX -snapshot.seed=N ./snapshot/` (or SNAPSHOT_SEED=N)
// replays the run that logged seed N.
package testseed

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Source is where a package's randomised tests get their seeds.
type Source struct {
	name string // the flag's name
	env  string // the environment variable's, or ""
	flag *uint64
}

// Flag registers the flag name (on the command line's flag set) and returns
// the source that reads it, and, when the flag is not set and env is not
// empty, the environment variable env. Call it from a package-level
// variable declaration.
func Flag(name, env string) *Source {
	usage := "replay randomised tests with this seed (0: pick one and log it)"
	if env != "" {
		usage += "; also $" + env
	}
	return &Source{name: name, env: env, flag: flag.Uint64(name, 0, usage)}
}

// Seed returns the seed for t: the flag's, else the environment variable's,
// else a random one; it logs the seed with how to replay it. A malformed
// environment variable fails t.
func (s *Source) Seed(t testing.TB) uint64 {
	t.Helper()
	seed := *s.flag
	if v := os.Getenv(s.env); seed == 0 && s.env != "" && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", s.env, v, err)
		}
		seed = n
	}
	for seed == 0 {
		seed = rand.Uint64()
	}
	if s.env != "" {
		t.Logf("seed %d (replay with -%s=%d or %s=%d)", seed, s.name, seed, s.env, seed)
	} else {
		t.Logf("seed %d (replay with -%s=%d)", seed, s.name, seed)
	}
	return seed
}
