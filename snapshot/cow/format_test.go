package cow

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
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
		"bad version":      craft(blobMagic, 9, maxP, uint64(kg), 2, two),
		"other maxP":       craft(blobMagic, blobVersion, 16, uint64(kg), 2, two),
		"kg >= maxP":       craft(blobMagic, blobVersion, maxP, maxP, 2, two),
		"count too high":   craft(blobMagic, blobVersion, maxP, uint64(kg), 3, two),
		"count too low":    craft(blobMagic, blobVersion, maxP, uint64(kg), 1, two),
		"count huge":       craft(blobMagic, blobVersion, maxP, uint64(kg), math.MaxUint64, two),
		"key of other kg":  craft(blobMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), entry(wrongKG, 2)...)),
		"duplicate key":    craft(blobMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), entry(k1, 2)...)),
		"truncated value":  craft(blobMagic, blobVersion, maxP, uint64(kg), 2, append(entry(k1, 1), Uint64Codec{}.Append(nil, k2)...)),
		"truncated header": craft(blobMagic, blobVersion, maxP, uint64(kg), 1, nil)[:8],
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
