package cow

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

// craft builds a blob with a valid checksum around arbitrary content.
func craft(magic string, version byte, maxP, kg, count uint64, entries []byte) []byte {
	b := append([]byte(magic), version)
	b = binary.AppendUvarint(b, maxP)
	b = binary.AppendUvarint(b, kg)
	b = binary.AppendUvarint(b, count)
	b = append(b, entries...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func entry(k uint64, v int64) []byte {
	return Int64Codec{}.Append(Uint64Codec{}.Append(nil, k), v)
}

func TestCorruptBlobs(t *testing.T) {
	const maxP = 8
	kg := 3
	k1, k2 := keyIn(kg, maxP, 0), keyIn(kg, maxP, 1000)
	wrongKG := keyIn(kg+1, maxP, 0)
	two := append(entry(k1, 1), entry(k2, 2)...)
	src := newCounters(t, maxP, keygroups.Range{})
	_ = src.Put(k1, 1)
	_ = src.Put(k2, 2)
	snap := src.Freeze()
	good, err := snap.AppendKeyGroup(nil, kg)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":            {},
		"bad magic":        craft("RFKX", blobVersion, maxP, uint64(kg), 2, two),
		"bad version":      craft(fullMagic, 9, maxP, uint64(kg), 2, two),
		"other maxP":       craft(fullMagic, blobVersion, 16, uint64(kg), 2, two),
		"kg >= maxP":       craft(fullMagic, blobVersion, maxP, maxP, 2, two),
		"count too high":   craft(fullMagic, blobVersion, maxP, uint64(kg), 3, two),
		"count too low":    craft(fullMagic, blobVersion, maxP, uint64(kg), 1, two),
		"count huge":       craft(fullMagic, blobVersion, maxP, uint64(kg), math.MaxUint64, two),
		"key of other kg":  craft(fullMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), entry(wrongKG, 2)...)),
		"duplicate key":    craft(fullMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), entry(k1, 2)...)),
		"truncated value":  craft(fullMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), Uint64Codec{}.Append(nil, k2)...)),
		"truncated header": craft(fullMagic, blobVersion, maxP, uint64(kg), 1, nil)[:8],
	}
	for i := range len(good) {
		cases["truncated to "+itoa(i)] = good[:i]
		flipped := append([]byte(nil), good...)
		flipped[i] ^= 0x10
		cases["bit flip at "+itoa(i)] = flipped
	}
	for name, b := range cases {
		m := newCounters(t, maxP, keygroups.Range{})
		if _, err := m.LoadKeyGroup(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: LoadKeyGroup = %v, want ErrCorrupt", name, err)
		}
		if m.Len() != 0 || m.KeyGroupLen(kg) != 0 {
			t.Errorf("%s: a failed load left %d entries", name, m.Len())
		}
	}
	// The good blob loads, once.
	m := newCounters(t, maxP, keygroups.Range{})
	if got, err := m.LoadKeyGroup(good); err != nil || got != kg || m.Len() != 2 {
		t.Fatalf("good blob: kg %d, %v, %d entries", got, err, m.Len())
	}
	if _, err := m.LoadKeyGroup(good); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second load of the same key group = %v, want ErrNotEmpty", err)
	}
	if m.Len() != 2 {
		t.Fatalf("refused load changed the map: %d entries", m.Len())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestCodecs(t *testing.T) {
	for _, v := range []uint64{0, 1, math.MaxUint64} {
		b := Uint64Codec{}.Append([]byte{0xff}, v)
		if got, n, err := (Uint64Codec{}).Decode(b[1:]); err != nil || n != 8 || got != v {
			t.Fatalf("uint64 %d: %d, %d, %v", v, got, n, err)
		}
	}
	for _, v := range []int64{0, -1, 63, -64, math.MinInt64, math.MaxInt64} {
		b := Int64Codec{}.Append(nil, v)
		if got, n, err := (Int64Codec{}).Decode(b); err != nil || n != len(b) || got != v {
			t.Fatalf("int64 %d: %d, %d, %v", v, got, n, err)
		}
	}
	for _, v := range []string{"", "x", string(make([]byte, 300))} {
		b := StringCodec{}.Append(nil, v)
		if got, n, err := (StringCodec{}).Decode(b); err != nil || n != len(b) || got != v {
			t.Fatalf("string %q: %q, %d, %v", v, got, n, err)
		}
		src := BytesCodec{}.Append(nil, []byte(v))
		got, _, err := BytesCodec{}.Decode(src)
		if err != nil || string(got) != v {
			t.Fatalf("bytes %q: %q, %v", v, got, err)
		}
		if len(got) > 0 {
			src[len(src)-1] ^= 1
			if string(got) != v {
				t.Fatal("BytesCodec.Decode aliases its input")
			}
		}
	}
	bad := [][]byte{nil, {0x80}, {5, 'a'}}
	for _, b := range bad {
		if _, _, err := (StringCodec{}).Decode(b); err == nil {
			t.Errorf("StringCodec.Decode(%v) succeeded", b)
		}
		if _, _, err := (BytesCodec{}).Decode(b); err == nil {
			t.Errorf("BytesCodec.Decode(%v) succeeded", b)
		}
		if _, _, err := (Int64Codec{}).Decode(b[:min(len(b), 1)]); err == nil && len(b) < 2 {
			t.Errorf("Int64Codec.Decode(%v) succeeded", b)
		}
	}
	if _, _, err := (Uint64Codec{}).Decode([]byte{1, 2, 3}); err == nil {
		t.Error("Uint64Codec.Decode of 3 bytes succeeded")
	}
}

// FuzzLoadKeyGroup: arbitrary bytes never panic LoadKeyGroup, and whatever
// loads without error re-serialises to a blob that loads to the same map.
func FuzzLoadKeyGroup(f *testing.F) {
	src := newCounters(f, 8, keygroups.Range{})
	fillCounters(f, src, 50)
	s := src.Freeze()
	for kg := range 8 {
		b, _ := s.AppendKeyGroup(nil, kg)
		f.Add(b)
	}
	s.Release()
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newCounters(t, 8, keygroups.Range{})
		kg, err := m.LoadKeyGroup(b)
		if err != nil {
			return
		}
		snap := m.Freeze()
		defer snap.Release()
		again, err := snap.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		m2 := newCounters(t, 8, keygroups.Range{})
		if _, err := m2.LoadKeyGroup(again); err != nil {
			t.Fatalf("re-serialised blob does not load: %v", err)
		}
		diffMaps(t, "reloaded", mapContents(t, m2), mapContents(t, m))
	})
}

// TestDeltaSizeAtOnePercentChanged: when 1% of the keys change between two
// snapshots, the deltas of all key groups together are at most 10% of the
// full blobs (issue 4's acceptance), and restoring base + deltas is exact.
func TestDeltaSizeAtOnePercentChanged(t *testing.T) {
	const n = 200_000
	r := rand.New(rand.NewPCG(seeds.Seed(t), 5))
	m := newCounters(t, 128, keygroups.Range{})
	fillCounters(t, m, n)
	base := m.Freeze()
	for range n / 100 {
		p, _ := m.Upsert(uint64(r.IntN(n)))
		*p += 7
	}
	snap := m.Freeze()
	restored := roundTrip(t, base, counterConfig(128, keygroups.Range{}))
	base.Release()
	full, deltas := 0, 0
	for kg := range 128 {
		f, err := snap.AppendKeyGroup(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		d, err := snap.AppendKeyGroupDelta(nil, kg)
		if err != nil {
			t.Fatal(err)
		}
		full, deltas = full+len(f), deltas+len(d)
		if _, err := restored.ApplyKeyGroupDelta(d); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("full %d B, deltas %d B (%.2f%%)", full, deltas, 100*float64(deltas)/float64(full))
	if deltas*10 > full {
		t.Fatalf("deltas %d B exceed 10%% of the full %d B", deltas, full)
	}
	diffMaps(t, "base + deltas", mapContents(t, restored), snapshotContents(t, snap))
	snap.Release()
}

// TestDeltaGivenUpAfterManyDeletes: an interval that deletes more keys than
// the table holds has no delta (ErrNoDelta); the next interval has one.
func TestDeltaGivenUpAfterManyDeletes(t *testing.T) {
	m := newCounters(t, 1, keygroups.Range{})
	fillCounters(t, m, 3000)
	m.Freeze().Release()
	for k := range uint64(2500) {
		m.Delete(k)
	}
	s := m.Freeze()
	if _, err := s.AppendKeyGroupDelta(nil, 0); !errors.Is(err, ErrNoDelta) {
		t.Fatalf("delta after deleting 2500 of 3000 keys: %v, want ErrNoDelta", err)
	}
	s.Release()
	m.Delete(2999)
	s = m.Freeze()
	defer s.Release()
	d, err := s.AppendKeyGroupDelta(nil, 0)
	if err != nil {
		t.Fatalf("delta of the next interval: %v", err)
	}
	r := newCounters(t, 1, keygroups.Range{})
	for k := uint64(2500); k < 3000; k++ {
		_ = r.Put(k, int64(k))
	}
	if _, err := r.ApplyKeyGroupDelta(d); err != nil || r.Len() != 499 {
		t.Fatalf("apply: %v, %d entries, want 499", err, r.Len())
	}
	if _, ok := r.Get(2999); ok {
		t.Fatal("the deleted key survived the delta")
	}
}

func craftDelta(kg uint64, deleted []uint64, puts []byte, nPut uint64) []byte {
	b := append([]byte(deltaMagic), blobVersion)
	b = binary.AppendUvarint(b, 8)
	b = binary.AppendUvarint(b, kg)
	b = binary.AppendUvarint(b, uint64(len(deleted)))
	for _, k := range deleted {
		b = Uint64Codec{}.Append(b, k)
	}
	b = binary.AppendUvarint(b, nPut)
	b = append(b, puts...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestCorruptDeltas(t *testing.T) {
	const maxP, kg = 8, 3
	k1, k2 := keyIn(kg, maxP, 0), keyIn(kg, maxP, 1000)
	other := keyIn(kg+1, maxP, 0)
	good := craftDelta(kg, []uint64{k2}, entry(k1, 5), 1)
	cases := map[string][]byte{
		"full blob":               craft(fullMagic, blobVersion, maxP, kg, 1, entry(k1, 1)),
		"deleted key of other kg": craftDelta(kg, []uint64{other}, entry(k1, 5), 1),
		"put key of other kg":     craftDelta(kg, nil, entry(other, 5), 1),
		"duplicate put":           craftDelta(kg, nil, append(entry(k1, 1), entry(k1, 2)...), 2),
		"count too high":          craftDelta(kg, nil, entry(k1, 1), 2),
		"trailing bytes":          craftDelta(kg, nil, append(entry(k1, 1), 0), 1),
		"truncated":               good[:len(good)-5],
	}
	for name, b := range cases {
		m := newCounters(t, maxP, keygroups.Range{})
		_ = m.Put(k2, 9)
		if _, err := m.ApplyKeyGroupDelta(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: ApplyKeyGroupDelta = %v, want ErrCorrupt", name, err)
		}
		if v, ok := m.Get(k2); !ok || v != 9 || m.Len() != 1 {
			t.Errorf("%s: a refused delta changed the map", name)
		}
	}
	m := newCounters(t, maxP, keygroups.Range{Start: 0, End: 2})
	if _, err := m.ApplyKeyGroupDelta(good); !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("delta of kg 3 into [0,2): %v", err)
	}
	m = newCounters(t, maxP, keygroups.Range{})
	_ = m.Put(k2, 9)
	if _, err := m.ApplyKeyGroupDelta(good); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Get(k1); v != 5 || m.Len() != 1 {
		t.Fatalf("good delta: k1 = %d, %d entries", v, m.Len())
	}
}

// TestDeltaAfterRestore: the first snapshot after a restore holds, in its
// delta, only what was written since the restore.
func TestDeltaAfterRestore(t *testing.T) {
	src := newCounters(t, 4, keygroups.Range{})
	fillCounters(t, src, 5000)
	s := src.Freeze()
	m := roundTrip(t, s, counterConfig(4, keygroups.Range{}))
	s.Release()
	k := uint64(77)
	if err := m.Put(k, -1); err != nil {
		t.Fatal(err)
	}
	kg := m.KeyGroupOf(keygroups.HashUint64(k))
	snap := m.Freeze()
	defer snap.Release()
	if snap.DeltaBase() != 0 {
		t.Fatalf("first snapshot's delta base = %d, want 0 (the restored state)", snap.DeltaBase())
	}
	for g := range 4 {
		d, err := snap.AppendKeyGroupDelta(nil, g)
		if err != nil {
			t.Fatal(err)
		}
		want := minBlobLen + 1 // header + nDel=0 + nPut=0 + crc
		if g == kg {
			want += len(entry(k, -1))
		}
		if len(d) != want {
			t.Fatalf("kg %d delta is %d bytes, want %d (only the one write since the restore)", g, len(d), want)
		}
	}
}
