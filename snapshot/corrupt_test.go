package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Corruption is injected in two ways:
//   - logical: setRawForTest overwrites or deletes a manifest or blob key
//     inside Pebble (an ingested sstable, like every store write), so Pebble
//     itself is healthy and only the store's checksums can notice;
//   - physical: bytes of an sstable file on a MemFS are flipped, so Pebble's
//     block checksums or the store's notice (TestFileCorruption).

// threeCheckpoints commits 1..3 where 2 and 3 each change key group 2 and
// reuse 0 and 1 from their predecessor.
func threeCheckpoints(t *testing.T, fs vfs.FS) (*Store, *testLogger) {
	return threeCheckpointsSized(t, fs, 256)
}

func threeCheckpointsSized(t *testing.T, fs vfs.FS, size int) (*Store, *testLogger) {
	s, lg := openTest(t, fs, 3)
	commitFull(t, s, 1, 3, 1, size)
	for id := uint64(2); id <= 3; id++ {
		p := s.mustBegin(t, id)
		for kg := 0; kg < 2; kg++ {
			if err := p.ReuseKeyGroup("count", kg, id-1); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.PutKeyGroup("count", 2, blob(2, int(id), size)); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
	}
	return s, lg
}

func TestCorruptionFallsBack(t *testing.T) {
	manifest3 := idKey(prefixManifest, 3)
	blob3 := blobKey(3, entryKey{kind: KindKeyGroup, op: "count", a: 2})
	flip := func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }
	// resum rewrites the trailer so only the structural checks can object.
	resum := func(edit func([]byte)) func([]byte) []byte {
		return func(b []byte) []byte {
			body := b[:len(b)-manifestTrailerLen]
			edit(body)
			return binary.LittleEndian.AppendUint64(body, checksum(body))
		}
	}
	for _, tc := range []struct {
		name   string
		key    []byte
		mangle func([]byte) []byte // nil deletes the key
		want   string              // in the reported error
	}{
		{"manifest bit flip", manifest3, flip, "manifest: snapshot: checkpoint corrupt: checksum mismatch"},
		{"manifest magic", manifest3, resum(func(b []byte) { b[0] = 'X' }), `bad magic "XFCM"`},
		{"manifest version", manifest3, resum(func(b []byte) { b[4] = 9 }), "unsupported format version 9"},
		{"manifest id", manifest3, resum(func(b []byte) { b[8] = 4 }), "stored under id 3 but says checkpoint 4"},
		{"manifest maxParallelism", manifest3, resum(func(b []byte) { b[16] = 0 }), "maxParallelism 0"},
		{"manifest truncated", manifest3, func(b []byte) []byte { return b[:len(b)-9] }, "manifest: snapshot: checkpoint corrupt: checksum mismatch"},
		{"manifest empty", manifest3, func([]byte) []byte { return []byte{} }, "truncated: 0 bytes"},
		{"manifest missing", manifest3, nil, "manifest: snapshot: checkpoint corrupt: missing"},
		{"blob bit flip", blob3, flip, `keygroup op="count" kg=2: snapshot: checkpoint corrupt: blob written by checkpoint 3: checksum`},
		{"blob truncated", blob3, func(b []byte) []byte { return b[:100] }, "has 100 bytes, manifest says 256"},
		{"blob missing", blob3, nil, `kg=2: blob written by checkpoint 3: snapshot: checkpoint corrupt: missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, lg := threeCheckpoints(t, vfs.NewMem())
			defer s.Close()
			corruptKey(t, s, tc.key, tc.mangle)
			c, err := s.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if c.ID() != 2 {
				t.Fatalf("Latest = %d after corrupting checkpoint 3, want 2", c.ID())
			}
			checkKeyGroups(t, c, []int{1, 1, 2}, 256)
			if len(c.Skipped) != 1 || c.Skipped[0].ID != 3 || !errors.Is(c.Skipped[0], ErrCorrupt) ||
				!strings.Contains(c.Skipped[0].Error(), tc.want) {
				t.Fatalf("Skipped = %v, want checkpoint 3 with %q", c.Skipped, tc.want)
			}
			if len(lg.errorsContaining("checkpoint 3", "falls back")) == 0 ||
				len(lg.errorsContaining("restoring an older checkpoint", "checkpoint=2")) == 0 {
				t.Fatal("the fallback was not logged")
			}
			if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{1, 2}) {
				t.Fatalf("Checkpoints = %v, want [1 2] once 3 is known bad", ids)
			}
			if err := s.mustBegin(t, 4).ReuseKeyGroup("count", 0, 3); !errors.Is(err, ErrNotRetained) {
				t.Fatalf("reuse from bad checkpoint 3: %v, want ErrNotRetained", err)
			}
		})
	}
}

func corruptKey(t *testing.T, s *Store, key []byte, mangle func([]byte) []byte) {
	t.Helper()
	var value []byte
	if mangle != nil {
		var old []byte
		err := s.scanPrefix(key[0], func(k, v []byte) {
			if string(k) == string(key) {
				old = append([]byte(nil), v...)
			}
		})
		if err != nil || old == nil {
			t.Fatalf("read %q: %v (found %v)", key, err, old != nil)
		}
		value = mangle(old)
	}
	if err := s.setRawForTest(key, value); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptManifestAtOpen: a manifest that fails at Open is reported,
// quarantined (its bytes kept under 'q'), and Latest says it skipped it.
func TestCorruptManifestAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := threeCheckpoints(t, fs)
	corruptKey(t, s, idKey(prefixManifest, 3), func(b []byte) []byte {
		body := b[:len(b)-manifestTrailerLen]
		body[0] = 'X'
		return binary.LittleEndian.AppendUint64(body, checksum(body))
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, lg := openTest(t, fs, 3)
	defer s.Close()
	if len(lg.errorsContaining("checkpoint 3", "manifest", "quarantining")) != 1 {
		t.Fatal("Open did not report the bad manifest of checkpoint 3")
	}
	if got := rawKeys(t, s, prefixQuarantine); !slices.Equal(got, []string{"q 3"}) {
		t.Fatalf("quarantine = %v, want [q 3]", got)
	}
	if got := rawKeys(t, s, prefixManifest); !slices.Equal(got, []string{"m 1", "m 2"}) {
		t.Fatalf("manifests = %v, want [m 1 m 2]", got)
	}
	// The sweep removed the blob only checkpoint 3 referenced.
	for _, k := range rawKeys(t, s, prefixBlob) {
		if strings.HasPrefix(k, "blob 3 ") {
			t.Fatalf("blob %s of the quarantined checkpoint survived the sweep", k)
		}
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() != 2 || len(c.Skipped) != 1 || c.Skipped[0].ID != 3 ||
		!strings.Contains(c.Skipped[0].Error(), `bad magic "XFCM"`) {
		t.Fatalf("Latest = %d, skipped %v; want 2 having skipped 3 for its magic", c.ID(), c.Skipped)
	}
	if s.MaxID() != 3 {
		t.Fatalf("MaxID = %d, want 3 (the quarantined id stays used)", s.MaxID())
	}
}

// TestSharedBlobCorruption: a corrupt blob referenced by every retained
// checkpoint leaves none usable, and the error names each of them.
func TestSharedBlobCorruption(t *testing.T) {
	s, lg := threeCheckpoints(t, vfs.NewMem())
	defer s.Close()
	corruptKey(t, s, blobKey(1, entryKey{kind: KindKeyGroup, op: "count", a: 0}),
		func(b []byte) []byte { b[0] ^= 1; return b })
	_, err := s.Latest()
	if !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest: %v, want ErrNoCheckpoint", err)
	}
	for id := 1; id <= 3; id++ {
		if !strings.Contains(err.Error(), fmt.Sprintf("checkpoint %d: keygroup", id)) {
			t.Errorf("error does not name checkpoint %d: %v", id, err)
		}
	}
	if n := len(lg.errorsContaining("blob written by checkpoint 1: checksum")); n != 3 {
		t.Fatalf("%d log lines about the shared blob, want 3", n)
	}
	// The store keeps working: a full checkpoint replaces the bad ones.
	commitFull(t, s, 4, 3, 4, 256)
	if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{4}) {
		t.Fatalf("Checkpoints = %v, want [4]: retention drops bad checkpoints", ids)
	}
	if c, err := s.Latest(); err != nil || c.ID() != 4 {
		t.Fatalf("Latest after a new checkpoint: %v", err)
	}
}

// TestFileCorruption flips bytes inside the sstable file, on a MemFS, where
// checkpoint 3's own key group 2 is stored (found by searching the files
// for its bytes; blobs are 8 KiB of random data, so Pebble stores them
// uncompressed and, being larger than a block, each fills its own block). Restore falls back to 2.
func TestFileCorruption(t *testing.T) {
	const size = 8 << 10
	fs := vfs.NewMem()
	s, _ := threeCheckpointsSized(t, fs, size)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dbDir := fs.PathJoin(testDir, "db")
	names, err := fs.List(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	needle := blob(2, 3, size)[size/2 : size/2+64]
	found := false
	for _, n := range names {
		if !strings.HasSuffix(n, ".sst") {
			continue
		}
		path := fs.PathJoin(dbDir, n)
		if at := bytes.Index(readFile(t, fs, path), needle); at >= 0 {
			flipFileBytes(t, fs, path, at)
			found = true
		}
	}
	if !found {
		t.Fatal("did not find checkpoint 3's blob in any sstable")
	}

	s, lg := openTest(t, fs, 3)
	defer s.Close()
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() != 2 || len(c.Skipped) != 1 || c.Skipped[0].ID != 3 {
		t.Fatalf("Latest = %d skipped %v, want 2 having skipped 3", c.ID(), c.Skipped)
	}
	if len(lg.errorsContaining("checkpoint 3", `kg=2`)) == 0 {
		t.Fatal("the corruption of checkpoint 3 was not logged")
	}
	checkKeyGroups(t, c, []int{1, 1, 2}, size)
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
}

func flipFileBytes(t *testing.T, fs vfs.FS, path string, at int) {
	t.Helper()
	data := readFile(t, fs, path)
	for i := at; i < at+8 && i < len(data); i++ {
		data[i] ^= 0xA5
	}
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Sync(), w.Close()); err != nil {
		t.Fatal(err)
	}
}
