package nexmark

import (
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
