package cow

import (
	"flag"
	"testing"

	"github.com/ringflow/ringflow/internal/testseed"
	"github.com/ringflow/ringflow/keygroups"
)

var (
	seeds    = testseed.Flag("cow.seed", "COW_SEED")
	longFlag = flag.Int("cow.long", 1, "multiply the randomised tests' length by this factor (stress runs)")
)

func counterConfig(maxP int, r keygroups.Range) Config[uint64, int64] {
	return Config[uint64, int64]{
		Hash:           keygroups.HashUint64,
		MaxParallelism: maxP,
		KeyGroups:      r,
		KeyCodec:       Uint64Codec{},
		ValueCodec:     Int64Codec{},
	}
}

func newCounters(t testing.TB, maxP int, r keygroups.Range) *Map[uint64, int64] {
	t.Helper()
	m, err := New(counterConfig(maxP, r))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// snapshotContents reads every key group of s through All, checking Len.
func snapshotContents(t testing.TB, s *Snapshot[uint64, int64]) map[uint64]int64 {
	t.Helper()
	got := make(map[uint64]int64)
	for kg := s.KeyGroups().Start; kg < s.KeyGroups().End; kg++ {
		n := 0
		for k, v := range s.All(kg) {
			if _, dup := got[k]; dup {
				t.Fatalf("snapshot v%d: key %d seen twice", s.Version(), k)
			}
			got[k] = v
			n++
		}
		if n != s.Len(kg) {
			t.Fatalf("snapshot v%d kg %d: Len %d, iterated %d", s.Version(), kg, s.Len(kg), n)
		}
	}
	return got
}

// mapContents reads every key group of m through All, checking KeyGroupLen.
func mapContents(t testing.TB, m *Map[uint64, int64]) map[uint64]int64 {
	t.Helper()
	got := make(map[uint64]int64)
	for kg := m.KeyGroups().Start; kg < m.KeyGroups().End; kg++ {
		n := 0
		for k, v := range m.All(kg) {
			got[k] = v
			n++
		}
		if n != m.KeyGroupLen(kg) {
			t.Fatalf("kg %d: KeyGroupLen %d, iterated %d", kg, m.KeyGroupLen(kg), n)
		}
	}
	if len(got) != m.Len() {
		t.Fatalf("Len %d, iterated %d distinct keys", m.Len(), len(got))
	}
	return got
}

func diffMaps(t testing.TB, what string, got, want map[uint64]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s: key %d = %d (present %v), want %d", what, k, g, ok, v)
		}
	}
}

func cloneMap(m map[uint64]int64) map[uint64]int64 {
	c := make(map[uint64]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// roundTrip serialises every key group of s and loads them into a fresh Map.
func roundTrip(t testing.TB, s *Snapshot[uint64, int64], cfg Config[uint64, int64]) *Map[uint64, int64] {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for kg := s.KeyGroups().Start; kg < s.KeyGroups().End; kg++ {
		buf, err = s.AppendKeyGroup(buf[:0], kg)
		if err != nil {
			t.Fatalf("AppendKeyGroup(%d): %v", kg, err)
		}
		got, err := m.LoadKeyGroup(buf)
		if err != nil || got != kg {
			t.Fatalf("LoadKeyGroup of kg %d = %d, %v", kg, got, err)
		}
	}
	return m
}
