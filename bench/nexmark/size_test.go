package nexmark

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestLayout pins the sizes doc.go promises for ring frames.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Person", unsafe.Sizeof(Person{}), 120},
		{"Auction", unsafe.Sizeof(Auction{}), 224},
		{"Bid", unsafe.Sizeof(Bid{}), 48},
		{"Extra", unsafe.Sizeof(Extra{}), 8},
	} {
		if c.got != c.want {
			t.Errorf("sizeof(%s) = %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestEventPointerFree checks that an Event holds no pointers of any kind,
// so it may be copied into ring memory (DESIGN.md, invariant 5).
func TestEventPointerFree(t *testing.T) {
	var walk func(ty reflect.Type, path string)
	walk = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				f := ty.Field(i)
				walk(f.Type, path+"."+f.Name)
			}
		case reflect.Array:
			walk(ty.Elem(), path+"[]")
		case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float64:
		default:
			t.Errorf("%s is a %v, which may hold a pointer", path, ty.Kind())
		}
	}
	walk(reflect.TypeOf(Event{}), "Event")
}
