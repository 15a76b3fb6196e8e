package ringflow

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteBehind checks that a part file written through writeBehind asks
// for the write-back of every byte past each writeBehindBytes, in order and
// without gaps, that the bytes reach the file unchanged, and that a refused
// request is not repeated.
func TestWriteBehind(t *testing.T) {
	type req struct{ off, n int64 }
	for _, refuse := range []bool{false, true} {
		f, err := os.Create(filepath.Join(t.TempDir(), "part"))
		if err != nil {
			t.Fatal(err)
		}
		var reqs []req
		wb := newWriteBehind(f)
		wb.start = func(g *os.File, off, n int64) error {
			if g != f {
				t.Errorf("write-back asked of %s, want %s", g.Name(), f.Name())
			}
			reqs = append(reqs, req{off, n})
			if refuse {
				return errors.ErrUnsupported
			}
			return nil
		}
		w := bufio.NewWriterSize(wb, 64<<10)
		line := bytes.Repeat([]byte("0123456789abcdef"), 6)
		line[len(line)-1] = '\n'
		var want bytes.Buffer
		for want.Len() < 3*writeBehindBytes+writeBehindBytes/2 {
			w.Write(line)
			want.Write(line)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("refuse %v: file holds %d bytes (%v), want the %d written", refuse, len(got), err, want.Len())
		}
		if refuse {
			if len(reqs) != 1 {
				t.Errorf("refused: %d requests %v, want the first only", len(reqs), reqs)
			}
			continue
		}
		if len(reqs) != 3 {
			t.Fatalf("%d requests %v for %d bytes, want 3", len(reqs), reqs, want.Len())
		}
		var next int64
		for _, r := range reqs {
			if r.off != next || r.n < writeBehindBytes {
				t.Errorf("requests %v: want each from the end of the one before, of at least %d bytes", reqs, writeBehindBytes)
			}
			next = r.off + r.n
		}
		if left := int64(want.Len()) - next; left >= writeBehindBytes {
			t.Errorf("%d bytes left to the sync, want under %d", left, writeBehindBytes)
		}
	}
}

// TestStartWriteBack asks the file system of the test's temporary
// directory (the one the sinks of the other tests write to) for a real
// write-back: it takes the request, and the bytes stay as written.
func TestStartWriteBack(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "part"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("x"), 1<<16)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := startWriteBack(f, 0, int64(len(data))); err != nil {
		t.Fatalf("write-back refused: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(f.Name()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}
