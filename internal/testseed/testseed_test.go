package testseed

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what the source logs.
type recorder struct {
	testing.TB
	logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, format)
	r.TB.Logf(format, args...)
}

// TestSeedPrecedence: the flag wins over the environment variable, which
// wins over a fresh seed; a fresh seed is never 0 and differs between calls.
func TestSeedPrecedence(t *testing.T) {
	s := Flag("testseed.test", "TESTSEED_TEST")
	rec := &recorder{TB: t}
	t.Setenv("TESTSEED_TEST", "")
	a, b := s.Seed(rec), s.Seed(rec)
	if a == 0 || b == 0 || a == b {
		t.Fatalf("fresh seeds %d and %d", a, b)
	}
	t.Setenv("TESTSEED_TEST", "42")
	if got := s.Seed(rec); got != 42 {
		t.Fatalf("with $TESTSEED_TEST=42: seed %d", got)
	}
	*s.flag = 7
	defer func() { *s.flag = 0 }()
	if got := s.Seed(rec); got != 7 {
		t.Fatalf("with the flag at 7 and $TESTSEED_TEST=42: seed %d", got)
	}
	if len(rec.logs) != 4 || !strings.Contains(rec.logs[0], "replay with") {
		t.Fatalf("logged %q, want a replay line per seed", rec.logs)
	}
}
