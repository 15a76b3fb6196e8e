package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIterateFile runs dfbench iterate on a graph file: two components and
// a self-loop, with a failure recovered in place; the output file gives
// each vertex its component's lowest vertex.
func TestIterateFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "graph.txt"), filepath.Join(dir, "components.txt")
	if err := os.WriteFile(in, []byte("5 3\n3 9\n\n9 7\n2 8\n4 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := dfbench([]string{"iterate", "--input", in, "--output", out, "--parallelism", "2", "--workers", "1",
		"--checkpoint-interval", "1ms", "--fail-after", "6", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2 2\n3 3\n4 4\n5 3\n7 3\n8 2\n9 3\n"; string(got) != want {
		t.Fatalf("components:\n%s\nwant:\n%s", got, want)
	}
	var j iterateJSON
	if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout.String())
	}
	if j.Vertices != 7 || j.Edges != 5 || j.Components != 3 || j.Restarts != 1 || !j.Checked {
		t.Fatalf("--json: %+v", j)
	}
}

// TestIterateBadInput checks that a malformed line of --input, and flags
// that contradict each other, are errors that say what is wrong.
func TestIterateBadInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "graph.txt")
	if err := os.WriteFile(in, []byte("1 2\n3 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", in}, `graph.txt:2: "3 x": vertex ids must be unsigned integers`},
		{[]string{"--input", in, "--edges", "5"}, "drop --vertices, --edges and --seed"},
		{[]string{"--checkpoint-interval", "0s"}, "--checkpoint-interval 0s: must be positive"},
		{[]string{"--unaligned", "--alignment-timeout", "1ms"}, "--unaligned checkpoints do not align"},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"iterate"}, tc.args...), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
