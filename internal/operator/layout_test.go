package operator

import (
	"errors"
	"reflect"
	"testing"
)

// TestLayout checks that a layout changes with a field's type, a field
// added or renamed, and an int's size, and not with a type's name.
func TestLayout(t *testing.T) {
	type a struct {
		Key uint64
		V   int64
	}
	type renamedType struct {
		Key uint64
		V   int64
	}
	type list struct {
		Next *list
		Tags []string
		M    map[string][2]int32
	}
	for _, c := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[a](), "struct{Key uint64; V int64}"},
		{reflect.TypeFor[renamedType](), "struct{Key uint64; V int64}"},
		{reflect.TypeFor[struct {
			Key uint64
			V   float64
		}](), "struct{Key uint64; V float64}"},
		{reflect.TypeFor[int](), "int64"},
		{reflect.TypeFor[int32](), "int32"},
		{reflect.TypeFor[list](), "struct{Next *operator.list; Tags []string; M map[string][2]int32}"},
	} {
		if got := Layout(c.typ); got != c.want {
			t.Errorf("Layout(%v) = %q, want %q", c.typ, got, c.want)
		}
	}
}

// TestDeclareNames checks that a state name declared twice, empty, or
// holding '/' is refused.
func TestDeclareNames(t *testing.T) {
	ctx := &Context{Operator: "op"}
	if err := ctx.Declare("count", "int64"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"count", "", "a/b"} {
		if err := ctx.Declare(name, "int64"); !errors.Is(err, ErrStateName) {
			t.Errorf("Declare(%q) returned %v, want ErrStateName", name, err)
		}
	}
	if got := ctx.Declared(); len(got) != 1 || got[0] != (StateDecl{"count", "int64"}) {
		t.Errorf("declared %v, want count only", got)
	}
}
