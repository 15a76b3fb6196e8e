package snapshot

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// traceRecorder records the write operations made while armed.
type traceRecorder struct {
	mu    sync.Mutex
	armed bool
	ops   []string
}

func (r *traceRecorder) String() string { return "traceRecorder" }

func (r *traceRecorder) MaybeError(op errorfs.Op) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		r.ops = append(r.ops, fmt.Sprintf("%-7s %s", opKindName(op.Kind), op.Path))
	}
	return nil
}

func (r *traceRecorder) take(armed bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops, r.armed = nil, armed
	return ops
}

func opKindName(k errorfs.OpKind) string {
	switch k {
	case errorfs.OpMkdirAll:
		return "mkdir"
	case errorfs.OpRemoveAll:
		return "rmall"
	case errorfs.OpRename:
		return "rename"
	case errorfs.OpLock:
		return "lock"
	case errorfs.OpFileClose:
		return "close"
	case errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return "sync"
	case errorfs.OpFileFlush:
		return "flush"
	case errorfs.OpFilePreallocate:
		return "prealloc"
	case errorfs.OpReuseForWrite:
		return "reuse"
	}
	return opName(k)
}

// TestCommitTrace pins the commit protocol as the exact sequence of write
// operations on the filesystem (as pebble's checkpoint_test does): a full
// checkpoint, then an incremental one whose commit drops the first
// (retained 1) and deletes its garbage. A change to the durability
// protocol, such as a dropped fsync, shows up as a diff in
// testdata/commit_trace. After checking the diff, rewrite it with
//
//	go test ./snapshot/ -run TestCommitTrace -args -rewrite
func TestCommitTrace(t *testing.T) {
	rec := &traceRecorder{}
	s, err := Open(testDir, Options{
		FS:       errorfs.Wrap(vfs.NewMem(), rec),
		Retained: 1,
		Logger:   newTestLogger(t).slog(),
		// Background compactions would interleave their own writes at
		// times of their choosing.
		testPebbleOptions: func(o *pebble.Options) { o.DisableAutomaticCompactions = true },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	step := func(title string, fn func()) {
		rec.take(true)
		fn()
		fmt.Fprintf(&b, "# %s\n", title)
		for _, op := range rec.take(false) {
			fmt.Fprintln(&b, op)
		}
	}
	step("Commit(1): 2 key groups written", func() { commitFull(t, s, 1, 2, 1, 100) })
	step("Commit(2): key group 0 reused, 1 written; retention drops checkpoint 1", func() {
		p := s.mustBegin(t, 2)
		if err := p.ReuseKeyGroup("count", 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := p.PutKeyGroup("count", 1, []byte("v2")); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
	})
	step("Abort(3): nothing written; the empty staging file Begin took is kept for the next checkpoint", func() { s.mustBegin(t, 3).Abort() })
	checkGolden(t, filepath.Join("testdata", "commit_trace"), b.String())
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs; got:\n%s\nwant:\n%s", path, got, want)
	}
}
