// Package invariants holds checks that are compiled in only for testing
// builds: under the race detector or with the build tag "invariants".
//
// Hot paths guard their assertions with Enabled, a constant, so a release
// build compiles them away entirely:
//
//	if invariants.Enabled && pos > limit {
//		panic(invariants.Failf("ring: position %d past limit %d", pos, limit))
//	}
package invariants

import "fmt"

// Enabled reports whether invariant checks are compiled in. It is a constant
// so that guarded code costs nothing in release builds.
const Enabled = raceEnabled || tagEnabled

// AssertionError is the value panicked with when an invariant is violated.
type AssertionError struct{ msg string }

func (e *AssertionError) Error() string { return "invariant violated: " + e.msg }

// Failf builds an AssertionError; callers panic with it.
func Failf(format string, args ...any) error {
	return &AssertionError{msg: fmt.Sprintf(format, args...)}
}

// Check panics with an AssertionError when ok is false and invariants are
// enabled. Prefer an explicit `if invariants.Enabled && ...` on hot paths,
// where building the arguments would itself cost something.
func Check(ok bool, format string, args ...any) {
	if Enabled && !ok {
		panic(Failf(format, args...))
	}
}
