package ringflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFileSinkOf: records of any type go through the sink's own format
// function, one line each, into a part file that a commit makes visible;
// once the part file is open, writing a record allocates nothing.
func TestFileSinkOf(t *testing.T) {
	type pair struct{ k, v uint64 }
	dir := t.TempDir()
	s := FileSinkOf(dir, func(b []byte, p pair) []byte {
		b = strconv.AppendUint(b, p.k, 10)
		b = append(b, ' ')
		return strconv.AppendUint(b, p.v, 10)
	})()
	if err := s.Open(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range uint64(100) {
		if err := s.Write(pair{i, i * i}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d %d", i, i*i))
	}
	if allocs := testing.AllocsPerRun(1000, func() { s.Write(pair{7, 49}) }); allocs != 0 {
		t.Errorf("a record's write allocates %.2f times", allocs)
	}
	for range 1001 { // NB: AllocsPerRun runs its function once more than it counts
		want = append(want, "7 49")
	}
	txn, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), txn); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("committed %d lines, want %d: %.5q…", len(got), len(want), got)
	}
}

// TestFileSinkEncoderErrors checks that what an encoder cannot write fails
// the write with an error naming the sink's directory and the record's
// type: the encoder's own error, and a line holding a newline, which
// would read back as two records; and that a nil encoder fails Open.
func TestFileSinkEncoderErrors(t *testing.T) {
	dir := t.TempDir()
	s := FileSinkEncoded(dir, FileSinkOptions{}, JSONLines[map[string]any]())()
	if err := s.Open(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	err := s.Write(map[string]any{"ch": make(chan int)})
	var unsupported *json.UnsupportedTypeError
	if !errors.As(err, &unsupported) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "map[string]interface {}") {
		t.Errorf("writing a channel as JSON returned %v; want json's UnsupportedTypeError naming %s and the record's type", err, dir)
	}
	s.Close()

	multi := FileSinkEncoded(dir, FileSinkOptions{}, func(b []byte, r string) ([]byte, error) { return append(b, r...), nil })()
	if err := multi.Open(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := multi.Write("one\ntwo"); err == nil || !strings.Contains(err.Error(), "newline at byte 3") {
		t.Errorf("writing a line with a newline returned %v; want an error saying where the newline is", err)
	}
	multi.Close()

	if err := FileSinkEncoded[string](dir, FileSinkOptions{}, nil)().Open(context.Background(), 0, 1); err == nil || !strings.Contains(err.Error(), "encoder is nil") {
		t.Errorf("Open with a nil encoder returned %v; want an error saying so", err)
	}
}

// TestReadFileSinkJSONNamesBadLine checks that a committed line that is
// not JSON for the record type is an error naming its part file and line.
func TestReadFileSinkJSONNamesBadLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part-0-0"), []byte("{\"A\":1}\n{\"A\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type rec struct{ A int }
	_, err := ReadFileSinkJSON[rec](dir)
	if err == nil || !strings.Contains(err.Error(), "part-0-0 line 2") {
		t.Errorf("ReadFileSinkJSON returned %v; want an error naming part-0-0 line 2", err)
	}
}

// TestFileSinkRecoverAtLowerParallelism restores the pending parts of five
// subtasks at parallelism 3, as the engine hands them out (new subtask i
// takes old subtask j's transactions if j % 3 == i), with new subtask 0
// recovering first: every pre-committed part is committed exactly once.
// (Subtask 0 once removed the pending parts of every old subtask >= 3, and
// so old subtask 4's, which new subtask 1 was to commit.)
func TestFileSinkRecoverAtLowerParallelism(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	txns := make([][]byte, 5)
	for j := range 5 {
		s := FileSink(dir)()
		if err := s.Open(ctx, j, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.Recover(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(fmt.Sprintf("line of subtask %d", j)); err != nil {
			t.Fatal(err)
		}
		txn, durable, err := s.PreCommit()
		if err != nil {
			t.Fatal(err)
		}
		if durable != nil {
			if err := durable(ctx); err != nil {
				t.Fatal(err)
			}
		}
		txns[j] = txn
		s.Close()
	}
	for i := range 3 {
		var mine [][]byte
		for j := range 5 {
			if j%3 == i {
				mine = append(mine, txns[j])
			}
		}
		s := FileSink(dir)()
		if err := s.Open(ctx, i, 3); err != nil {
			t.Fatal(err)
		}
		if err := s.Recover(ctx, mine); err != nil {
			t.Fatalf("subtask %d of 3: recover: %v", i, err)
		}
		s.Close()
	}
	lines, err := ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	if len(lines) != 5 {
		t.Fatalf("committed lines %q, want one of each of 5 subtasks", lines)
	}
}
