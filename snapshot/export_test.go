package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// incrementalCheckpoint commits checkpoint 1 in full, then 2 reusing every
// key group of 1, with a delta on key group 3 and a new base on 5, and
// returns checkpoint 2, which holds bytes of both.
func incrementalCheckpoint(t *testing.T, s *Store) *Checkpoint {
	t.Helper()
	const kgs, size = 8, 256
	p, err := s.Begin(1)
	if err != nil {
		t.Fatal(err)
	}
	writeAllKinds(t, p, 2, kgs, size)
	meta := testMeta()
	meta.States = []StateInfo{{Operator: "count", State: "n", Layout: "uint64"}}
	if err := p.Commit(meta); err != nil {
		t.Fatal(err)
	}
	p = s.mustBegin(t, 2)
	for kg := range kgs {
		if kg == 5 {
			err = p.PutKeyGroup("count", kg, blob(kg, 2, size))
		} else {
			err = p.ReuseKeyGroup("count", kg, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(p.AppendKeyGroupDelta("count", 3, []byte("delta-3")),
		p.PutSourcePosition("src", 0, []byte("pos-2")), p.PutSinkTxn("sink", 1, []byte("txn-2"))); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(meta); err != nil {
		t.Fatal(err)
	}
	c, err := s.Checkpoint(2)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sameCheckpoint fails unless a and b hold the same entries and metadata.
func sameCheckpoint(t *testing.T, a, b *Checkpoint) {
	t.Helper()
	if a.ID() != b.ID() || len(a.entries) != len(b.entries) {
		t.Fatalf("checkpoint %d with %d entries, want %d with %d", b.ID(), len(b.entries), a.ID(), len(a.entries))
	}
	for i := range a.entries {
		if a.entries[i].key != b.entries[i].key || !bytes.Equal(a.data[i], b.data[i]) {
			t.Fatalf("entry %d: %s = %q, want %s = %q", i, b.entries[i].key, b.data[i], a.entries[i].key, a.data[i])
		}
	}
	am, bm := a.Meta(), b.Meta()
	if am.MaxParallelism != bm.MaxParallelism || !slices.Equal(am.States, bm.States) || am.Run != bm.Run ||
		len(am.Parallelism) != len(bm.Parallelism) {
		t.Fatalf("meta %+v, want %+v", bm, am)
	}
}

// TestSavepointRoundTrip writes an incremental checkpoint as a savepoint,
// moves the savepoint's directory elsewhere and reads it back: the same
// entries, every one of them in the savepoint's own file.
func TestSavepointRoundTrip(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 3)
	defer s.Close()
	c := incrementalCheckpoint(t, s)
	if c.KeyGroupDeltas("count", 3) == nil {
		t.Fatal("the test checkpoint has no delta")
	}
	dir := filepath.Join(t.TempDir(), "sp")
	info, err := WriteSavepoint(dir, c, SavepointInfo{Job: "job-a", Run: 4})
	if err != nil {
		t.Fatal(err)
	}
	if info.Checkpoint != 2 || info.Job != "job-a" || info.Run != 4 || len(info.ID) != 32 {
		t.Fatalf("info %+v", info)
	}
	if _, err := WriteSavepoint(dir, c, SavepointInfo{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a second savepoint into %s: %v, want a refusal", dir, err)
	}
	moved := filepath.Join(t.TempDir(), "copied")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	got, gotInfo, err := ReadSavepoint(moved)
	if err != nil {
		t.Fatal(err)
	}
	if gotInfo.ID != info.ID || gotInfo.Bytes != info.Bytes || !gotInfo.Taken.Equal(info.Taken) {
		t.Fatalf("read info %+v, wrote %+v", gotInfo, info)
	}
	sameCheckpoint(t, c, got)
	for _, e := range got.entries {
		if e.origin != 2 {
			t.Fatalf("%s refers to checkpoint %d", e.key, e.origin)
		}
	}
	if head, err := ReadSavepointInfo(moved); err != nil || head.ID != info.ID || head.Checkpoint != 2 {
		t.Fatalf("ReadSavepointInfo: %+v, %v", head, err)
	}
	if _, _, err := ReadSavepoint(t.TempDir()); !errors.Is(err, ErrNotSavepoint) {
		t.Fatalf("an empty directory: %v, want ErrNotSavepoint", err)
	}
}

// TestSavepointCorrupt damages a savepoint's file every way: each read
// fails with an error wrapping ErrCorrupt that says what is wrong, and
// never panics.
func TestSavepointCorrupt(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 3)
	defer s.Close()
	c := incrementalCheckpoint(t, s)
	src := filepath.Join(t.TempDir(), "sp")
	if _, err := WriteSavepoint(src, c, SavepointInfo{Job: "j"}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(src, SavepointFile))
	if err != nil {
		t.Fatal(err)
	}
	headerEnd := len(good) - int(c.Bytes())
	cases := []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"empty", func([]byte) []byte { return nil }, "truncated"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"version", func(b []byte) []byte { b[4] = 9; return b }, "format version"},
		{"in-header", func(b []byte) []byte { return b[:savepointFixed+3] }, "truncated"},
		{"in-manifest", func(b []byte) []byte { return b[:headerEnd-20] }, "truncated"},
		{"header-byte", func(b []byte) []byte { b[40] ^= 1; return b }, "header checksum"},
		{"manifest-byte", func(b []byte) []byte { b[headerEnd-30] ^= 1; return b }, "header checksum"},
		{"in-blobs", func(b []byte) []byte { return b[:headerEnd+10] }, "truncated"},
		{"last-byte", func(b []byte) []byte { return b[:len(b)-1] }, "truncated"},
		{"extended", func(b []byte) []byte { return append(b, 0) }, "more than it had"},
		{"blob-byte", func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }, "checksum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := tc.edit(slices.Clone(good))
			if err := os.WriteFile(filepath.Join(dir, SavepointFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadSavepoint(dir)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadSavepoint: %v; want ErrCorrupt saying %q", err, tc.want)
			}
			t.Log(err)
			if _, err := ReadSavepointInfo(dir); tc.name != "blob-byte" && tc.name != "in-blobs" &&
				tc.name != "last-byte" && tc.name != "extended" && err == nil {
				t.Fatal("ReadSavepointInfo accepted a damaged header")
			}
		})
	}
}

// TestReadCheckpoint reads a store's checkpoints without changing it, and
// fails while another store has it open.
func TestReadCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir, Options{Retained: 3})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		commitFull(t, s, id, 4, int(id), 64)
	}
	if _, err := ReadCheckpoint(dir, 0, Options{}); err == nil {
		t.Fatal("ReadCheckpoint of a store in use: no error")
	} else {
		t.Log(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCheckpoint(dir, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkKeyGroups(t, c, []int{3, 3, 3, 3}, 64)
	if c, err = ReadCheckpoint(dir, 1, Options{}); err != nil || c.ID() != 1 {
		t.Fatalf("ReadCheckpoint(1): %v", err)
	}
	if _, err := ReadCheckpoint(t.TempDir(), 0, Options{}); err == nil {
		t.Fatal("ReadCheckpoint of an empty directory: no error")
	}
	s, err = Open(dir, Options{Retained: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Checkpoints(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("checkpoints %v after ReadCheckpoint, want 1, 2, 3", got)
	}
}

// TestPin reads a pinned checkpoint after retention dropped it and
// garbage collection deleted its blobs.
func TestPin(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 1)
	defer s.Close()
	commitFull(t, s, 1, 4, 1, 64)
	p, err := s.Pin(1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	commitFull(t, s, 2, 4, 2, 64)
	commitFull(t, s, 3, 4, 3, 64)
	if _, err := s.Checkpoint(1); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("checkpoint 1 after retention: %v", err)
	}
	c, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	checkKeyGroups(t, c, []int{1, 1, 1, 1}, 64)
	if _, err := s.Pin(1); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("Pin of a dropped checkpoint: %v", err)
	}
}
