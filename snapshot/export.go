package snapshot

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Savepoints: see "Savepoints" in the package doc for the format.

// SavepointFile is the name of the file that makes a directory a
// savepoint: it holds the whole savepoint.
const SavepointFile = "SAVEPOINT"

// ErrNotSavepoint is wrapped by the error of ReadSavepoint and
// ReadSavepointInfo for a directory that holds no savepoint.
var ErrNotSavepoint = errors.New("snapshot: not a savepoint")

// SavepointInfo describes a savepoint.
type SavepointInfo struct {
	// ID names the savepoint wherever it is copied: 32 random hex digits,
	// made when it was written.
	ID string
	// Job and Run are the identity of the job that took it, on its state
	// directory (opaque to this package).
	Job string
	Run uint64
	// Checkpoint is the id of the checkpoint it holds.
	Checkpoint uint64
	// Taken is when it was written.
	Taken time.Time
	// Bytes is the size of its file.
	Bytes uint64
}

const (
	savepointMagic   = "RFSP"
	savepointVersion = 1
	// savepointFixed is the header up to the job id: magic, version,
	// reserved, file size, id, time, run, checkpoint id, job id length.
	savepointFixed  = 4 + 2 + 2 + 8 + 16 + 8 + 8 + 8 + 2
	savepointJobMax = 1 << 10
)

// WriteSavepoint writes cp into dir as a savepoint: one file holding the
// checkpoint's manifest and every byte of its entries, whichever
// checkpoint wrote them, so that the savepoint depends on nothing else
// and the directory can be copied anywhere. dir is created; it must not
// exist or be empty. The file is written under a temporary name, synced
// and renamed, and the directory synced: dir holds a complete savepoint or
// none. info's Job and Run are recorded; the rest is filled in and
// returned.
func WriteSavepoint(dir string, cp *Checkpoint, info SavepointInfo) (SavepointInfo, error) {
	fail := func(err error) (SavepointInfo, error) {
		return SavepointInfo{}, fmt.Errorf("snapshot: write savepoint %s: %w", dir, err)
	}
	if !cp.meta.StatesRecorded {
		return fail(errors.New("the checkpoint is of format version 1, which does not record the types of its state"))
	}
	if len(info.Job) > savepointJobMax {
		return fail(fmt.Errorf("job id of %d bytes, more than %d", len(info.Job), savepointJobMax))
	}
	// NB: every entry's origin becomes the checkpoint itself: its bytes
	// are in the file, not in the checkpoint that first wrote them.
	m := &manifest{id: cp.id, meta: cp.meta.clone(), entries: make([]manifestEntry, len(cp.entries))}
	for i, e := range cp.entries {
		e.origin = cp.id
		m.entries[i] = e
	}
	if err := m.validate(); err != nil {
		return fail(err)
	}
	enc := m.encode()
	var id [16]byte
	rand.Read(id[:])
	info.ID, info.Checkpoint, info.Taken = hex.EncodeToString(id[:]), cp.id, time.Now()
	header := appendSavepointHeader(nil, info, id, enc)
	info.Bytes = uint64(len(header)) + 8 // its checksum
	for _, e := range cp.entries {
		info.Bytes += e.length
	}
	binary.LittleEndian.PutUint64(header[8:], info.Bytes)
	header = binary.LittleEndian.AppendUint64(header, checksum(header))

	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fail(err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fail(err)
	} else if len(entries) > 0 {
		return fail(fmt.Errorf("the directory is not empty (it holds %s)", entries[0].Name()))
	}
	tmp := filepath.Join(dir, "."+SavepointFile+".tmp")
	if err := writeSavepointFile(tmp, header, cp.data); err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, SavepointFile)); err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := syncDir(vfs.Default, d); err != nil {
			return fail(fmt.Errorf("sync directory %s: %w", d, err))
		}
	}
	return info, nil
}

// appendSavepointHeader appends the header up to its checksum, with the
// file size left 0.
func appendSavepointHeader(b []byte, info SavepointInfo, id [16]byte, manifest []byte) []byte {
	b = append(b, savepointMagic...)
	b = binary.LittleEndian.AppendUint16(b, savepointVersion)
	b = binary.LittleEndian.AppendUint16(b, 0 /* reserved */)
	b = binary.LittleEndian.AppendUint64(b, 0 /* file size, set later */)
	b = append(b, id[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(info.Taken.UnixNano()))
	b = binary.LittleEndian.AppendUint64(b, info.Run)
	b = binary.LittleEndian.AppendUint64(b, info.Checkpoint)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(info.Job)))
	b = append(b, info.Job...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(manifest)))
	return append(b, manifest...)
}

func writeSavepointFile(path string, header []byte, blobs [][]byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, err = w.Write(header)
	for _, b := range blobs {
		if err != nil {
			break
		}
		_, err = w.Write(b)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// savepointErrorf reports a savepoint file that fails its checks; the
// error wraps ErrCorrupt.
func savepointErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// ReadSavepoint reads the savepoint in dir and verifies all of it: the
// header's checksum, the file's size, the manifest (decoded and validated
// as the store's are), and every entry's length and checksum. It returns
// the checkpoint the savepoint holds, which depends on nothing else. A
// directory without a savepoint gives an error wrapping ErrNotSavepoint;
// a damaged or truncated savepoint one wrapping ErrCorrupt that says what
// is wrong.
func ReadSavepoint(dir string) (*Checkpoint, SavepointInfo, error) {
	b, err := readSavepointFile(dir)
	if err != nil {
		return nil, SavepointInfo{}, err
	}
	info, m, rest, err := decodeSavepoint(b, true)
	if err == nil {
		var c *Checkpoint
		if c, err = savepointCheckpoint(m, rest); err == nil {
			return c, info, nil
		}
	}
	return nil, SavepointInfo{}, fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
}

// ReadSavepointInfo reads what describes the savepoint in dir, checking
// its header only (ReadSavepoint checks everything).
func ReadSavepointInfo(dir string) (SavepointInfo, error) {
	f, err := os.Open(filepath.Join(dir, SavepointFile))
	if err != nil {
		return SavepointInfo{}, notSavepoint(dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return SavepointInfo{}, fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
	}
	// NB: the header holds the manifest, whose size is not known before
	// its length is read: a first read of the fixed part, then the rest.
	head := make([]byte, min(st.Size(), savepointFixed+savepointJobMax+8))
	if _, err := f.ReadAt(head, 0); err != nil {
		return SavepointInfo{}, fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
	}
	_, _, n, err := savepointFields(head, st.Size())
	if err == nil && n > len(head) {
		head = make([]byte, n)
		_, err = f.ReadAt(head, 0)
	}
	if err != nil {
		return SavepointInfo{}, fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
	}
	info, _, _, err := decodeSavepoint(head[:min(n, len(head))], false)
	if err != nil {
		return SavepointInfo{}, fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
	}
	info.Bytes = uint64(st.Size())
	return info, nil
}

func notSavepoint(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s holds no %s file", ErrNotSavepoint, dir, SavepointFile)
	}
	return fmt.Errorf("snapshot: savepoint %s: %w", dir, err)
}

func readSavepointFile(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, SavepointFile))
	if err != nil {
		return nil, notSavepoint(dir, err)
	}
	return b, nil
}

// savepointFields reads the fixed part of a savepoint's header from b, of a
// file of size bytes: its version, the file size it records and the
// length of the whole header, its checksum included.
func savepointFields(b []byte, size int64) (version uint16, recorded uint64, headerLen int, err error) {
	if len(b) < savepointFixed {
		return 0, 0, 0, savepointErrorf("truncated: %d bytes, less than a header", size)
	}
	if string(b[:4]) != savepointMagic {
		return 0, 0, 0, savepointErrorf("bad magic %q: not a savepoint file", b[:4])
	}
	version = binary.LittleEndian.Uint16(b[4:])
	if version != savepointVersion {
		return 0, 0, 0, savepointErrorf("unsupported format version %d (want %d)", version, savepointVersion)
	}
	recorded = binary.LittleEndian.Uint64(b[8:])
	jobLen := int(binary.LittleEndian.Uint16(b[savepointFixed-2:]))
	if jobLen > savepointJobMax {
		return 0, 0, 0, savepointErrorf("job id of %d bytes, more than %d", jobLen, savepointJobMax)
	}
	n := savepointFixed + jobLen + 8
	if len(b) < n {
		if int64(n) > size {
			return 0, 0, 0, savepointErrorf("truncated: %d bytes, less than its header", size)
		}
		return version, recorded, n, nil // the caller reads more
	}
	mlen := binary.LittleEndian.Uint64(b[n-8:])
	if mlen > uint64(size) {
		return 0, 0, 0, savepointErrorf("truncated: %d bytes, but its manifest alone has %d (header says the file has %d)",
			size, mlen, recorded)
	}
	n += int(mlen) + 8
	if int64(n) > size {
		return 0, 0, 0, savepointErrorf("truncated: %d bytes, less than its header's %d (header says the file has %d)",
			size, n, recorded)
	}
	return version, recorded, n, nil
}

// decodeSavepoint checks and decodes a savepoint's header at the start of
// b: with whole, b is the whole file, whose size must be the one recorded.
// It returns the bytes after the header.
func decodeSavepoint(b []byte, whole bool) (SavepointInfo, *manifest, []byte, error) {
	_, recorded, n, err := savepointFields(b, int64(len(b)))
	if err != nil {
		return SavepointInfo{}, nil, nil, err
	}
	if want, got := binary.LittleEndian.Uint64(b[n-8:]), checksum(b[:n-8]); want != got {
		return SavepointInfo{}, nil, nil, savepointErrorf("header checksum mismatch: stored %#016x, computed %#016x", want, got)
	}
	if whole && recorded != uint64(len(b)) {
		if recorded > uint64(len(b)) {
			return SavepointInfo{}, nil, nil, savepointErrorf("truncated: %d bytes of %d", len(b), recorded)
		}
		return SavepointInfo{}, nil, nil, savepointErrorf("%d bytes, %d more than it had when written", len(b), uint64(len(b))-recorded)
	}
	info := SavepointInfo{ID: hex.EncodeToString(b[16:32]),
		Taken:      time.Unix(0, int64(binary.LittleEndian.Uint64(b[32:]))),
		Run:        binary.LittleEndian.Uint64(b[40:]),
		Checkpoint: binary.LittleEndian.Uint64(b[48:]),
		Bytes:      recorded}
	jobLen := int(binary.LittleEndian.Uint16(b[savepointFixed-2:]))
	info.Job = string(b[savepointFixed : savepointFixed+jobLen])
	mstart := savepointFixed + jobLen + 8
	m, err := decodeManifest(b[mstart : n-8])
	if err != nil {
		return SavepointInfo{}, nil, nil, fmt.Errorf("manifest: %w", err)
	}
	if m.id != info.Checkpoint {
		return SavepointInfo{}, nil, nil, savepointErrorf("header says checkpoint %d, manifest %d", info.Checkpoint, m.id)
	}
	return info, m, b[n:], nil
}

// savepointCheckpoint returns the checkpoint of manifest m whose entries'
// bytes follow one another in blobs, checking each.
func savepointCheckpoint(m *manifest, blobs []byte) (*Checkpoint, error) {
	c := &Checkpoint{id: m.id, meta: m.meta, entries: m.entries, data: make([][]byte, len(m.entries))}
	var total uint64
	for _, e := range m.entries {
		if e.origin != m.id {
			return nil, savepointErrorf("%s refers to checkpoint %d: a savepoint holds all its bytes itself", e.key, e.origin)
		}
		total += e.length
	}
	if total != uint64(len(blobs)) {
		return nil, savepointErrorf("its entries have %d bytes, the file %d after its header", total, len(blobs))
	}
	for i, e := range m.entries {
		v := blobs[:e.length:e.length]
		blobs = blobs[e.length:]
		if sum := checksum(v); sum != e.checksum {
			return nil, &CheckpointError{ID: m.id, Entry: e.key.String(),
				Err: fmt.Errorf("%w: checksum %#016x, manifest says %#016x", ErrCorrupt, sum, e.checksum)}
		}
		c.data[i] = v
	}
	return c, nil
}

// ReadCheckpoint reads a checkpoint of the store under dir without
// changing the store: it opens Pebble read-only (it still takes the
// directory's lock, so it fails while a job uses the store), verifies
// like Latest, and closes it again. id 0 reads the newest usable
// checkpoint, falling back past damaged ones as Latest does; any other id
// that checkpoint only. Nothing is quarantined, retained or deleted.
func ReadCheckpoint(dir string, id uint64, opts Options) (*Checkpoint, error) {
	if _, err := os.Stat(filepath.Join(dir, "db")); err != nil {
		return nil, fmt.Errorf("snapshot: %s holds no checkpoint store: %w", dir, err)
	}
	s := &Store{fs: opts.FS, logger: opts.Logger, retained: DefaultRetained}
	if s.fs == nil {
		s.fs = vfs.Default
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.mu.pending = make(map[uint64]*Pending)
	s.mu.refs = make(map[string]int)
	readOnly := func(o *pebble.Options) {
		o.ReadOnly, o.ErrorIfNotExists = true, true
		if opts.testPebbleOptions != nil {
			opts.testPebbleOptions(o)
		}
	}
	if err := s.openPebble(dir, readOnly); err != nil {
		return nil, err
	}
	defer func() {
		s.closeMu.Lock()
		defer s.closeMu.Unlock()
		_ = s.db.Close()
		s.db = nil
	}()
	valid, err := s.scanManifests()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, m := range valid {
		s.mu.complete = append(s.mu.complete, &record{m: m})
	}
	s.mu.Unlock()
	if id == 0 {
		return s.Latest()
	}
	return s.Checkpoint(id)
}

// Pinned keeps a complete checkpoint readable after retention dropped it:
// it reads through a Pebble snapshot taken when it was pinned. Read it,
// then Release it, before the Store is closed.
type Pinned struct {
	s    *Store
	snap *pebble.Snapshot
	m    *manifest
}

// Pin pins retained checkpoint id (see Pinned): a savepoint is written from
// a checkpoint in the background, while newer checkpoints may complete
// and retention drop it.
func (s *Store) Pin(id uint64) (*Pinned, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	s.ingestMu.Lock()
	defer s.ingestMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findLocked(id)
	if r == nil {
		return nil, fmt.Errorf("snapshot: pin checkpoint %d: %w", id, ErrNotRetained)
	}
	// NB: under s.mu, as in Latest: no tombstone of r's blobs precedes it;
	// and under ingestMu (see there).
	return &Pinned{s: s, snap: s.db.NewSnapshot(), m: r.m}, nil
}

// Read reads and verifies the pinned checkpoint, as Store.Checkpoint does.
func (p *Pinned) Read() (*Checkpoint, error) {
	c, err := read(p.snap, p.m.id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Release releases the pin.
func (p *Pinned) Release() {
	if p.snap != nil {
		_ = p.snap.Close()
		p.snap = nil
	}
}
