package compare

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestTablesHaveEqualColumns: in the comparison table and the stall
// report, every row has as many cells as its header.
func TestTablesHaveEqualColumns(t *testing.T) {
	defer func(f uint) { tableFlags = f }(tableFlags)
	tableFlags |= tabwriter.Debug // a '|' ends every cell
	r := Report{Pipeline: "keyed-count", Rings: 4, RingCapacity: 1 << 20, RingBytes: 4 << 20,
		Modes: []ModeResult{
			{Mode: Aligned, Completed: 3, Stalls: []Stall{{Checkpoint: 1, Status: "completed", Operator: "count"}}},
			{Mode: Unaligned, Completed: 3, Stalls: []Stall{{Checkpoint: 1, Status: "failed: x", Unaligned: true}}},
		},
		NoCheckpoints: &ModeResult{Mode: None, RecordsPerSec: 1e6},
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"table":  func(b *bytes.Buffer) error { return WriteTable(b, r) },
		"stalls": func(b *bytes.Buffer) error { return WriteStalls(b, r) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		checkColumns(t, name, b.String())
	}
}

// checkColumns fails t unless every line of out that has cells has as many
// as the first such line (the header).
func checkColumns(t *testing.T, name, out string) {
	t.Helper()
	header, rows := -1, 0
	for _, line := range strings.Split(out, "\n") {
		n := strings.Count(line, "|")
		switch {
		case n == 0:
		case header < 0:
			header = n
		case n != header:
			t.Errorf("%s: row %q has %d cells, the header %d:\n%s", name, line, n, header, out)
		default:
			rows++
		}
	}
	if header < 0 || rows == 0 {
		t.Errorf("%s: no header and rows:\n%s", name, out)
	}
}
