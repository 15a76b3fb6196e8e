package keygroups

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("keygroups.seed", "KEYGROUPS_SEED")

func TestHashUint64MatchesXXHash(t *testing.T) {
	r := rand.New(rand.NewPCG(seeds.Seed(t), 1))
	check := func(k uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], k)
		if got, want := HashUint64(k), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("HashUint64(%#x) = %#x, xxhash.Sum64 = %#x", k, got, want)
		}
		if got, want := HashInt64(int64(k)), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("HashInt64(%d) = %#x, want %#x", int64(k), got, want)
		}
	}
	for _, k := range []uint64{0, 1, 2, 255, 256, math.MaxUint32, math.MaxInt64, math.MaxUint64} {
		check(k)
	}
	for range 100_000 {
		check(r.Uint64())
	}
}

func TestHashStringAndBytes(t *testing.T) {
	for _, s := range []string{"", "a", "hello, world", string(make([]byte, 100))} {
		want := xxhash.Sum64([]byte(s))
		if HashString(s) != want || HashBytes([]byte(s)) != want {
			t.Fatalf("hash of %q differs from xxhash.Sum64", s)
		}
		if OfString(s, 128) != OfBytes([]byte(s), 128) || OfBytes([]byte(s), 128) != int(want%128) {
			t.Fatalf("OfString/OfBytes(%q) disagree", s)
		}
	}
	if OfUint64(7, 128) != int(HashUint64(7)%128) {
		t.Fatal("OfUint64 != HashUint64 % maxP")
	}
}

func TestHashesDoNotAllocate(t *testing.T) {
	s, b := "some key", []byte("some key")
	var sink uint64
	n := testing.AllocsPerRun(100, func() {
		sink += HashUint64(sink) + HashString(s) + HashBytes(b) + uint64(OfString(s, 128))
	})
	if n != 0 {
		t.Fatalf("hashing allocates %v times per run", n)
	}
}

func TestOfInvalidMaxParallelism(t *testing.T) {
	if Of(5, 0) != -1 || Of(5, -3) != -1 {
		t.Fatal("Of with maxParallelism < 1 must return -1")
	}
	if Of(math.MaxUint64, 128) != int(uint64(math.MaxUint64)%128) {
		t.Fatal("Of must treat the hash as unsigned")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		p, maxP int
		want    error
	}{
		{1, 1, nil}, {128, 128, nil}, {2, 32768, nil}, {32768, 32768, nil},
		{0, 128, ErrParallelism}, {-1, 128, ErrParallelism}, {129, 128, ErrParallelism},
		{1, 0, ErrMaxParallelism}, {1, -5, ErrMaxParallelism}, {1, 32769, ErrMaxParallelism},
	}
	for _, c := range cases {
		err := Validate(c.p, c.maxP)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Validate(%d, %d) = %v, want %v", c.p, c.maxP, err, c.want)
		}
		if _, err := RangeOf(0, c.p, c.maxP); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("RangeOf(0, %d, %d) = %v, want %v", c.p, c.maxP, err, c.want)
		}
		if _, err := NewPartitioner(c.p, c.maxP); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("NewPartitioner(%d, %d) = %v, want %v", c.p, c.maxP, err, c.want)
		}
	}
	for _, i := range []int{-1, 4} {
		if _, err := RangeOf(i, 4, 128); !errors.Is(err, ErrSubtask) {
			t.Errorf("RangeOf(%d, 4, 128) = %v, want ErrSubtask", i, err)
		}
	}
	if _, err := Rescale(0, 2, 128); !errors.Is(err, ErrParallelism) {
		t.Errorf("Rescale with old p 0: %v", err)
	}
	if _, err := Rescale(2, 200, 128); !errors.Is(err, ErrParallelism) {
		t.Errorf("Rescale with new p 200 > maxP: %v", err)
	}
}

func TestDefaultMaxParallelismFor(t *testing.T) {
	for p, want := range map[int]int{1: 128, 85: 128, 86: 256, 100: 256, 171: 256, 172: 512, 21845: 32768, 30000: 32768} {
		if got := DefaultMaxParallelismFor(p); got != want {
			t.Errorf("DefaultMaxParallelismFor(%d) = %d, want %d", p, got, want)
		}
	}
}

// bruteRanges assigns every key group to kg*p/maxP one by one and collects
// each subtask's key groups into a range, failing if they are not contiguous.
func bruteRanges(t *testing.T, p, maxP int) []Range {
	rs := make([]Range, p)
	seen := make([]bool, p)
	for kg := range maxP {
		i := kg * p / maxP
		switch {
		case !seen[i]:
			rs[i], seen[i] = Range{kg, kg + 1}, true
		case rs[i].End == kg:
			rs[i].End++
		default:
			t.Fatalf("p=%d maxP=%d: subtask %d's key groups are not contiguous", p, maxP, i)
		}
	}
	return rs
}

func checkAssignment(t *testing.T, p, maxP int) {
	brute := bruteRanges(t, p, maxP)
	got, err := Ranges(p, maxP)
	if err != nil {
		t.Fatalf("Ranges(%d, %d): %v", p, maxP, err)
	}
	for i := range p {
		if got[i] != brute[i] || got[i].Len() == 0 {
			t.Fatalf("p=%d maxP=%d subtask %d: RangeOf = %v, brute force = %v", p, maxP, i, got[i], brute[i])
		}
		if i > 0 && got[i].Start != got[i-1].End {
			t.Fatalf("p=%d maxP=%d: ranges %v and %v are not adjacent", p, maxP, got[i-1], got[i])
		}
	}
	if got[0].Start != 0 || got[p-1].End != maxP {
		t.Fatalf("p=%d maxP=%d: ranges do not cover [0,%d)", p, maxP, maxP)
	}
}

func TestRangesMatchBruteForce(t *testing.T) {
	for maxP := 1; maxP <= 300; maxP++ {
		for p := 1; p <= maxP; p++ {
			checkAssignment(t, p, maxP)
		}
	}
	r := rand.New(rand.NewPCG(seeds.Seed(t), 2))
	for _, maxP := range []int{1000, 4096, 32767, 32768} {
		for _, p := range []int{1, 2, 3, 7, maxP / 2, maxP - 1, maxP, 1 + r.IntN(maxP)} {
			checkAssignment(t, p, maxP)
		}
	}
}

func TestPartitionerMatchesOf(t *testing.T) {
	r := rand.New(rand.NewPCG(seeds.Seed(t), 3))
	for _, c := range [][2]int{{1, 1}, {2, 128}, {3, 128}, {5, 100}, {7, 32768}, {300, 1000}} {
		pt, err := NewPartitioner(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		if pt.MaxParallelism() != c[1] {
			t.Fatalf("MaxParallelism = %d, want %d", pt.MaxParallelism(), c[1])
		}
		for range 10_000 {
			h := r.Uint64()
			kg := Of(h, c[1])
			if pt.KeyGroup(h) != kg || pt.Subtask(h) != SubtaskOf(kg, c[0], c[1]) ||
				pt.SubtaskOfKeyGroup(kg) != pt.Subtask(h) {
				t.Fatalf("p=%d maxP=%d hash %#x: partitioner disagrees with Of/SubtaskOf", c[0], c[1], h)
			}
		}
	}
}

// bruteRescale: for every key group, the new subtask reads it from the old
// subtask that owned it; consecutive key groups from the same old subtask
// merge into one transfer.
func bruteRescale(p1, p2, maxP int) [][]Transfer {
	plan := make([][]Transfer, p2)
	for kg := range maxP {
		i, j := kg*p1/maxP, kg*p2/maxP
		ts := plan[j]
		if n := len(ts); n > 0 && ts[n-1].OldSubtask == i && ts[n-1].KeyGroups.End == kg {
			ts[n-1].KeyGroups.End++
		} else {
			plan[j] = append(ts, Transfer{OldSubtask: i, KeyGroups: Range{kg, kg + 1}})
		}
	}
	return plan
}

func TestRescaleMatchesBruteForce(t *testing.T) {
	check := func(p1, p2, maxP int) {
		got, err := Rescale(p1, p2, maxP)
		if err != nil {
			t.Fatalf("Rescale(%d, %d, %d): %v", p1, p2, maxP, err)
		}
		want := bruteRescale(p1, p2, maxP)
		for j := range want {
			if len(got[j]) != len(want[j]) {
				t.Fatalf("Rescale(%d→%d, maxP %d) subtask %d: %v, want %v", p1, p2, maxP, j, got[j], want[j])
			}
			for k := range want[j] {
				if got[j][k] != want[j][k] {
					t.Fatalf("Rescale(%d→%d, maxP %d) subtask %d: %v, want %v", p1, p2, maxP, j, got[j], want[j])
				}
			}
		}
	}
	for maxP := 1; maxP <= 48; maxP++ {
		for p1 := 1; p1 <= maxP; p1++ {
			for p2 := 1; p2 <= maxP; p2++ {
				check(p1, p2, maxP)
			}
		}
	}
	for _, c := range [][3]int{{2, 1, 128}, {2, 4, 128}, {3, 5, 128}, {100, 7, 32768}, {7, 100, 32768}} {
		check(c[0], c[1], c[2])
	}
}

func TestRangeHelpers(t *testing.T) {
	r := Range{3, 7}
	if r.Len() != 4 || !r.Contains(3) || r.Contains(7) || r.String() != "[3,7)" {
		t.Fatalf("Range helpers wrong for %v", r)
	}
	if got := r.Intersect(Range{8, 10}); got.Len() != 0 {
		t.Fatalf("disjoint intersection = %v", got)
	}
	if got := r.Intersect(Range{5, 10}); got != (Range{5, 7}) {
		t.Fatalf("intersection = %v", got)
	}
}

var sinkHash uint64

func BenchmarkHashUint64(b *testing.B) {
	b.ReportAllocs()
	var h uint64
	for i := 0; b.Loop(); i++ {
		h += HashUint64(uint64(i))
	}
	sinkHash = h
}

func BenchmarkXXHashSum64Of8Bytes(b *testing.B) {
	b.ReportAllocs()
	var buf [8]byte
	var h uint64
	for i := 0; b.Loop(); i++ {
		binary.LittleEndian.PutUint64(buf[:], uint64(i))
		h += xxhash.Sum64(buf[:])
	}
	sinkHash = h
}

func BenchmarkPartitionerSubtask(b *testing.B) {
	for _, maxP := range []int{128, 100} {
		b.Run("maxP="+strconv.Itoa(maxP), func(b *testing.B) {
			pt, _ := NewPartitioner(3, maxP)
			b.ReportAllocs()
			var s int
			for i := 0; b.Loop(); i++ {
				s += pt.Subtask(HashUint64(uint64(i)))
			}
			sinkHash = uint64(s)
		})
	}
}
