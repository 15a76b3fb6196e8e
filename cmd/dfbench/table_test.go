package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"text/tabwriter"

	"github.com/ringflow/ringflow/internal/tabletest"
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
		tabletest.CheckColumns(t, name, stdout.String())
	}
}
