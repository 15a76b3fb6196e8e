package invariants

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	Check(true, "never fails")
	defer func() {
		r := recover()
		if !Enabled {
			if r != nil {
				t.Fatalf("Check panicked with invariants disabled: %v", r)
			}
			return
		}
		var ae *AssertionError
		if err, ok := r.(error); !ok || !errors.As(err, &ae) {
			t.Fatalf("Check(false) panicked with %v, want *AssertionError", r)
		}
	}()
	Check(false, "x=%d", 1)
	if Enabled {
		t.Fatal("Check(false) did not panic with invariants enabled")
	}
}
