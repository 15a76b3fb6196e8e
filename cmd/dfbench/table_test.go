package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestTablesHaveEqualColumns: in every table dfbench prints, every row has
// as many cells as its header.
func TestTablesHaveEqualColumns(t *testing.T) {
	defer func(f uint) { tableFlags = f }(tableFlags)
	tableFlags |= tabwriter.Debug // a '|' ends every cell
	dir := t.TempDir()
	samples := filepath.Join(dir, "samples.csv")
	csv := samplesHeader + "\n1000500000,40000\n1003000000,10000\n1600000000,200000\n"
	if err := os.WriteFile(samples, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"ring":    {"ring", "--records", "100000"},
		"run":     {"run", "--pipeline", "keyed-count", "--records", "20000", "--keys", "100", "--baseline", "chan"},
		"nexmark": {"nexmark", "--query", "q2", "--events", "20000", "--baseline", "chan"},
		"phases":  {"phases", "--samples", samples, "--every", "1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := dfbench(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr.String())
		}
		checkColumns(t, name, stdout.String())
	}
}

// checkColumns fails t unless every line of a block of out's lines with
// cells has as many as the block's first (its header).
func checkColumns(t *testing.T, name, out string) {
	t.Helper()
	header, rows := -1, 0
	for _, line := range strings.Split(out, "\n") {
		n := strings.Count(line, "|")
		switch {
		case n == 0:
			header = -1 // a line without cells ends a table
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
