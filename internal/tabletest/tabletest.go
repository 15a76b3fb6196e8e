// Package tabletest checks tables written through text/tabwriter with the
// Debug flag, which ends every cell with '|'.
package tabletest

import (
	"strings"
	"testing"
)

// CheckColumns fails t unless, in out, every line of a block of lines
// with cells has as many cells as the block's first line (its header),
// and some block has a row besides its header. A line without cells ends
// a block.
func CheckColumns(t testing.TB, name, out string) {
	t.Helper()
	header, rows := -1, 0
	for _, line := range strings.Split(out, "\n") {
		n := strings.Count(line, "|")
		switch {
		case n == 0:
			header = -1
		case header < 0:
			header = n
		case n != header:
			t.Errorf("%s: row %q has %d cells, its header %d:\n%s", name, line, n, header, out)
		default:
			rows++
		}
	}
	if rows == 0 {
		t.Errorf("%s: no table with rows:\n%s", name, out)
	}
}
