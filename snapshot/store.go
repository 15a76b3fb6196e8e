package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ringflow/ringflow/internal/affinity"
)

// Sentinel errors callers branch on. Returned errors wrap them.
var (
	// ErrClosed is returned by every operation on a closed Store and on the
	// Pending checkpoints it aborted when it closed.
	ErrClosed = errors.New("snapshot: store closed")
	// ErrNoCheckpoint is returned by Latest when no usable checkpoint exists.
	ErrNoCheckpoint = errors.New("snapshot: no complete checkpoint")
	// ErrCorrupt is wrapped by every error that reports a manifest or blob
	// that failed its checksum or its structural checks.
	ErrCorrupt = errors.New("snapshot: checkpoint corrupt")
	// ErrNotRetained is returned when a checkpoint id names no retained,
	// usable checkpoint.
	ErrNotRetained = errors.New("snapshot: checkpoint not retained")
	// ErrSubsumed is returned by Commit when a newer checkpoint completed
	// first; the older one is dropped, as in Flink.
	ErrSubsumed = errors.New("snapshot: checkpoint subsumed by a newer complete checkpoint")
)

// DefaultRetained is the number of complete checkpoints kept by default
// (Flink's state.checkpoints.num-retained is 1; the issue asks for 3).
const DefaultRetained = 3

// Options configure a Store. The zero value is usable.
type Options struct {
	// FS is the filesystem under the state dir; vfs.Default when nil. Tests
	// pass an errorfs or a crashable MemFS here.
	FS vfs.FS
	// Retained is how many complete checkpoints to keep; DefaultRetained
	// when zero. Negative values are rejected.
	Retained int
	// Logger receives the store's reports and Pebble's (those with the
	// attribute source=pebble; its informational lines at level Debug);
	// slog.Default() when nil. Corruption and fallback are logged at
	// level Error with the attributes checkpoint and err.
	Logger *slog.Logger

	// testPebbleOptions, when set by a test, adjusts Pebble's options
	// before Open (e.g. to turn off background compactions).
	testPebbleOptions func(*pebble.Options)
}

// Stats are cumulative counters over the life of a Store.
type Stats struct {
	Committed uint64 // checkpoints whose Commit succeeded
	Failed    uint64 // checkpoints whose Commit returned an error
	Aborted   uint64 // checkpoints dropped with Abort or by Close
	// BytesWritten counts entry bytes written by committed checkpoints.
	BytesWritten uint64
	// BytesReused counts entry bytes committed checkpoints referenced from
	// earlier checkpoints instead of writing them.
	BytesReused uint64
	// BytesIngested counts sstable bytes handed to Pebble (after Pebble's
	// block compression, with its index and footer).
	BytesIngested uint64
	// GarbageKeysDeleted counts blobs and manifests removed by retention.
	GarbageKeysDeleted uint64
}

// Store is the durable checkpoint store: an embedded Pebble instance under
// a state dir. It is safe for concurrent use. See the package doc for the
// key layout, the manifest format and the commit protocol.
type Store struct {
	fs         vfs.FS
	stagingDir string
	retained   int
	logger     *slog.Logger
	popts      *pebble.Options
	stagingSeq atomic.Uint64
	// chunks feeds the arenas of pending checkpoints.
	chunks chunkPool

	// closeMu is held for reading around every use of db, and for writing
	// by Close, so db is never used after it was closed.
	closeMu sync.RWMutex
	db      *pebble.DB

	// ingestMu serialises the store's ingestions, commits and garbage
	// collection, so checkpoints complete in id order and tombstones never
	// race with new manifests. Every Pebble snapshot the store opens is
	// opened under it too (Latest, Checkpoint, Pin): Pebble v2.1.7 panics
	// ("delete-only compaction scheduled with hints that did not delete or
	// excise a file") when the snapshots a delete-only compaction runs with
	// split a snapshot stripe that those it was picked with did not. A new
	// snapshot is newer than every published sequence number, so it can
	// split one only while an ingestion has applied its tables and not yet
	// published their sequence number. TestLatestDuringCommits (-count 25)
	// panicked in 18 of 40 test processes with snapshots opened beside the
	// ingestions, and in none of 200 with both under this lock. Taken
	// before s.mu, never while holding it.
	ingestMu sync.Mutex

	// behind counts the goroutines of writeBehind still running.
	behind sync.WaitGroup

	// blobFile is an empty staging file made ahead for the next
	// checkpoint's table of blobs (see Begin).
	blobFile struct {
		sync.Mutex
		f      *stagingFile
		closed bool // Close has run: a file made late is removed
	}

	mu struct {
		sync.Mutex
		closed   bool
		complete []*record // ascending by id
		pending  map[uint64]*Pending
		// refs counts, per blob key, the retained manifests and pending
		// reuses that reference it. A blob is garbage when it drops to 0.
		refs    map[string]int
		garbage []sstKV // tombstones (and quarantine copies) not yet applied
		// corrupt lists manifests that failed to verify at Open.
		corrupt []*CheckpointError
		maxID   uint64 // highest id begun or found in the store
		stats   Stats
		// spare holds the emptied maps of the last pending checkpoint
		// that ended, for the next Begin: grown afresh every checkpoint,
		// they cost page faults on the workers that write out.
		spare struct {
			entries map[entryKey]*pendingEntry
			chains  map[entryKey]int
		}
	}
}

// record is a complete checkpoint known to the store.
type record struct {
	m *manifest
	// bad is set when the checkpoint failed verification in Latest or
	// Checkpoint; it is then no base for reuse and retention drops it.
	bad bool
}

// CheckpointError reports a checkpoint that cannot be used, naming it and
// the entry (or "manifest") that was wrong.
type CheckpointError struct {
	ID    uint64
	Entry string
	Err   error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("snapshot: checkpoint %d: %s: %v", e.ID, e.Entry, e.Err)
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// Open opens (creating if needed) the store under dir. It verifies every
// manifest found, quarantines the ones that fail (reporting them), applies
// retention, and deletes every blob no retained manifest references.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Retained < 0 {
		return nil, fmt.Errorf("snapshot: Options.Retained is %d; want >= 1, or 0 for the default %d",
			opts.Retained, DefaultRetained)
	}
	if dir == "" {
		return nil, fmt.Errorf("snapshot: empty state dir")
	}
	s := &Store{fs: opts.FS, retained: opts.Retained, logger: opts.Logger}
	if s.fs == nil {
		s.fs = vfs.Default
	}
	if s.retained == 0 {
		s.retained = DefaultRetained
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.mu.pending = make(map[uint64]*Pending)
	s.mu.refs = make(map[string]int)
	s.stagingDir = s.fs.PathJoin(dir, "staging")
	if err := s.openPebble(dir, opts.testPebbleOptions); err != nil {
		return nil, err
	}
	if err := s.prepareDirs(dir); err != nil {
		_ = s.db.Close()
		return nil, err
	}
	if err := s.load(); err != nil {
		_ = s.db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) openPebble(dir string, adjust func(*pebble.Options)) error {
	s.popts = &pebble.Options{FS: s.fs, Logger: pebbleLogger{s.logger}}
	s.popts.EventListener = &pebble.EventListener{
		// NB: Pebble's default treats corruption found on a read as fatal.
		// The store instead reports it and lets the read fail, so that
		// restore falls back to an older checkpoint.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			s.logger.Error("snapshot: pebble found corruption", "path", info.Path, "err", info.Details)
		},
	}
	// NB: blobs are compact varint encodings of state that changes between
	// checkpoints; compressing them (and Pebble recompressing them in its
	// compactions) costs CPU on the cores the job runs on, for little
	// gain. The store writes them uncompressed.
	for i := range s.popts.Levels {
		s.popts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// NB: every commit ingests a small table of tombstones (see
	// tombstoneGroups), which lands in L0 and, once the tables it covers
	// are dropped, covers nothing. Pebble compacts L0 tables that do not
	// overlap one another only at L0CompactionFileThreshold of them, 500
	// by default: the directory held about one file per checkpoint until
	// then. A small threshold compacts them, cheaply, a few at a time.
	s.popts.L0CompactionFileThreshold = l0Files
	if adjust != nil {
		adjust(s.popts)
	}
	s.popts.EnsureDefaults()
	// Pebble takes a lock file: a second store on the same dir fails here,
	// before it could touch the first one's staging files.
	db, err := pebble.Open(s.fs.PathJoin(dir, "db"), s.popts)
	if err != nil {
		return fmt.Errorf("snapshot: open pebble under %s: %w", dir, err)
	}
	s.db = db
	return nil
}

// prepareDirs empties the staging dir and makes the directory entries that
// lead to the store durable.
func (s *Store) prepareDirs(dir string) error {
	// NB: a commit that crashed leaves its half-written sstable in staging;
	// it was never ingested, so it is simply removed.
	if err := s.fs.RemoveAll(s.stagingDir); err != nil {
		return fmt.Errorf("snapshot: clear %s: %w", s.stagingDir, err)
	}
	if err := s.fs.MkdirAll(s.stagingDir, 0o755); err != nil {
		return fmt.Errorf("snapshot: create %s: %w", s.stagingDir, err)
	}
	// NB: Pebble syncs the entries it creates inside its own directory,
	// not the directory's entry in the state dir, nor the state dir's in
	// its parent. Without these syncs a crash soon after the first Open
	// could lose the whole store, checkpoints included.
	for _, d := range []string{s.fs.PathDir(dir), dir} {
		if err := syncDir(s.fs, d); err != nil {
			return fmt.Errorf("snapshot: sync directory %s: %w", d, err)
		}
	}
	return nil
}

// Close aborts every pending checkpoint and closes Pebble. Complete
// checkpoints stay on disk for the next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.mu.closed = true
	pending := make([]*Pending, 0, len(s.mu.pending))
	for _, p := range s.mu.pending {
		pending = append(pending, p)
	}
	s.mu.Unlock()
	for _, p := range pending {
		p.abort(ErrClosed)
	}
	s.blobFile.Lock()
	f := s.blobFile.f
	s.blobFile.f, s.blobFile.closed = nil, true
	s.blobFile.Unlock()
	if f != nil {
		_ = f.f.Close()
		s.removeStaged(f.path)
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	// NB: tables are written under closeMu's read lock (withDB), so every
	// writeBehind has been closed by now, and none can start.
	s.behind.Wait()
	err := s.db.Close()
	s.db = nil
	s.chunks.close()
	return err
}

// Begin starts checkpoint id. Ids must increase: id must exceed every id
// begun on this store and every checkpoint id found in it (see MaxID).
func (s *Store) Begin(id uint64) (*Pending, error) {
	p, err := s.begin(id)
	if err != nil {
		return nil, err
	}
	// NB: the staging file of the checkpoint's blob table is not created
	// by Prepare on a job's worker: creating a file took 80–240 µs in the
	// kernel, once 3.9 ms, and the worker's records waited that long. Nor
	// is it created here, as the checkpoint starts: the caller's thread
	// then takes a worker's core while the barriers are in flight, and the
	// records of every input channel wait for the late barrier. The last
	// commit made it ahead (see makeBlobFile); only when that failed is it
	// created here. If that fails too, the checkpoint fails when it has
	// blobs to write, with this error.
	f, err := s.takeBlobFile()
	p.mu.Lock()
	switch {
	case err != nil:
		p.mu.blobFileErr = err
	case p.mu.done: // aborted meanwhile (Close)
		s.putBlobFile(f)
	default:
		p.mu.blobFile = f
	}
	p.mu.Unlock()
	return p, nil
}

func (s *Store) begin(id uint64) (*Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return nil, ErrClosed
	case id == 0:
		return nil, fmt.Errorf("snapshot: checkpoint id 0 is reserved")
	case id <= s.mu.maxID:
		return nil, fmt.Errorf("snapshot: checkpoint id %d is not above %d, the highest id already used",
			id, s.mu.maxID)
	}
	s.mu.maxID = id
	p := &Pending{s: s, id: id, arena: newArena(&s.chunks)}
	p.mu.entries, p.mu.chains = s.mu.spare.entries, s.mu.spare.chains
	s.mu.spare.entries, s.mu.spare.chains = nil, nil
	if p.mu.entries == nil {
		p.mu.entries = make(map[entryKey]*pendingEntry)
		p.mu.chains = make(map[entryKey]int)
	}
	s.mu.pending[id] = p
	return p, nil
}

// MaxID returns the highest checkpoint id begun on this store or found in
// it at Open; the next Begin must use a larger id.
func (s *Store) MaxID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.maxID
}

// Checkpoints returns the ids of the retained complete checkpoints that
// have not been found unusable, oldest first.
func (s *Store) Checkpoints() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.mu.complete))
	for _, r := range s.mu.complete {
		if !r.bad {
			ids = append(ids, r.m.id)
		}
	}
	return ids
}

// Stats returns the store's cumulative counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.stats
}

// withDB runs fn with the open Pebble instance, or returns ErrClosed.
func (s *Store) withDB(fn func(db *pebble.DB) error) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return fn(s.db)
}

// sstKV is one key of an sstable the store builds for ingestion: a value,
// a point tombstone (delete), or a range tombstone over [key, end).
// l0Files is the number of L0 tables at which Pebble compacts them.
const l0Files = 8

type sstKV struct {
	key    []byte
	value  []byte
	delete bool
	end    []byte
}

// ingest writes each non-empty group of kvs (each sorted here) into an
// sstable of its own under the staging dir, syncs them, and ingests them
// all into Pebble in one atomic step (one version edit). Groups must not
// overlap. Every error before Pebble's version edit leaves the database
// unchanged. It returns the bytes of the tables.
func (s *Store) ingest(db *pebble.DB, name string, groups ...[]sstKV) (uint64, error) {
	return s.ingestWith(db, name, nil, groups...)
}

// ingestWith is ingest with tables staged earlier (see stage) ingested in
// the same step; it removes them in any case.
func (s *Store) ingestWith(db *pebble.DB, name string, staged []string, groups ...[]sstKV) (uint64, error) {
	paths := append([]string(nil), staged...)
	defer func() {
		// Ingest removes its input on success, but only logs a failure to
		// do so; a failed ingest leaves it. Either way it must not linger
		// (Open also clears the staging dir).
		for _, path := range paths {
			s.removeStaged(path)
		}
	}()
	var size uint64
	for _, kvs := range groups {
		if len(kvs) == 0 {
			continue
		}
		path, n, err := s.stage(db, name, nil, kvs, s.yieldPause(), true)
		if err != nil {
			return 0, err
		}
		paths = append(paths, path)
		size += n
	}
	if len(paths) == 0 {
		return 0, nil
	}
	if err := db.Ingest(context.Background(), paths); err != nil {
		return 0, err
	}
	return size, nil
}

// stage sorts kvs and writes them into a new sstable under the staging
// dir, synced if sync is set (else see syncStaged); it returns the table's
// path and size. pause (not nil) is called between keys and between the
// pieces of large writes. On error the table does not remain.
func (s *Store) stage(db *pebble.DB, name string, into *stagingFile, kvs []sstKV, pause func() error, sync bool) (string, uint64, error) {
	sort.Slice(kvs, func(i, j int) bool { return string(kvs[i].key) < string(kvs[j].key) })
	if err := pause(); err != nil {
		return "", 0, err
	}
	if into == nil {
		var err error
		if into, err = s.createStaging(name); err != nil {
			return "", 0, err
		}
	}
	n, err := s.writeSST(db, into, kvs, pause, sync)
	if err != nil {
		s.removeStaged(into.path)
		return "", 0, err
	}
	return into.path, n, nil
}

// blobFileName names the staging files of blob tables; which checkpoint
// will use one is not known when it is made.
const blobFileName = "ckpt-blobs"

// takeBlobFile returns the staging file made ahead for a blob table, or
// creates one if there is none.
func (s *Store) takeBlobFile() (*stagingFile, error) {
	s.blobFile.Lock()
	f := s.blobFile.f
	s.blobFile.f = nil
	s.blobFile.Unlock()
	if f != nil {
		return f, nil
	}
	return s.createStaging(blobFileName)
}

// makeBlobFile creates the staging file for the next checkpoint's blob
// table, unless there is one. A failure is only logged: Begin tries
// again.
func (s *Store) makeBlobFile() {
	s.blobFile.Lock()
	have := s.blobFile.f != nil
	s.blobFile.Unlock()
	if have {
		return
	}
	f, err := s.createStaging(blobFileName)
	if err != nil {
		s.logger.Error("snapshot: staging file for the next checkpoint failed; Begin will try again", "err", err)
		return
	}
	s.putBlobFile(f)
}

// putBlobFile keeps f, an empty staging file, for the next checkpoint; it
// removes f if the store has one already or is closed.
func (s *Store) putBlobFile(f *stagingFile) {
	s.blobFile.Lock()
	keep := s.blobFile.f == nil && !s.blobFile.closed
	if keep {
		s.blobFile.f = f
	}
	s.blobFile.Unlock()
	if !keep {
		_ = f.f.Close()
		s.removeStaged(f.path)
	}
}

// createStaging creates an empty staging file for a table named name.
func (s *Store) createStaging(name string) (*stagingFile, error) {
	path := s.fs.PathJoin(s.stagingDir, fmt.Sprintf("%s-%06d.sst", name, s.stagingSeq.Add(1)))
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &stagingFile{path: path, f: f}, nil
}

// syncStaged makes a table staged without sync durable.
func (s *Store) syncStaged(path string) error {
	f, err := s.fs.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// removeStaged removes a staged table, if it is there.
func (s *Store) removeStaged(path string) {
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logger.Error("snapshot: remove staging file failed", "path", path, "err", err)
	}
}

// yieldPause is the pause of tables written on a thread of the store's
// caller: it yields the thread every yieldSlice.
func (s *Store) yieldPause() func() error {
	y := &affinity.Yielder{Every: yieldSlice}
	return func() error {
		y.MaybeYield()
		return nil
	}
}

func (s *Store) writeSST(db *pebble.DB, into *stagingFile, kvs []sstKV, pause func() error, sync bool) (uint64, error) {
	path := into.path
	cf := &chunkedFile{File: into.f, pause: pause, noSync: !sync}
	if !sync {
		cf.behind = func() *writeBehind { return s.startWriteBehind(into.f) }
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(cf),
		s.popts.MakeWriterOptions(0, db.TableFormat()))
	var err error
	for i := range kvs {
		if err := pause(); err != nil {
			_ = w.Close()
			return 0, err
		}
		switch kv := &kvs[i]; {
		case i > 0 && string(kvs[i-1].key) == string(kv.key):
			err = fmt.Errorf("duplicate key %q in one sstable", kv.key)
		case kv.end != nil:
			err = w.DeleteRange(kv.key, kv.end)
		case kv.delete:
			err = w.Delete(kv.key)
		default:
			err = w.Set(kv.key, kv.value)
		}
		if err != nil {
			_ = w.Close()
			return 0, fmt.Errorf("write %s: %w", path, err)
		}
	}
	// Close flushes, syncs and closes the file (objstorage Writable.Finish).
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("finish %s: %w", path, err)
	}
	meta, err := w.Metadata()
	if err != nil {
		return 0, fmt.Errorf("sstable metadata %s: %w", path, err)
	}
	return meta.Size, nil
}

// yieldSlice is how long writeSST runs between yields of its thread (see
// affinity.Yielder): a checkpoint's table of new blobs holds all the state
// it wrote (10-40 MB at 1M keys).
const yieldSlice = 50 * time.Microsecond

// writeChunk is the most writeSST writes to its file in one system call.
// A key group's blob at 1M keys is ~125 KB; copying that into the page
// cache in one write(2) took the thread's CPU for 50-100µs, longer than
// yieldSlice, with no chance to yield in between.
const writeChunk = 16 << 10

// chunkedFile writes in pieces of at most writeChunk bytes, pausing
// between them; with noSync, Sync does nothing (the caller syncs later).
// With behind set, a file that grows past writeBehindBytes has its
// write-back started as it grows (writeBehind), and is closed after it.
type chunkedFile struct {
	vfs.File
	pause  func() error
	noSync bool
	behind func() *writeBehind
	wb     *writeBehind // started at the first writeBehindBytes
	off    int64        // bytes written
	asked  int64        // bytes whose write-back was requested
}

func (f *chunkedFile) Close() error {
	if f.wb != nil {
		f.wb.close()
		return nil
	}
	return f.File.Close()
}

func (f *chunkedFile) Sync() error {
	if f.noSync {
		return nil
	}
	return f.File.Sync()
}

func (f *chunkedFile) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), writeChunk)
		m, err := f.File.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f.off += int64(m); f.behind != nil && f.off-f.asked >= writeBehindBytes {
			if f.wb == nil {
				f.wb = f.behind()
			}
			f.wb.request(f.off)
			f.asked = f.off
		}
		if p = p[k:]; len(p) > 0 {
			if err := f.pause(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// writeBehindBytes is the size from which a staged table's write-back is
// started as it is written (writeBehind), and roughly how many bytes the
// commit's sync still writes.
const writeBehindBytes = 1 << 20

// writeBehind starts the kernel's write-back of a staged table while it is
// being written, so that the sync at the commit finds little left to
// write: at 1M keys a checkpoint's table of blobs holds megabytes, all of
// them left dirty in the page cache by Prepare, and the commit waited
// 20-45 ms on its sync. Each request (vfs.File.SyncTo: sync_file_range on
// Linux, after the previous request's writes) can wait on the device, so
// the requests are made on a goroutine of its own, never on the thread
// that writes the table, which is a job's worker. A request made while
// one is in flight replaces the one waiting, as each covers the file from
// its start. Only requests: a file system that refuses them leaves all the
// writing to the sync, which is what makes the table durable either way.
type writeBehind struct {
	reqs chan int64 // the length to write back
}

// startWriteBehind starts the goroutine of f's write-back; it closes f once
// the writer calls close.
func (s *Store) startWriteBehind(f vfs.File) *writeBehind {
	w := &writeBehind{reqs: make(chan int64, 1)}
	s.behind.Add(1)
	go func() {
		defer s.behind.Done()
		refused := false
		for n := range w.reqs {
			if !refused {
				_, err := f.SyncTo(n)
				refused = err != nil
			}
		}
		if err := f.Close(); err != nil {
			s.logger.Warn("snapshot: closing a staged table failed", "err", err)
		}
	}()
	return w
}

// request asks for the write-back of the file's first n bytes; it never
// waits.
func (w *writeBehind) request(n int64) {
	for {
		select {
		case w.reqs <- n:
			return
		default:
		}
		select {
		case <-w.reqs: // superseded: n covers it
		default:
		}
	}
}

// close ends the requests; the goroutine closes the file after the last.
func (w *writeBehind) close() { close(w.reqs) }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// pebbleLogger routes Pebble's printf-style logging to the store's Logger,
// one record per line, with the attribute source=pebble. Pebble's
// informational lines describe its internals: they go out at level Debug.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: "+fmt.Sprintf(format, args...), "source", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: "+fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf is called by Pebble when a WAL or MANIFEST write or sync failed.
// Pebble cannot continue after that (a failed fsync leaves the page cache
// untrustworthy), so neither can the store: the process must restart and
// recover from the latest durable checkpoint. Pebble's default logger
// exits; a panic at least says why and can be seen by a supervisor.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble: fatal: "+msg, "source", "pebble")
	panic(fmt.Errorf("snapshot: pebble fatal error, the store must be reopened after a restart: %s", msg))
}
