package nexmark

import (
	"bufio"

	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

// goldenIDs are the event ids of testdata/golden_events.jsonl, in order.
func goldenIDs() []uint64 {
	var ids []uint64
	for _, r := range [][2]uint64{{0, 400}, {123_456_789, 100}, {7_000_000_000, 100}} {
		for i := range r[1] {
			ids = append(ids, r[0]+i)
		}
	}
	return ids
}

// TestGoldenEvents compares generated events, rendered by AppendJSON, with
// the lines a JVM produced for the same ids (testdata/GoldenGen.java, mode
// "lines"): the JVM's java.util.Random, Math.pow and Math.round against the
// port, field by field, extra strings included.
func TestGoldenEvents(t *testing.T) {
	data, err := os.ReadFile("testdata/golden_events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	ids := goldenIDs()
	if len(want) != len(ids) {
		t.Fatalf("golden file has %d lines, want %d", len(want), len(ids))
	}
	cfg := DefaultConfig()
	cfg.NumEvents = Unbounded
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	bad := 0
	for i, id := range ids {
		if err := g.EventAt(id, &ev); err != nil {
			t.Fatal(err)
		}
		line, err := AppendJSON(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(string(line), "\n"); got != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", id, got, want[i])
			if bad++; bad > 3 {
				t.FailNow()
			}
		}
	}
}

// TestGoldenCRC checks the first N events of the default stream against the
// CRC-32 of the JVM's JSON lines for them (testdata/golden_crc.txt).
func TestGoldenCRC(t *testing.T) {
	data, err := os.ReadFile("testdata/golden_crc.txt")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	var want uint32
	if _, err := fmt.Sscanf(string(data), "%d %x", &n, &want); err != nil {
		t.Fatalf("golden_crc.txt: %v", err)
	}
	cfg := DefaultConfig()
	cfg.NumEvents = n
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crc := crc32.NewIEEE()
	w := bufio.NewWriter(crc)
	var ev Event
	count := uint64(0)
	for g.Next(&ev) {
		if err := WriteJSON(w, &ev); err != nil {
			t.Fatal(err)
		}
		count++
	}
	w.Flush()
	if count != n {
		t.Fatalf("generated %d events, want %d", count, n)
	}
	if got := crc.Sum32(); got != want {
		t.Fatalf("CRC-32 of %d events = %x, JVM says %x", n, got, want)
	}
}
