package snapshot

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ringflow/ringflow/internal/invariants"
)

// Pending is a checkpoint being written. Its Put and Reuse methods are safe
// to call from several goroutines at once (the background writers of
// different subtasks); Commit and Abort end it. Entries are buffered in
// memory until Commit, which writes them and the manifest to Pebble in one
// ingested sstable.
type Pending struct {
	s  *Store
	id uint64
	// arena holds the bytes of the entries written (not reused) until the
	// checkpoint ends.
	arena *arena

	bytesWritten atomic.Uint64
	bytesReused  atomic.Uint64

	mu struct {
		sync.Mutex
		// done is set once Commit or Abort started; err says why further
		// calls fail.
		done bool
		err  error
		// sealed is set by Prepare: no entry may be added after it.
		sealed bool
		// staged is what Prepare wrote, for Commit to ingest (or for an
		// abort to remove).
		staged  *staged
		entries map[entryKey]*pendingEntry
		// chains maps a key group's base key to its chain length (base
		// included).
		chains map[entryKey]int
		// blobFile is the staging file Begin took for the blobs' table,
		// until Prepare (or Commit) takes it; blobFileErr why Begin could
		// not get one. See Store.Begin.
		blobFile    *stagingFile
		blobFileErr error
	}
}

// stagingFile is a created, empty staging file.
type stagingFile struct {
	path string
	f    vfs.File
}

// takeBlobFile returns the staging file Begin created, if it has not been
// taken; the caller owns it from then on.
func (p *Pending) takeBlobFile() (*stagingFile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := p.mu.blobFile, p.mu.blobFileErr
	p.mu.blobFile = nil
	return f, err
}

// dropBlobFile gives the staging file Begin took back to the store for
// the next checkpoint, if no table was written into it.
func (p *Pending) dropBlobFile() {
	if f, _ := p.takeBlobFile(); f != nil {
		p.s.putBlobFile(f)
	}
}

// pendingEntry is either bytes to write or a reference to a blob of an
// earlier checkpoint (reused).
type pendingEntry struct {
	data   []byte
	sum    uint64
	reused bool
	ref    manifestEntry // the referenced entry when reused
}

// CommitStats describe one checkpoint.
type CommitStats struct {
	// BytesWritten is the entry bytes this checkpoint wrote.
	BytesWritten uint64
	// BytesReused is the entry bytes it referenced from earlier checkpoints.
	BytesReused uint64
}

// ID returns the checkpoint id.
func (p *Pending) ID() uint64 { return p.id }

// Stats returns the bytes written and reused so far.
func (p *Pending) Stats() CommitStats {
	return CommitStats{BytesWritten: p.bytesWritten.Load(), BytesReused: p.bytesReused.Load()}
}

// PutKeyGroup stores the state of key group kg of operator op. data is
// copied; the caller may reuse it.
func (p *Pending) PutKeyGroup(op string, kg int, data []byte) error {
	return p.put(KindKeyGroup, op, kg, 0, data)
}

// PutSourcePosition stores the position of source subtask (op, subtask).
func (p *Pending) PutSourcePosition(op string, subtask int, pos []byte) error {
	return p.put(KindSourcePosition, op, subtask, 0, pos)
}

// PutChannelState stores the in-flight bytes of input channel channel of
// subtask (op, subtask), recorded by an unaligned checkpoint.
func (p *Pending) PutChannelState(op string, subtask, channel int, data []byte) error {
	return p.put(KindChannelState, op, subtask, channel, data)
}

// PutTimers stores the timers of subtask (op, subtask).
func (p *Pending) PutTimers(op string, subtask int, data []byte) error {
	return p.put(KindTimers, op, subtask, 0, data)
}

// PutSinkTxn stores the pending (pre-committed) transactions of sink
// subtask (op, subtask).
func (p *Pending) PutSinkTxn(op string, subtask int, txn []byte) error {
	return p.put(KindSinkTxn, op, subtask, 0, txn)
}

// makeEntryKey validates an entry's address.
func makeEntryKey(kind Kind, op string, a, b int) (entryKey, error) {
	if err := checkOperatorID(op); err != nil {
		return entryKey{}, err
	}
	name := "subtask"
	if kind == KindKeyGroup {
		name = "key group"
	}
	if a < 0 || a >= MaxParallelismLimit {
		return entryKey{}, fmt.Errorf("snapshot: %s %d of operator %q outside [0, %d)",
			name, a, op, MaxParallelismLimit)
	}
	if b < 0 || b > math.MaxUint32 {
		return entryKey{}, fmt.Errorf("snapshot: channel %d of operator %q subtask %d outside [0, %d]",
			b, op, a, uint32(math.MaxUint32))
	}
	return entryKey{kind: kind, op: op, a: uint32(a), b: uint32(b)}, nil
}

func (p *Pending) put(kind Kind, op string, a, b int, data []byte) error {
	k, pe, err := p.prepare(kind, op, a, b, data)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.addLocked(k, pe); err != nil {
		return err
	}
	if kind == KindKeyGroup {
		p.mu.chains[k] = 1
	}
	p.bytesWritten.Add(uint64(len(data)))
	return nil
}

// prepare validates an entry and copies its bytes into the arena and
// checksums them. It runs outside the lock: writers of different subtasks
// proceed in parallel.
func (p *Pending) prepare(kind Kind, op string, a, b int, data []byte) (entryKey, *pendingEntry, error) {
	k, err := makeEntryKey(kind, op, a, b)
	if err != nil {
		return entryKey{}, nil, fmt.Errorf("checkpoint %d: %w", p.id, err)
	}
	if len(data) > BlobMaxBytes {
		return entryKey{}, nil, fmt.Errorf("snapshot: checkpoint %d: %s: %d bytes, more than the limit %d",
			p.id, k, len(data), BlobMaxBytes)
	}
	buf, sum, err := p.arena.copy(data)
	if errors.Is(err, errArenaReleased) {
		p.mu.Lock()
		err = fmt.Errorf("snapshot: checkpoint %d: %s: checkpoint already ended: %w", p.id, k, p.mu.err)
		p.mu.Unlock()
	}
	if err != nil {
		return entryKey{}, nil, err
	}
	pe := &pendingEntry{data: buf, sum: sum}
	return k, pe, nil
}

// AppendKeyGroupDelta appends data to the chain of key group kg of
// operator op: a restore applies the base, then every delta in order. The
// chain must have a base in this checkpoint already, written with
// PutKeyGroup or taken with ReuseKeyGroup; so an incremental checkpoint of
// a key group with few changed keys writes only their delta. Calls for one
// key group must not race with each other.
func (p *Pending) AppendKeyGroupDelta(op string, kg int, data []byte) error {
	base, pe, err := p.prepare(KindKeyGroup, op, kg, 0, data)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.mu.chains[base]
	switch {
	case n == 0 && !p.mu.done:
		return fmt.Errorf("snapshot: checkpoint %d: delta for %s, which has no base in this checkpoint", p.id, base)
	case n > DeltaChainMax:
		return fmt.Errorf("snapshot: checkpoint %d: %s already has %d deltas, the limit; write a new base",
			p.id, base, DeltaChainMax)
	}
	k := base
	k.b = uint32(n)
	if err := p.addLocked(k, pe); err != nil {
		return err
	}
	p.mu.chains[base] = n + 1
	p.bytesWritten.Add(uint64(len(data)))
	return nil
}

// KeyGroupDeltas returns the number of deltas on key group kg of operator
// op in this checkpoint so far, and false if it has no base yet. A writer
// uses it to decide when a fresh base is cheaper than a longer chain.
func (p *Pending) KeyGroupDeltas(op string, kg int) (int, bool) {
	k, err := makeEntryKey(KindKeyGroup, op, kg, 0)
	if err != nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.mu.chains[k]
	return max(n-1, 0), n > 0
}

func (p *Pending) addLocked(k entryKey, pe *pendingEntry) error {
	if p.mu.done {
		return fmt.Errorf("snapshot: checkpoint %d: %s: checkpoint already ended: %w", p.id, k, p.mu.err)
	}
	if p.mu.sealed {
		return fmt.Errorf("snapshot: checkpoint %d: %s: checkpoint already being committed", p.id, k)
	}
	if _, dup := p.mu.entries[k]; dup {
		return fmt.Errorf("snapshot: checkpoint %d: %s stored twice", p.id, k)
	}
	p.mu.entries[k] = pe
	return nil
}

// ReuseKeyGroup makes key group kg of operator op refer to the blobs that
// retained checkpoint from holds for it (its base and any deltas), instead
// of writing the same bytes again (incremental checkpoint). The blobs stay
// alive while this checkpoint is pending or retained, even once from itself
// is dropped. AppendKeyGroupDelta may then extend the chain.
func (p *Pending) ReuseKeyGroup(op string, kg int, from uint64) error {
	k, err := makeEntryKey(KindKeyGroup, op, kg, 0)
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", p.id, err)
	}
	s := p.s
	// NB: s.mu is held while the reference is added, so garbage collection
	// cannot delete the blob between the lookup and the reference.
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findLocked(from)
	if r == nil {
		return fmt.Errorf("snapshot: checkpoint %d: reuse %s from checkpoint %d: %w",
			p.id, k, from, ErrNotRetained)
	}
	chain := r.m.chain(k)
	if len(chain) == 0 {
		return fmt.Errorf("snapshot: checkpoint %d: reuse %s: checkpoint %d has no such entry", p.id, k, from)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.chains[k] > 0 {
		return fmt.Errorf("snapshot: checkpoint %d: %s stored twice", p.id, k)
	}
	for _, e := range chain {
		if err := p.addLocked(e.key, &pendingEntry{reused: true, ref: e}); err != nil {
			return err
		}
		s.mu.refs[string(e.blobKey())]++
		p.bytesReused.Add(e.length)
	}
	p.mu.chains[k] = len(chain)
	return nil
}

// findLocked returns the usable record with this id, or nil.
func (s *Store) findLocked(id uint64) *record {
	i := sort.Search(len(s.mu.complete), func(i int) bool { return s.mu.complete[i].m.id >= id })
	if i < len(s.mu.complete) && s.mu.complete[i].m.id == id && !s.mu.complete[i].bad {
		return s.mu.complete[i]
	}
	return nil
}

// Abort drops the checkpoint and everything written for it. It is a no-op
// once Commit or Abort has run.
func (p *Pending) Abort() { p.abort(errAborted) }

// errAborted is why an aborted checkpoint's methods fail.
var errAborted = errors.New("snapshot: checkpoint aborted")

func (p *Pending) abort(reason error) {
	if p.end(reason) == nil {
		p.s.finish(p, true /* aborted */)
	}
}

// end marks p done, returning an error if it already was.
func (p *Pending) end(reason error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.done {
		return fmt.Errorf("snapshot: checkpoint %d already ended: %w", p.id, p.mu.err)
	}
	p.mu.done, p.mu.err = true, reason
	return nil
}

// staged is a prepared checkpoint: its validated manifest and the sstable
// of its new blobs, written (Commit syncs it) under the staging dir.
type staged struct {
	m    *manifest
	enc  []byte // the manifest's encoding
	path string // the blobs' table, not yet synced; "" if the checkpoint wrote no blob
	size uint64
}

// Prepare does the CPU-heavy part of Commit ahead of it: it builds and
// validates the manifest and writes the new blobs into an sstable. pause,
// if not nil, is called between small pieces of that work (a key's value
// and each 16 KiB written); an error from it ends Prepare with that error.
// No entry can be added once Prepare has started. Commit then only writes
// the manifest's table and ingests both; a Pending that is aborted instead
// removes what Prepare wrote. Prepare is optional, and may be called once.
//
// (A job's workers prepare the checkpoint in their spare time, where a
// thread of its own would take a worker's core; the ingest and its syncs
// wait on the disk, so they stay off the workers.)
func (p *Pending) Prepare(meta Meta, pause func() error) error {
	p.mu.Lock()
	switch {
	case p.mu.done:
		err := fmt.Errorf("snapshot: checkpoint %d already ended: %w", p.id, p.mu.err)
		p.mu.Unlock()
		return err
	case p.mu.sealed:
		p.mu.Unlock()
		return fmt.Errorf("snapshot: checkpoint %d already prepared", p.id)
	}
	p.mu.sealed = true
	p.mu.Unlock()
	if pause == nil {
		pause = func() error { return nil }
	}
	st, err := p.stage(meta, pause)
	if err != nil {
		return fmt.Errorf("snapshot: prepare checkpoint %d: %w", p.id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.done { // aborted while staging
		p.s.removeStaged(st.path)
		return fmt.Errorf("snapshot: checkpoint %d ended while being prepared: %w", p.id, p.mu.err)
	}
	p.mu.staged = st
	return nil
}

// stage builds the manifest and writes the blobs' sstable.
func (p *Pending) stage(meta Meta, pause func() error) (*staged, error) {
	m, blobs, enc, err := p.build(meta, pause)
	if err != nil {
		return nil, err
	}
	st := &staged{m: m, enc: enc}
	if len(blobs) == 0 {
		return st, nil
	}
	// NB: holding the arena's read lock keeps an abort meanwhile from
	// releasing the blobs' bytes under the table writer.
	p.arena.copying.RLock()
	defer p.arena.copying.RUnlock()
	into, err := p.takeBlobFile()
	if err != nil {
		return st, err
	}
	err = p.s.withDB(func(db *pebble.DB) error {
		st.path, st.size, err = p.s.stage(db, fmt.Sprintf("ckpt-%d", p.id), into, blobs, pause, false)
		return err
	})
	return st, err
}

// Commit completes the checkpoint: it builds and validates the manifest,
// writes the new blobs and the manifest into two sstables (unless Prepare
// did the first part), syncs them and ingests both into Pebble in one
// atomic step. The checkpoint exists once Commit returns nil, and not
// before. Then retention runs and unreferenced blobs are deleted (see
// Store.Tidy). On error nothing of the checkpoint remains and the store
// stays usable.
func (p *Pending) Commit(meta Meta) error {
	err := p.CommitDurable(meta)
	p.s.Tidy()
	return err
}

// CommitDurable is Commit without the deletion of what the new checkpoint
// made unreferenced: it returns as soon as the checkpoint is durable, and
// the caller calls Store.Tidy when it likes (a job reports the checkpoint
// complete first: deleting garbage is another ingestion, and the
// checkpoint does not wait for it).
func (p *Pending) CommitDurable(meta Meta) error {
	p.mu.Lock()
	sealed, st := p.mu.sealed, p.mu.staged
	p.mu.Unlock()
	if sealed && st == nil {
		// Prepare failed, or has not returned: there is nothing to commit.
		p.abort(fmt.Errorf("snapshot: checkpoint %d: commit without a finished Prepare", p.id))
		return fmt.Errorf("snapshot: commit checkpoint %d: it was not prepared successfully", p.id)
	}
	if err := p.end(errors.New("committed")); err != nil {
		return err
	}
	s := p.s
	var err error
	if st == nil {
		st, err = p.stage(meta, s.yieldPause())
	}
	if err == nil && st.path != "" {
		// NB: the sync waits on the disk, so Prepare (on a job's worker)
		// leaves it to Commit.
		err = s.syncStaged(st.path)
	}
	s.ingestMu.Lock()
	defer s.ingestMu.Unlock()
	if err == nil {
		err = s.checkNewest(p.id)
	}
	var size uint64
	if err == nil {
		// NB: the new blobs and the manifest go into two sstables, ingested
		// together (one atomic version edit). Apart, each spans only keys
		// nothing else in the store overlaps (blob keys of a new origin; one
		// manifest key), so Pebble places both in its bottom level and no
		// compaction has to rewrite them; one table spanning from the blobs
		// to the manifest overlapped every older manifest, landed in L0 and
		// cost a compaction rewriting it soon after.
		manifestKV := []sstKV{{key: idKey(prefixManifest, p.id), value: st.enc}}
		err = s.withDB(func(db *pebble.DB) error {
			var paths []string
			if st.path != "" {
				paths = append(paths, st.path)
			}
			size, err = s.ingestWith(db, fmt.Sprintf("ckpt-%d", p.id), paths, manifestKV)
			return err
		})
		size += st.size
		st.path = "" // ingested, or removed by ingest
	}
	if st != nil && st.path != "" {
		s.removeStaged(st.path)
	}
	if err != nil {
		err = fmt.Errorf("snapshot: commit checkpoint %d: %w", p.id, err)
		p.mu.Lock()
		p.mu.err = err
		p.mu.Unlock()
		s.finish(p, false /* aborted */)
		return err
	}
	s.finishCommitted(p, st.m, size)
	return nil
}

// Tidy deletes the blobs and manifests that the checkpoints committed so
// far made unreferenced (retention), and prepares the staging file of the
// next checkpoint's blob table. Commit calls it; after CommitDurable the
// caller does. It waits on the disk, like Commit.
func (s *Store) Tidy() {
	s.collectGarbage()
	s.makeBlobFile()
}

// checkNewest rejects committing id when a newer checkpoint completed.
func (s *Store) checkNewest(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	if n := len(s.mu.complete); n > 0 && s.mu.complete[n-1].m.id > id {
		return fmt.Errorf("%w (checkpoint %d)", ErrSubsumed, s.mu.complete[n-1].m.id)
	}
	return nil
}

// build returns the validated manifest, the newly written blobs keyed for
// the store, and the manifest's encoding. It calls pause (not nil) between
// its steps, each of which takes ~150µs with a thousand entries.
func (p *Pending) build(meta Meta, pause func() error) (*manifest, []sstKV, []byte, error) {
	m := &manifest{id: p.id, meta: meta.clone()}
	slices.SortFunc(m.meta.States, compareStates)
	m.meta.StatesRecorded = true
	p.mu.Lock()
	m.entries = make([]manifestEntry, 0, len(p.mu.entries))
	var blobs []sstKV
	for k, pe := range p.mu.entries {
		e := pe.ref
		if !pe.reused {
			e = manifestEntry{key: k, origin: p.id, length: uint64(len(pe.data)), checksum: pe.sum}
			blobs = append(blobs, sstKV{key: e.blobKey(), value: pe.data})
		}
		m.entries = append(m.entries, e)
	}
	p.mu.Unlock()
	if err := pause(); err != nil {
		return nil, nil, nil, err
	}
	sortEntries(m.entries)
	if err := pause(); err != nil {
		return nil, nil, nil, err
	}
	if err := m.validate(); err != nil {
		return nil, nil, nil, err
	}
	if err := pause(); err != nil {
		return nil, nil, nil, err
	}
	enc := m.encode()
	if invariants.Enabled {
		// Pair assertion: what we are about to make durable decodes back
		// into the same manifest.
		back, err := decodeManifest(enc)
		ok := err == nil && back.id == m.id && len(back.entries) == len(m.entries)
		invariants.Check(ok, "snapshot: manifest %d does not survive its own encoding: %v", m.id, err)
	}
	return m, blobs, enc, nil
}

// finish retires a pending checkpoint that did not complete.
func (s *Store) finish(p *Pending, aborted bool) {
	defer p.arena.release() // after s.mu is unlocked
	p.dropBlobFile()
	p.mu.Lock()
	if st := p.mu.staged; st != nil && st.path != "" {
		s.removeStaged(st.path)
		st.path = ""
	}
	p.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.pending[p.id]; !ok {
		return
	}
	delete(s.mu.pending, p.id)
	p.releaseReusedLocked()
	if aborted {
		s.mu.stats.Aborted++
	} else {
		s.mu.stats.Failed++
	}
}

// finishCommitted records a durable checkpoint and applies retention.
func (s *Store) finishCommitted(p *Pending, m *manifest, size uint64) {
	defer p.arena.release() // after s.mu is unlocked; the sstable is written
	p.dropBlobFile()        // a checkpoint without new blobs did not use it
	s.mu.Lock()
	defer s.mu.Unlock()
	// Take the manifest's references before releasing the pending ones, so
	// no shared blob's count passes through zero.
	for _, e := range m.entries {
		s.mu.refs[string(e.blobKey())]++
	}
	delete(s.mu.pending, p.id)
	p.releaseReusedLocked()
	s.mu.complete = append(s.mu.complete, &record{m: m})
	st := p.Stats()
	s.mu.stats.Committed++
	s.mu.stats.BytesWritten += st.BytesWritten
	s.mu.stats.BytesReused += st.BytesReused
	s.mu.stats.BytesIngested += size
	s.applyRetentionLocked()
}

// releaseReusedLocked drops the references p took with ReuseKeyGroup and
// the entries, which point into p's arena, and leaves p's emptied maps to
// the next Begin. s.mu must be held.
func (p *Pending) releaseReusedLocked() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pe := range p.mu.entries {
		if pe.reused {
			p.s.unrefLocked(pe.ref.blobKey())
		}
	}
	clear(p.mu.entries)
	clear(p.mu.chains)
	p.s.mu.spare.entries, p.s.mu.spare.chains = p.mu.entries, p.mu.chains
	p.mu.entries = nil
	p.mu.chains = nil
}
