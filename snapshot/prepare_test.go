package snapshot

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// stagedFiles lists the staging dir, leaving out the empty file the store
// keeps for the next checkpoint's blobs.
func stagedFiles(t *testing.T, s *Store) []string {
	t.Helper()
	names, err := s.fs.List(s.stagingDir)
	if err != nil {
		t.Fatal(err)
	}
	s.blobFile.Lock()
	defer s.blobFile.Unlock()
	var staged []string
	for _, name := range names {
		if f := s.blobFile.f; f == nil || s.fs.PathJoin(s.stagingDir, name) != f.path {
			staged = append(staged, name)
		}
	}
	return staged
}

// preparedPending begins checkpoint id with key groups [0, kgs) of "count"
// at version and prepares it, pausing through pause.
func preparedPending(t *testing.T, s *Store, id uint64, kgs, version int, pause func() error) (*Pending, error) {
	t.Helper()
	p := s.mustBegin(t, id)
	for kg := range kgs {
		if err := p.PutKeyGroup("count", kg, blob(kg, version, 40<<10)); err != nil {
			t.Fatal(err)
		}
	}
	return p, p.Prepare(testMeta(), pause)
}

// TestPrepareThenCommit: a prepared checkpoint commits to the same content
// as one committed in one step; Prepare pauses between pieces of its work,
// seals the checkpoint against new entries, and leaves nothing staged once
// committed.
func TestPrepareThenCommit(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	pauses := 0
	p, err := preparedPending(t, s, 1, 8, 1, func() error { pauses++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	// 8 values of 40 KiB written in 16 KiB pieces: at least one pause per
	// key and two within each value.
	if pauses < 8*3 {
		t.Errorf("Prepare paused %d times; want at least %d", pauses, 8*3)
	}
	if len(stagedFiles(t, s)) != 1 {
		t.Errorf("staged after Prepare: %v, want the blobs' table", stagedFiles(t, s))
	}
	if err := p.PutKeyGroup("count", 9, []byte("late")); err == nil {
		t.Error("PutKeyGroup after Prepare succeeded")
	}
	if err := p.Prepare(testMeta(), nil); err == nil {
		t.Error("a second Prepare succeeded")
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	if names := stagedFiles(t, s); len(names) != 0 {
		t.Errorf("staged after Commit: %v", names)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	checkKeyGroups(t, c, []int{1, 1, 1, 1, 1, 1, 1, 1}, 40<<10)
}

// TestPrepareAbort: aborting a prepared checkpoint removes its staged
// table and commits nothing; a Prepare whose pause fails leaves nothing
// staged, and the checkpoint can still be aborted.
func TestPrepareAbort(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	p, err := preparedPending(t, s, 1, 4, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Abort()
	if names := stagedFiles(t, s); len(names) != 0 {
		t.Errorf("staged after Abort: %v", names)
	}
	if err := p.Commit(testMeta()); err == nil {
		t.Error("Commit after Abort succeeded")
	}

	stop := errors.New("stop")
	n := 0
	q, err := preparedPending(t, s, 2, 4, 2, func() error {
		if n++; n > 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Prepare with a failing pause returned %v, want %v", err, stop)
	}
	if names := stagedFiles(t, s); len(names) != 0 {
		t.Errorf("staged after a failed Prepare: %v", names)
	}
	if err := q.Commit(testMeta()); err == nil {
		t.Error("Commit after a failed Prepare succeeded")
	}
	if _, err := s.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest = %v, want ErrNoCheckpoint", err)
	}
	if st := s.Stats(); st.Committed != 0 {
		t.Errorf("stats %+v: committed", st)
	}
}

// heldWriteBack records the write-back requests (SyncTo) and syncs of
// staged tables, and holds the first request until released.
type heldWriteBack struct {
	entered chan string // the path of the first SyncTo, once it started
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	asked   map[string]int  // SyncTo calls per path
	synced  map[string]bool // Sync per path
}

func newHeldWriteBack() *heldWriteBack {
	return &heldWriteBack{entered: make(chan string, 1), release: make(chan struct{}),
		asked: map[string]int{}, synced: map[string]bool{}}
}

func (h *heldWriteBack) MaybeError(op errorfs.Op) error {
	if !strings.Contains(op.Path, "/staging/") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSyncTo:
		h.mu.Lock()
		h.asked[op.Path]++
		h.mu.Unlock()
		h.once.Do(func() {
			h.entered <- op.Path
			<-h.release
		})
	case errorfs.OpFileSync:
		h.mu.Lock()
		h.synced[op.Path] = true
		h.mu.Unlock()
	}
	return nil
}

func (h *heldWriteBack) String() string { return "heldWriteBack" }

// TestPrepareStartsWriteBack: Prepare asks for the write-back of a blobs'
// table larger than writeBehindBytes as it writes it, from a goroutine of
// its own (Prepare returns while the request is held), and not for a
// smaller table; Commit still syncs the table.
func TestPrepareStartsWriteBack(t *testing.T) {
	h := newHeldWriteBack()
	s, _ := openTest(t, errorfs.Wrap(vfs.NewMem(), h), 2)
	defer s.Close()
	var released sync.Once
	release := func() { released.Do(func() { close(h.release) }) }
	defer release() // NB: before Close, which waits for a Prepare held there

	// 8 values of 40 KiB: a table of 320 KiB, no request.
	small, err := preparedPending(t, s, 1, 8, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if len(h.asked) != 0 {
		t.Errorf("a 320 KiB table: write-back asked for %v; want none", h.asked)
	}
	h.mu.Unlock()

	// 64 values of 40 KiB: a table of 2.5 MiB.
	type result struct {
		p   *Pending
		err error
	}
	prepared := make(chan result, 1)
	go func() {
		p, err := preparedPending(t, s, 2, 64, 2, nil)
		prepared <- result{p, err}
	}()
	// NB: Prepare may return before the request starts, or while it is
	// held; it must not wait for it.
	var path string
	select {
	case path = <-h.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no write-back request for a 2.5 MiB table")
	}
	var r result
	select {
	case r = <-prepared:
	case <-time.After(30 * time.Second):
		t.Fatal("Prepare waits for its write-back request")
	}
	release()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.synced[path] {
		t.Errorf("Commit did not sync %s, whose write-back was requested; synced: %v", path, h.synced)
	}
	if h.asked[path] < 1 {
		t.Errorf("write-back asked for %v; want %s", h.asked, path)
	}
}
