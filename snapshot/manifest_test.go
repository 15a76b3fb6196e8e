package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func sampleManifest() *manifest {
	return &manifest{
		id: 9,
		meta: Meta{MaxParallelism: 16, Parallelism: map[string]int{"count": 4, "src": 2},
			States:         []StateInfo{{"count", "reduce", "struct{A int64}"}, {"count", "z", ""}, {"src", "position", "bytes"}},
			StatesRecorded: true, Run: 3, Final: true},
		entries: []manifestEntry{
			{key: entryKey{kind: KindKeyGroup, op: "count", a: 3}, origin: 7, length: 100, checksum: 0xfeed},
			{key: entryKey{kind: KindKeyGroup, op: "count", a: 15}, origin: 9, length: 0, checksum: checksum(nil)},
			{key: entryKey{kind: KindSourcePosition, op: "src", a: 1}, origin: 9, length: 8, checksum: 1},
			{key: entryKey{kind: KindChannelState, op: "count", a: 2, b: 7}, origin: 9, length: 5, checksum: 2},
		},
	}
}

// TestManifestRoundTrip: encode then decode gives the same manifest, and
// the encoding is deterministic (operators sorted).
func TestManifestRoundTrip(t *testing.T) {
	t.Run("plain", func(t *testing.T) { manifestRoundTrip(t, sampleManifest()) })
	t.Run("job record", func(t *testing.T) {
		m := sampleManifest()
		m.meta.Job = []byte("the job's record")
		manifestRoundTrip(t, m)
	})
	t.Run("empty job record", func(t *testing.T) {
		m := sampleManifest()
		m.meta.Job = []byte{}
		manifestRoundTrip(t, m)
	})
}

func manifestRoundTrip(t *testing.T, m *manifest) {
	sortEntries(m.entries)
	if err := m.validate(); err != nil {
		t.Fatal(err)
	}
	enc := m.encode()
	back, err := decodeManifest(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.id != m.id || back.meta.MaxParallelism != 16 || back.meta.Parallelism["src"] != 2 ||
		len(back.entries) != len(m.entries) || !slices.Equal(back.meta.States, m.meta.States) ||
		!back.meta.StatesRecorded || back.meta.Run != 3 || !back.meta.Final ||
		!bytes.Equal(back.meta.Job, m.meta.Job) || (back.meta.Job == nil) != (m.meta.Job == nil) {
		t.Fatalf("decoded %+v, want %+v", back, m)
	}
	for i := range m.entries {
		if back.entries[i] != m.entries[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, back.entries[i], m.entries[i])
		}
	}
	if !bytes.Equal(back.encode(), enc) {
		t.Fatal("re-encoding differs")
	}
	// Every truncation is detected.
	for n := 0; n < len(enc); n++ {
		if _, err := decodeManifest(enc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: %v, want ErrCorrupt", n, len(enc), err)
		}
	}
	// Every single-bit flip is detected.
	for i := 0; i < len(enc)*8; i++ {
		b := bytes.Clone(enc)
		b[i/8] ^= 1 << (i % 8)
		if _, err := decodeManifest(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}

// insertionSortEntries is the obvious sort by compareEntryKeys, the
// reference sortEntries is checked against.
func insertionSortEntries(es []manifestEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && compareEntryKeys(es[j-1].key, es[j].key) > 0; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
}

// FuzzDecodeManifest: arbitrary bytes never panic the decoder, and what it
// accepts re-encodes to the same bytes.
//
//	go test -run - -fuzz FuzzDecodeManifest ./snapshot/
func FuzzDecodeManifest(f *testing.F) {
	m := sampleManifest()
	sortEntries(m.entries)
	f.Add(m.encode())
	f.Add((&manifest{id: 1, meta: Meta{MaxParallelism: 1, Parallelism: map[string]int{}}}).encode())
	f.Add([]byte("RFCM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(m.encode(), b) {
			t.Fatal("accepted manifest does not re-encode to its bytes")
		}
	})
}

func TestEntryKeyEncoding(t *testing.T) {
	for _, k := range []entryKey{
		{kind: KindKeyGroup, op: "a", a: 0},
		{kind: KindChannelState, op: "join-left", a: 3, b: 1 << 31},
		{kind: KindSinkTxn, op: string(bytes.Repeat([]byte{'z'}, OperatorIDMaxLen)), a: MaxParallelismLimit - 1},
	} {
		got, err := decodeEntryKey(appendEntryKey(nil, k))
		if err != nil || got != k {
			t.Fatalf("decode(encode(%v)) = %v, %v", k, got, err)
		}
	}
	if _, err := decodeEntryKey([]byte{1, 5, 'a'}); err == nil {
		t.Fatal("short entry key decoded")
	}
	// Key groups of one operator sort by number, so ranges are contiguous.
	if compareEntryKeys(entryKey{kind: KindKeyGroup, op: "x", a: 255}, entryKey{kind: KindKeyGroup, op: "x", a: 256}) >= 0 {
		t.Fatal("key group 255 does not sort before 256")
	}
}

// TestCompareEntryKeysOrdersEncodings: the field-wise comparison agrees
// with bytes.Compare on the encodings (the order manifests and blob tables
// are written in) for random keys whose fields often tie.
func TestCompareEntryKeysOrdersEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	ops := []string{"a", "b", "ab", "ba", "count/state", "count/statf", "zz", strings.Repeat("y", OperatorIDMaxLen)}
	key := func() entryKey {
		return entryKey{
			kind: Kind(1 + rng.IntN(int(kindEnd-1))),
			op:   ops[rng.IntN(len(ops))],
			a:    uint32(rng.IntN(3)) << (8 * rng.IntN(4)),
			b:    uint32(rng.IntN(3)) << (8 * rng.IntN(4)),
		}
	}
	for range 20000 {
		x, y := key(), key()
		want := bytes.Compare(appendEntryKey(nil, x), appendEntryKey(nil, y))
		if got := compareEntryKeys(x, y); got != want {
			t.Fatalf("compareEntryKeys(%v, %v) = %d, the encodings compare %d", x, y, got, want)
		}
	}
}

// TestSortEntries: the packed-key sort puts random entries (a few operator
// ids of different lengths, every kind, tied fields) in the order of the
// obvious sort.
func TestSortEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(seeds.Seed(t), 0))
	ops := []string{"b", "a", "ab", "ba", "count/state", "count/statf", "zz"}
	for round := range 200 {
		es := make([]manifestEntry, rng.IntN(300))
		for i := range es {
			es[i] = manifestEntry{
				key: entryKey{
					kind: Kind(1 + rng.IntN(int(kindEnd-1))),
					op:   ops[rng.IntN(1+rng.IntN(len(ops)))],
					a:    uint32(rng.IntN(4)) << (8 * rng.IntN(4)),
					b:    uint32(rng.IntN(4)) << (8 * rng.IntN(4)),
				},
				origin: uint64(i), // tells apart entries with equal keys
			}
		}
		want := slices.Clone(es)
		insertionSortEntries(want)
		sortEntries(es)
		for i := range es {
			if compareEntryKeys(es[i].key, want[i].key) != 0 {
				t.Fatalf("round %d: entry %d is %v, want %v", round, i, es[i].key, want[i].key)
			}
		}
	}
}

// TestManifestDeltaChains: validation rejects a delta whose base or
// predecessor is missing.
func TestManifestDeltaChains(t *testing.T) {
	meta := Meta{MaxParallelism: 4, Parallelism: map[string]int{"op": 1}}
	entry := func(b uint32) manifestEntry {
		return manifestEntry{key: entryKey{kind: KindKeyGroup, op: "op", a: 1, b: b}, origin: 1}
	}
	for _, tc := range []struct {
		bs   []uint32
		want string
	}{
		{[]uint32{0, 1, 2}, ""},
		{[]uint32{1}, `keygroup op="op" kg=1 delta=1 without keygroup op="op" kg=1 before it`},
		{[]uint32{0, 2}, `delta=2 without keygroup op="op" kg=1 delta=1 before it`},
	} {
		m := &manifest{id: 1, meta: meta}
		for _, b := range tc.bs {
			m.entries = append(m.entries, entry(b))
		}
		err := m.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("chain %v: %v, want %q", tc.bs, err, tc.want)
		}
	}
}

// TestManifestVersion1 checks that a manifest of format version 1, which
// has no declared states, still decodes, saying that it records none; and
// that declared states out of order fail validation.
func TestManifestVersion1(t *testing.T) {
	m := sampleManifest()
	sortEntries(m.entries)
	m.meta.States = nil
	enc := m.encode()
	body := enc[:len(enc)-manifestTrailerLen-4-8-4] // without the state count, run and flags
	body[4] = 1                                     // format version 1
	v1 := binary.LittleEndian.AppendUint64(slices.Clone(body), checksum(body))
	back, err := decodeManifest(v1)
	if err != nil {
		t.Fatal(err)
	}
	if back.meta.StatesRecorded || len(back.meta.States) != 0 || len(back.entries) != len(m.entries) {
		t.Fatalf("decoded version 1 as %+v: want its entries and no states recorded", back.meta)
	}
	m = sampleManifest()
	sortEntries(m.entries)
	m.meta.States[0], m.meta.States[1] = m.meta.States[1], m.meta.States[0]
	if err := m.validate(); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("states out of order: validate returned %v", err)
	}
}
