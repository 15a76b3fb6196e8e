package compare

import (
	"bytes"
	"testing"
	"text/tabwriter"

	"github.com/ringflow/ringflow/internal/tabletest"
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
		tabletest.CheckColumns(t, name, b.String())
	}
}
