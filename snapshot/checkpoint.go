package snapshot

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint is a complete checkpoint read back from the store. Its
// manifest was re-read from Pebble and verified, and every entry's bytes
// matched the length and checksum the manifest records. Byte slices returned
// by its accessors belong to the Checkpoint and must not be modified.
type Checkpoint struct {
	id      uint64
	meta    Meta
	entries []manifestEntry // sorted by encoded entry key
	data    [][]byte        // data[i] holds entries[i]'s bytes

	// Skipped lists the newer checkpoints that Latest passed over because
	// they failed verification, newest first. Each names what was wrong.
	Skipped []*CheckpointError
}

// KeyGroupState is one key group's state: a base and the deltas to apply
// to it in order (none unless written with AppendKeyGroupDelta).
type KeyGroupState struct {
	KeyGroup int
	Data     []byte
	Deltas   [][]byte
}

// SubtaskState is one subtask's entry of some kind.
type SubtaskState struct {
	Subtask int
	Data    []byte
}

// ChannelState is the in-flight bytes of one input channel.
type ChannelState struct {
	Channel int
	Data    []byte
}

// Latest returns the newest complete checkpoint whose manifest and blobs
// verify. A newer checkpoint that fails is reported (through Options.Logger,
// and in the result's Skipped) and Latest falls back to the one before.
// With no usable checkpoint the error wraps ErrNoCheckpoint, and every
// failure found.
func (s *Store) Latest() (*Checkpoint, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	s.ingestMu.Lock() // NB: for the snapshot, see ingestMu
	s.mu.Lock()
	candidates := make([]*record, 0, len(s.mu.complete))
	for i := len(s.mu.complete) - 1; i >= 0; i-- {
		if r := s.mu.complete[i]; !r.bad {
			candidates = append(candidates, r)
		}
	}
	skipped := append([]*CheckpointError(nil), s.mu.corrupt...)
	// NB: the snapshot is taken under s.mu, so no candidate has been
	// dropped by retention, let alone had its keys deleted, before it: a
	// concurrent commit cannot make a good checkpoint look damaged.
	snap := s.db.NewSnapshot()
	s.mu.Unlock()
	s.ingestMu.Unlock()
	defer snap.Close()

	for _, r := range candidates {
		c, err := s.verify(snap, r)
		if err == nil {
			c.Skipped = newerThan(skipped, c.id)
			if len(c.Skipped) > 0 {
				s.logger.Error("snapshot: restoring an older checkpoint; newer checkpoints were unusable",
					"checkpoint", c.id, "skipped", describe(c.Skipped))
			}
			return c, nil
		}
		skipped = append(skipped, err)
	}
	if len(skipped) == 0 {
		return nil, ErrNoCheckpoint
	}
	return nil, fmt.Errorf("%w; unusable: %s", ErrNoCheckpoint, describe(newerThan(skipped, 0)))
}

// Checkpoint returns retained checkpoint id, verified like Latest does but
// without falling back.
func (s *Store) Checkpoint(id uint64) (*Checkpoint, error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	s.ingestMu.Lock()
	s.mu.Lock()
	r := s.findLocked(id)
	snap := s.db.NewSnapshot() // under s.mu and ingestMu, as in Latest
	s.mu.Unlock()
	s.ingestMu.Unlock()
	defer snap.Close()
	if r == nil {
		return nil, fmt.Errorf("snapshot: checkpoint %d: %w", id, ErrNotRetained)
	}
	c, err := s.verify(snap, r)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// verify reads r's checkpoint from snap; on failure it reports it and
// marks r bad, so it is neither reused nor offered again.
func (s *Store) verify(snap *pebble.Snapshot, r *record) (*Checkpoint, *CheckpointError) {
	c, err := read(snap, r.m.id)
	if err != nil {
		s.logger.Error("snapshot: checkpoint unusable; restore falls back to an older one", "checkpoint", err.ID, "err", err)
		s.mu.Lock()
		r.bad = true
		s.mu.Unlock()
	}
	return c, err
}

// read loads checkpoint id from a consistent Pebble snapshot: the manifest
// first (decoded and validated again: the read half of the pair
// assertion), then every entry, each checked against the manifest.
func read(snap *pebble.Snapshot, id uint64) (*Checkpoint, *CheckpointError) {
	raw, err := getCopy(snap, idKey(prefixManifest, id))
	if err != nil {
		return nil, &CheckpointError{ID: id, Entry: "manifest", Err: err}
	}
	m, err := decodeManifest(raw)
	if err == nil && m.id != id {
		err = manifestErrorf("stored under id %d but says checkpoint %d", id, m.id)
	}
	if err != nil {
		return nil, &CheckpointError{ID: id, Entry: "manifest", Err: err}
	}
	c := &Checkpoint{id: id, meta: m.meta, entries: m.entries, data: make([][]byte, len(m.entries))}
	for i, e := range m.entries {
		if c.data[i], err = readEntry(snap, e); err != nil {
			return nil, &CheckpointError{ID: id, Entry: e.key.String(), Err: err}
		}
	}
	return c, nil
}

func readEntry(snap *pebble.Snapshot, e manifestEntry) ([]byte, error) {
	v, err := getCopy(snap, e.blobKey())
	if err != nil {
		return nil, fmt.Errorf("blob written by checkpoint %d: %w", e.origin, err)
	}
	if uint64(len(v)) != e.length {
		return nil, fmt.Errorf("%w: blob written by checkpoint %d has %d bytes, manifest says %d",
			ErrCorrupt, e.origin, len(v), e.length)
	}
	if sum := checksum(v); sum != e.checksum {
		return nil, fmt.Errorf("%w: blob written by checkpoint %d: checksum %#016x, manifest says %#016x",
			ErrCorrupt, e.origin, sum, e.checksum)
	}
	return v, nil
}

// getCopy reads key; a missing key is corruption, since a manifest names it.
func getCopy(snap *pebble.Snapshot, key []byte) ([]byte, error) {
	v, closer, err := snap.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: missing", ErrCorrupt)
	}
	if pebble.IsCorruptionError(err) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	out := append(make([]byte, 0, len(v)), v...)
	return out, closer.Close()
}

func newerThan(errs []*CheckpointError, id uint64) []*CheckpointError {
	var out []*CheckpointError
	for _, e := range errs {
		if e.ID > id {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out
}

func describe(errs []*CheckpointError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// ID returns the checkpoint id.
func (c *Checkpoint) ID() uint64 { return c.id }

// Meta returns the job metadata stored with the checkpoint.
func (c *Checkpoint) Meta() Meta { return c.meta.clone() }

// Bytes returns the total size of the checkpoint's entries.
func (c *Checkpoint) Bytes() uint64 {
	var n uint64
	for _, e := range c.entries {
		n += e.length
	}
	return n
}

// search returns the index of the first entry not below k.
func (c *Checkpoint) search(k entryKey) int {
	return sort.Search(len(c.entries), func(i int) bool { return compareEntryKeys(c.entries[i].key, k) >= 0 })
}

func (c *Checkpoint) get(kind Kind, op string, a, b int) ([]byte, bool) {
	k, err := makeEntryKey(kind, op, a, b)
	if err != nil {
		return nil, false
	}
	if i := c.search(k); i < len(c.entries) && c.entries[i].key == k {
		return c.data[i], true
	}
	return nil, false
}

// span returns the indices [lo, hi) of the entries of (kind, op) whose first
// address component is in [first, last], clamped to valid addresses.
func (c *Checkpoint) span(kind Kind, op string, first, last int) (lo, hi int) {
	first, last = max(first, 0), min(last, MaxParallelismLimit-1)
	if first > last || checkOperatorID(op) != nil {
		return 0, 0
	}
	lo = c.search(entryKey{kind: kind, op: op, a: uint32(first)})
	hi = c.search(entryKey{kind: kind, op: op, a: uint32(last) + 1})
	return lo, hi
}

// KeyGroup returns the base state of key group kg of operator op (see
// KeyGroupDeltas for what to apply on top of it).
func (c *Checkpoint) KeyGroup(op string, kg int) ([]byte, bool) {
	return c.get(KindKeyGroup, op, kg, 0)
}

// KeyGroupDeltas returns the deltas of key group kg of operator op, in the
// order to apply them to its base; none for a key group stored whole.
func (c *Checkpoint) KeyGroupDeltas(op string, kg int) [][]byte {
	if states := c.KeyGroups(op, kg, kg); len(states) == 1 {
		return states[0].Deltas
	}
	return nil
}

// KeyGroups returns the key groups of operator op in [first, last] that
// the checkpoint holds, in key group order: what a subtask restoring that
// range after rescaling reads.
func (c *Checkpoint) KeyGroups(op string, first, last int) []KeyGroupState {
	lo, hi := c.span(KindKeyGroup, op, first, last)
	var out []KeyGroupState
	for i := lo; i < hi; i++ {
		// Validation guarantees a chain starts with its base (b == 0).
		if k := c.entries[i].key; k.b > 0 {
			if n := len(out); n > 0 && out[n-1].KeyGroup == int(k.a) {
				out[n-1].Deltas = append(out[n-1].Deltas, c.data[i])
			}
			continue
		}
		out = append(out, KeyGroupState{KeyGroup: int(c.entries[i].key.a), Data: c.data[i]})
	}
	return out
}

// SourcePosition returns the position of source subtask (op, subtask).
func (c *Checkpoint) SourcePosition(op string, subtask int) ([]byte, bool) {
	return c.get(KindSourcePosition, op, subtask, 0)
}

// SourcePositions returns every subtask's position of source op.
func (c *Checkpoint) SourcePositions(op string) []SubtaskState {
	return c.subtasks(KindSourcePosition, op)
}

// ChannelState returns the in-flight bytes of input channel channel of
// subtask (op, subtask).
func (c *Checkpoint) ChannelState(op string, subtask, channel int) ([]byte, bool) {
	return c.get(KindChannelState, op, subtask, channel)
}

// ChannelStates returns the in-flight bytes of every recorded input
// channel of subtask (op, subtask), in channel order.
func (c *Checkpoint) ChannelStates(op string, subtask int) []ChannelState {
	lo, hi := c.span(KindChannelState, op, subtask, subtask)
	out := make([]ChannelState, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, ChannelState{Channel: int(c.entries[i].key.b), Data: c.data[i]})
	}
	return out
}

// Timers returns the timers of subtask (op, subtask).
func (c *Checkpoint) Timers(op string, subtask int) ([]byte, bool) {
	return c.get(KindTimers, op, subtask, 0)
}

// SinkTxn returns the pending transactions of sink subtask (op, subtask).
func (c *Checkpoint) SinkTxn(op string, subtask int) ([]byte, bool) {
	return c.get(KindSinkTxn, op, subtask, 0)
}

// SinkTxns returns every subtask's pending transactions of sink op: after
// a restore, possibly at another parallelism, all of them are re-committed.
func (c *Checkpoint) SinkTxns(op string) []SubtaskState {
	return c.subtasks(KindSinkTxn, op)
}

func (c *Checkpoint) subtasks(kind Kind, op string) []SubtaskState {
	lo, hi := c.span(kind, op, 0, MaxParallelismLimit-1)
	out := make([]SubtaskState, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, SubtaskState{Subtask: int(c.entries[i].key.a), Data: c.data[i]})
	}
	return out
}
