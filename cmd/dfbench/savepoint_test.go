package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRunSavepointFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--savepoint-after", "1s", "--savepoint-dir", "sp"}, "--savepoint-after 1s: a savepoint is a checkpoint"},
		{[]string{"--savepoint-after", "1s", "--checkpoint-interval", "10ms"}, "--savepoint-after 1s: set --savepoint-dir"},
		{[]string{"--savepoint-dir", "sp", "--checkpoint-interval", "10ms"}, "--savepoint-dir sp: without --savepoint-after"},
		{[]string{"--savepoint-keep-running"}, "--savepoint-keep-running: without --savepoint-after"},
		{[]string{"--savepoint-after", "-1s"}, "--savepoint-after -1s: must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"run"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("run %v: exit %d, stderr %q, stdout %q; want exit 2 and %q",
				tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// TestRunSavepointAndRestore stops a run with --savepoint-after, and a
// second run restores it with --restore-from (the savepoint directory
// given, whose newest savepoint it takes) on a state directory of its
// own: the sink directory then holds exactly the lines of an
// uninterrupted run.
func TestRunSavepointAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline three times")
	}
	dir := t.TempDir()
	for _, pipeline := range []string{"keyed-count", "window"} {
		t.Run(pipeline, func(t *testing.T) {
			dir := filepath.Join(dir, pipeline)
			command := func(sub string, extra ...string) []string {
				return append([]string{"run", "--pipeline", pipeline, "--records", "200000", "--keys", "1000",
					"--rate", "200000", "--parallelism", "2", "--workers", "2", "--checkpoint-interval", "10ms",
					"--state-dir", filepath.Join(dir, sub, "state"), "--json"}, extra...)
			}
			var stdout, stderr bytes.Buffer
			if code := dfbench(command("whole", "--sink-dir", filepath.Join(dir, "whole", "out")), &stdout, &stderr); code != 0 {
				t.Fatalf("uninterrupted run: exit %d: %s", code, stderr.String())
			}
			want := readPartLines(t, filepath.Join(dir, "whole", "out"))
			out, sp := filepath.Join(dir, "out"), filepath.Join(dir, "savepoints")
			stdout.Reset()
			if code := dfbench(command("first", "--sink-dir", out, "--savepoint-after", "300ms", "--savepoint-dir", sp),
				&stdout, &stderr); code != 0 {
				t.Fatalf("run with --savepoint-after: exit %d: %s", code, stderr.String())
			}
			var obj struct {
				Savepoint string `json:"savepoint"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &obj); err != nil {
				t.Fatalf("%v in %q", err, stdout.String())
			}
			if filepath.Dir(obj.Savepoint) != sp {
				t.Fatalf("savepoint %q, want one in %s", obj.Savepoint, sp)
			}
			if n := len(readPartLines(t, out)); n == 0 || n >= len(want) {
				t.Fatalf("%d of %d lines committed before the savepoint: want it part-way", n, len(want))
			}
			stdout.Reset()
			if code := dfbench(command("second", "--sink-dir", out, "--restore-from", sp), &stdout, &stderr); code != 0 {
				t.Fatalf("run with --restore-from: exit %d: %s", code, stderr.String())
			}
			if got := readPartLines(t, out); !slices.Equal(got, want) {
				t.Errorf("after the restore: %d lines, uninterrupted: %d; first difference at %s",
					len(got), len(want), firstLineDiff(got, want))
			}
		})
	}
}
