package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// faultInjector fails the first operation of the given kind on a path
// with the given prefix while armed.
type faultInjector struct {
	mu       sync.Mutex
	armed    bool
	kind     errorfs.OpKind
	prefix   string
	err      error
	injected string // the operation that failed, if any
}

func (f *faultInjector) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A prefix ending in '/' or '-' matches files under it; any other
	// must match the path exactly (Pebble's directory, not its MANIFEST).
	match := op.Path == f.prefix ||
		(strings.HasSuffix(f.prefix, "/") || strings.HasSuffix(f.prefix, "-")) && strings.HasPrefix(op.Path, f.prefix)
	if !f.armed || f.injected != "" || op.Kind != f.kind || !match {
		return nil
	}
	f.injected = fmt.Sprintf("%s %s", opName(op.Kind), op.Path)
	return f.err
}

func (f *faultInjector) String() string { return "faultInjector" }

func (f *faultInjector) arm(kind errorfs.OpKind, prefix string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.kind, f.prefix, f.err, f.injected = true, kind, prefix, err, ""
}

func (f *faultInjector) disarm() (injected string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	return f.injected
}

func opName(k errorfs.OpKind) string {
	switch k {
	case errorfs.OpCreate:
		return "create"
	case errorfs.OpLink:
		return "link"
	case errorfs.OpRemove:
		return "remove"
	case errorfs.OpFileWrite:
		return "write"
	case errorfs.OpFileSync:
		return "sync"
	}
	return fmt.Sprintf("op%d", k)
}

// commitFaults are the write operations of a commit, in order (Pebble's
// MANIFEST writes, which Pebble treats as fatal, excepted; see doc.go,
// "Failure behaviour"), and whether a fault there must fail the checkpoint.
var commitFaults = []struct {
	kind     errorfs.OpKind
	prefix   string
	mustFail bool
}{
	{errorfs.OpCreate, "state/staging/ckpt-", true},
	{errorfs.OpFileWrite, "state/staging/ckpt-", true},
	{errorfs.OpFileSync, "state/staging/ckpt-", true},
	{errorfs.OpLink, "state/staging/ckpt-", false}, // Pebble then copies
	// Pebble's directory sync after linking; a background job may sync
	// the directory first and take the fault instead.
	{errorfs.OpFileSync, "state/db", false},
	{errorfs.OpRemove, "state/staging/ckpt-", false}, // after the commit point
	// Garbage collection: a failure only delays deletion.
	{errorfs.OpCreate, "state/staging/gc-", false},
	{errorfs.OpFileWrite, "state/staging/gc-", false},
	{errorfs.OpFileSync, "state/staging/gc-", false},
	{errorfs.OpLink, "state/staging/gc-", false},
}

// TestWriteFaults injects an error, then ENOSPC, into each write operation
// of a checkpoint's commit in turn. Each time, that checkpoint either fails
// (Commit returns an error naming it and wrapping the fault) or, when the
// fault cannot hurt it, completes; Latest agrees with Commit's answer,
// also after a reopen; and the next checkpoint succeeds.
func TestWriteFaults(t *testing.T) {
	for _, fault := range []error{errorfs.ErrInjected, syscall.ENOSPC} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			mem := vfs.NewMem()
			inj := &faultInjector{}
			s, _ := openTest(t, errorfs.Wrap(mem, inj), 2)
			commitFull(t, s, 1, 4, 1, 1000)
			next, failed := uint64(2), 0
			for _, fp := range commitFaults {
				id := next
				next++
				inj.arm(fp.kind, fp.prefix, fault)
				err := commitVersion(s, id)
				injected := inj.disarm()
				t.Logf("fault on %q: Commit(%d) = %v", injected, id, err)
				switch {
				case injected == "":
					t.Fatalf("no %s operation on %s during Commit(%d)", opName(fp.kind), fp.prefix, id)
				case err != nil && (!errors.Is(err, fault) || !strings.Contains(err.Error(), fmt.Sprintf("checkpoint %d", id))):
					t.Fatalf("Commit(%d) = %v; want an error naming the checkpoint and wrapping %v", id, err, fault)
				case err == nil && fp.mustFail:
					t.Fatalf("Commit(%d) succeeded despite a fault on %s", id, injected)
				case err != nil:
					failed++
				}
				wantLatest := id
				if err != nil {
					wantLatest = id - 1
				}
				expectLatest(t, s, wantLatest)
				// The store keeps working: the next checkpoint commits.
				if err := commitVersion(s, next); err != nil {
					t.Fatalf("Commit(%d) after the fault: %v", next, err)
				}
				expectLatest(t, s, next)
				next++
			}
			if st := s.Stats(); st.Failed != uint64(failed) {
				t.Fatalf("Stats.Failed = %d, want %d", st.Failed, failed)
			}
			// Nothing leaked: no staging files, and every blob in Pebble is
			// referenced (garbage whose deletion failed was retried).
			if names := stagedFiles(t, s); len(names) != 0 {
				t.Fatalf("staging dir holds %q besides the next checkpoint's file, want nothing", names)
			}
			s.mu.Lock()
			refs := len(s.mu.refs)
			s.mu.Unlock()
			if blobs := rawKeys(t, s, prefixBlob); len(blobs) != refs {
				t.Fatalf("%d blobs in Pebble, %d referenced: %q", len(blobs), refs, blobs)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, _ = openTest(t, mem, 2)
			defer s.Close()
			expectLatest(t, s, next-1)
			if got := rawKeys(t, s, prefixManifest); len(got) != 2 {
				t.Fatalf("manifests after reopen: %q, want the 2 retained", got)
			}
		})
	}
}

// commitVersion commits checkpoint id: key groups 0 and 1 reused from the
// newest retained checkpoint, 2 and 3 rewritten with version id.
func commitVersion(s *Store, id uint64) error {
	ids := s.Checkpoints()
	p, err := s.Begin(id)
	if err != nil {
		return err
	}
	for kg := 0; kg < 2; kg++ {
		if err := p.ReuseKeyGroup("count", kg, ids[len(ids)-1]); err != nil {
			p.Abort()
			return err
		}
	}
	for kg := 2; kg < 4; kg++ {
		if err := p.PutKeyGroup("count", kg, blob(kg, int(id), 1000)); err != nil {
			p.Abort()
			return err
		}
	}
	return p.Commit(testMeta())
}

// expectLatest asserts Latest is checkpoint id, with key groups 0 and 1 at
// version 1 and 2 and 3 at version id.
func expectLatest(t *testing.T, s *Store, id uint64) {
	t.Helper()
	c, err := s.Latest()
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	if c.ID() != id || len(c.Skipped) != 0 {
		t.Fatalf("Latest = %d (skipped %v), want %d", c.ID(), c.Skipped, id)
	}
	checkKeyGroups(t, c, []int{1, 1, int(id), int(id)}, 1000)
}

// TestDiskFull: while every write fails with ENOSPC (Pebble's own files
// included), each checkpoint fails cleanly, before Pebble is touched, and
// reads keep working; once space returns, the next checkpoint succeeds.
// Background compactions are off: one that hit the full disk while
// updating Pebble's MANIFEST would be fatal by Pebble's design.
func TestDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	s, err := Open(testDir, Options{
		FS: errorfs.Wrap(mem, inj), Retained: 2, Logger: newTestLogger(t).slog(),
		testPebbleOptions: func(o *pebble.Options) { o.DisableAutomaticCompactions = true },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commitFull(t, s, 1, 4, 1, 1000)
	full.Store(true)
	for id := uint64(2); id <= 4; id++ {
		if err := commitVersion(s, id); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Commit(%d) on a full disk: %v, want ENOSPC", id, err)
		}
		expectLatest(t, s, 1)
	}
	full.Store(false)
	if err := commitVersion(s, 5); err != nil {
		t.Fatalf("Commit(5) after space returned: %v", err)
	}
	expectLatest(t, s, 5)
	if st := s.Stats(); st.Failed != 3 || st.Committed != 2 {
		t.Fatalf("stats %+v, want 3 failed and 2 committed", st)
	}
}

// TestBlobFileMadeAhead: a commit creates the staging file of the next
// checkpoint's blobs, so Begin creates nothing; when that creation fails,
// the commit still succeeds and Begin creates the file itself, and when
// that fails too, the checkpoint fails naming it and the next one succeeds.
func TestBlobFileMadeAhead(t *testing.T) {
	inj := &faultInjector{}
	s, _ := openTest(t, errorfs.Wrap(vfs.NewMem(), inj), 2)
	defer s.Close()
	commitFull(t, s, 1, 4, 1, 1000)

	inj.arm(errorfs.OpCreate, "state/staging/", errorfs.ErrInjected)
	p := s.mustBegin(t, 2)
	if injected := inj.disarm(); injected != "" {
		t.Fatalf("Begin(2) created %q; the last commit should have made it", injected)
	}
	p.Abort()

	// The file made ahead is gone (taken and written by a checkpoint);
	// the commit's attempt at the next one fails.
	inj.arm(errorfs.OpCreate, "state/staging/ckpt-blobs-", errorfs.ErrInjected)
	if err := commitVersion(s, 3); err != nil {
		t.Fatalf("Commit(3) with the next checkpoint's file failing: %v", err)
	}
	if injected := inj.disarm(); injected == "" {
		t.Fatal("Commit(3) did not make the next checkpoint's file")
	}
	expectLatest(t, s, 3)

	// Begin must create it now, and fails to: the checkpoint fails.
	inj.arm(errorfs.OpCreate, "state/staging/ckpt-blobs-", errorfs.ErrInjected)
	err := commitVersion(s, 4)
	injected := inj.disarm()
	if injected == "" || err == nil || !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), "checkpoint 4") {
		t.Fatalf("Commit(4) with Begin's file failing (%q) = %v; want an error naming checkpoint 4", injected, err)
	}
	expectLatest(t, s, 3)
	if err := commitVersion(s, 5); err != nil {
		t.Fatalf("Commit(5): %v", err)
	}
	expectLatest(t, s, 5)
	if names := stagedFiles(t, s); len(names) != 0 {
		t.Fatalf("staging dir holds %q besides the next checkpoint's file", names)
	}
}
