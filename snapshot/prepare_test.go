package snapshot

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
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
