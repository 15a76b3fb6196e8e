package ringflow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestFileSinkWritesBehind: a file sink's part goes to disk through
// writeBehind, so a part larger than writeBehindBytes has had the
// write-back of its first bytes requested before its checkpoint's sync.
func TestFileSinkWritesBehind(t *testing.T) {
	s, ok := FileSink(t.TempDir())().(*fileSink[string])
	if !ok {
		t.Fatal("FileSink does not make a *fileSink[string]")
	}
	if err := s.Open(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 99)
	for n := 0; n < 2*writeBehindBytes; n += len(line) + 1 {
		if err := s.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if s.wb == nil || s.wb.f != s.f {
		t.Fatal("the part file is not written through writeBehind")
	}
	if s.wb.started < writeBehindBytes {
		t.Fatalf("after %d bytes, write-back requested up to byte %d, want at least %d",
			2*writeBehindBytes, s.wb.started, writeBehindBytes)
	}
	if _, durable, err := s.PreCommit(); err != nil || durable(context.Background()) != nil {
		t.Fatalf("pre-commit: %v", err)
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

// BenchmarkPartSync measures the floor the disk sets under a checkpoint
// of workload 3 (keyed-count, 100 ms checkpoints, --sink-dir): two sink
// subtasks each write a 4 MiB part over 100 ms, paced in 64 KiB writes,
// and sync it at the end, as the checkpoint's barrier would. sync-ms is
// the median sync, the time the checkpoint waits on the disk for the
// sinks alone; with and without the write-behind.
func BenchmarkPartSync(b *testing.B) {
	const (
		partBytes = 4 << 20
		interval  = 100 * time.Millisecond
		chunk     = 64 << 10
	)
	for _, behind := range []bool{false, true} {
		b.Run(map[bool]string{false: "sync-only", true: "write-behind"}[behind], func(b *testing.B) {
			dir := b.TempDir()
			buf := bytes.Repeat([]byte("0123456789abcde\n"), chunk/16)
			var (
				mu    sync.Mutex
				syncs []time.Duration
			)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for sub := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d-%d", sub, i)))
						if err != nil {
							b.Error(err)
							return
						}
						defer f.Close()
						var w io.Writer = f
						if behind {
							w = newWriteBehind(f)
						}
						start := time.Now()
						for off := chunk; off <= partBytes; off += chunk {
							if _, err := w.Write(buf); err != nil {
								b.Error(err)
								return
							}
							time.Sleep(time.Until(start.Add(interval * time.Duration(off) / partBytes)))
						}
						t := time.Now()
						if err := f.Sync(); err != nil {
							b.Error(err)
						}
						mu.Lock()
						syncs = append(syncs, time.Since(t))
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			slices.Sort(syncs)
			b.ReportMetric(float64(syncs[len(syncs)/2])/1e6, "sync-ms")
		})
	}
}
