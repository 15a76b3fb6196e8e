package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ringflow/ringflow/internal/invariants"
)

// load reads every manifest at Open: valid ones become records, invalid
// ones are reported and quarantined; retention is applied and a
// mark-and-sweep over the blob keyspace removes every blob no retained
// manifest references (leftovers of quarantined or over-retained
// checkpoints). It rebuilds the reference counts used from then on.
func (s *Store) load() error {
	valid, err := s.scanManifests()
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, m := range valid {
		s.mu.complete = append(s.mu.complete, &record{m: m})
		s.mu.maxID = max(s.mu.maxID, m.id)
		for _, e := range m.entries {
			s.mu.refs[string(e.blobKey())]++
		}
	}
	s.applyRetentionLocked()
	live := make(map[string]bool, len(s.mu.refs))
	for k := range s.mu.refs {
		live[k] = true
	}
	s.mu.Unlock()
	if err := s.sweepBlobs(live); err != nil {
		// NB: the sweep only reclaims space, and a corrupt block must not
		// make the store unopenable: the checkpoints it breaks are found
		// and skipped by Latest.
		s.logger.Error("snapshot: sweep failed; unreferenced blobs stay until the next Open", "err", err)
	}
	s.collectGarbage()
	s.makeBlobFile()
	return nil
}

// scanManifests decodes every manifest in key (= id) order. Ones that fail
// are reported, recorded in s.mu.corrupt and queued for quarantine.
func (s *Store) scanManifests() ([]*manifest, error) {
	var valid []*manifest
	var corrupt []*CheckpointError
	var quarantine []sstKV
	err := s.scanPrefix(prefixManifest, func(key, value []byte) {
		id, _ := decodeIDKey(key)
		m, err := decodeManifest(value)
		if err == nil && m.id != id {
			err = manifestErrorf("stored under id %d but says checkpoint %d", id, m.id)
		}
		if err == nil {
			valid = append(valid, m)
			return
		}
		ce := &CheckpointError{ID: id, Entry: "manifest", Err: err}
		s.logger.Error("snapshot: quarantining a corrupt manifest; restore will use an older checkpoint",
			"checkpoint", id, "err", ce)
		corrupt = append(corrupt, ce)
		quarantine = append(quarantine,
			sstKV{key: idKey(prefixManifest, id), delete: true},
			sstKV{key: idKey(prefixQuarantine, id), value: append([]byte(nil), value...)})
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: read manifests: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.corrupt = corrupt
	s.mu.garbage = append(s.mu.garbage, quarantine...)
	for _, ce := range corrupt {
		s.mu.maxID = max(s.mu.maxID, ce.ID)
	}
	return valid, nil
}

// sweepBlobs queues for deletion every blob whose key is not in live.
func (s *Store) sweepBlobs(live map[string]bool) error {
	var dead []sstKV
	err := s.scanPrefix(prefixBlob, func(key, _ []byte) {
		if !live[string(key)] {
			dead = append(dead, sstKV{key: append([]byte(nil), key...), delete: true})
		}
	})
	if err != nil {
		return fmt.Errorf("snapshot: sweep blobs: %w", err)
	}
	if len(dead) > 0 {
		s.logger.Info("snapshot: sweep found unreferenced blobs", "blobs", len(dead))
	}
	s.mu.Lock()
	s.mu.garbage = append(s.mu.garbage, dead...)
	s.mu.Unlock()
	return nil
}

// scanPrefix calls fn for every key starting with prefix. key and value
// are valid only during the call.
func (s *Store) scanPrefix(prefix byte, fn func(key, value []byte)) error {
	return s.withDB(func(db *pebble.DB) error {
		it, err := db.NewIter(&pebble.IterOptions{
			LowerBound: []byte{prefix},
			UpperBound: []byte{prefix + 1},
		})
		if err != nil {
			return err
		}
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return err
			}
			fn(it.Key(), v)
		}
		return it.Close()
	})
}

// applyRetentionLocked keeps the newest s.retained good checkpoints and
// drops every other record: older good ones and every bad one. A dropped
// record releases its references; its manifest and the blobs whose count
// reaches zero become garbage. s.mu must be held.
func (s *Store) applyRetentionLocked() {
	good := 0
	for _, r := range s.mu.complete {
		if !r.bad {
			good++
		}
	}
	kept := s.mu.complete[:0]
	for _, r := range s.mu.complete {
		if !r.bad && good <= s.retained {
			kept = append(kept, r)
			continue
		}
		if !r.bad {
			good--
		}
		s.dropLocked(r)
	}
	clear(s.mu.complete[len(kept):])
	s.mu.complete = kept
	if invariants.Enabled {
		s.checkRefsLocked()
	}
}

func (s *Store) dropLocked(r *record) {
	for _, e := range r.m.entries {
		s.unrefLocked(e.blobKey())
	}
	s.mu.garbage = append(s.mu.garbage, sstKV{key: idKey(prefixManifest, r.m.id), delete: true})
}

// unrefLocked drops one reference to a blob, queueing it for deletion when
// none remain. s.mu must be held.
func (s *Store) unrefLocked(key []byte) {
	n := s.mu.refs[string(key)] - 1
	if n < 0 {
		panic(invariants.Failf("snapshot: blob %q released more often than referenced", key))
	}
	if n > 0 {
		s.mu.refs[string(key)] = n
		return
	}
	delete(s.mu.refs, string(key))
	s.mu.garbage = append(s.mu.garbage, sstKV{key: key, delete: true})
}

// checkRefsLocked recomputes the reference counts from the records and
// pending checkpoints and compares them with s.mu.refs.
func (s *Store) checkRefsLocked() {
	want := make(map[string]int, len(s.mu.refs))
	for _, r := range s.mu.complete {
		for _, e := range r.m.entries {
			want[string(e.blobKey())]++
		}
	}
	for _, p := range s.mu.pending {
		p.mu.Lock()
		for _, pe := range p.mu.entries {
			if pe.reused {
				want[string(pe.ref.blobKey())]++
			}
		}
		p.mu.Unlock()
	}
	if len(want) != len(s.mu.refs) {
		panic(invariants.Failf("snapshot: %d referenced blobs, counts cover %d", len(want), len(s.mu.refs)))
	}
	for k, n := range want {
		if s.mu.refs[k] != n {
			panic(invariants.Failf("snapshot: blob %q has %d references, counted %d", k, n, s.mu.refs[k]))
		}
	}
}

// collectGarbage applies queued tombstones in one ingestion. It runs only
// after the manifest that made them garbage is durable. On failure the
// garbage stays queued for the next commit; a crash loses the queue, and
// the next Open's sweep finds the same keys again.
func (s *Store) collectGarbage() {
	s.mu.Lock()
	garbage := dedupeKVs(s.mu.garbage)
	s.mu.garbage = nil
	live := s.liveOriginsLocked()
	s.mu.Unlock()
	if len(garbage) == 0 {
		return
	}
	s.ingestMu.Lock()
	err := s.withDB(func(db *pebble.DB) error {
		_, err := s.ingest(db, "gc", tombstoneGroups(garbage, live)...)
		return err
	})
	s.ingestMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, ErrClosed) {
		return // the next Open's sweep finds the same keys
	}
	if err != nil {
		s.logger.Error("snapshot: deleting unreferenced keys failed; will retry", "keys", len(garbage), "err", err)
		s.mu.garbage = append(s.mu.garbage, garbage...)
		return
	}
	s.mu.stats.GarbageKeysDeleted += uint64(len(garbage))
}

// liveOriginsLocked returns the origins of every referenced blob. s.mu
// must be held.
func (s *Store) liveOriginsLocked() map[uint64]bool {
	live := make(map[uint64]bool)
	for k := range s.mu.refs {
		if origin, ok := blobOrigin([]byte(k)); ok {
			live[origin] = true
		}
	}
	return live
}

// tombstoneGroups splits sorted, deduplicated garbage into one group per
// blob origin, one for manifests and one for quarantine keys: groups that
// do not overlap, for one sstable each. The blobs of an origin none of
// whose blobs is live become one range tombstone over the origin.
//
// NB: that is what lets Pebble drop a dead checkpoint's blobs without
// rewriting anything: they sit in their own bottom-level table (see
// Commit), the range tombstone covers it whole, and Pebble deletes a table
// a range tombstone covers whole (a delete-only compaction). Point
// tombstones in one table spanning several origins overlapped live tables,
// and compactions rewrote those to apply them. The range is safe: a blob
// that no retained manifest or pending checkpoint references can never be
// referenced again, and no blob of an older origin is ever written again.
// Blob keys are grouped by their 9-byte prefix ('b' and the origin), so
// that even a malformed blob key (found by Open's sweep) lies in its
// origin's group, never inside another group's range.
func tombstoneGroups(garbage []sstKV, live map[uint64]bool) [][]sstKV {
	var groups [][]sstKV
	for i := 0; i < len(garbage); {
		j := i + 1
		for j < len(garbage) && sameGroup(garbage[i].key, garbage[j].key) {
			j++
		}
		g := garbage[i:j:j]
		if origin, ok := blobOrigin(g[0].key); ok && !live[origin] && origin < math.MaxUint64 {
			g = []sstKV{{key: idKey(prefixBlob, origin), end: idKey(prefixBlob, origin+1)}}
		}
		if g[0].key[0] == prefixManifest {
			g = manifestRanges(g)
		}
		groups = append(groups, g)
		i = j
	}
	return groups
}

// manifestRanges turns the deletions of whole manifests in g into range
// tombstones over their ids, for the same reason as a dead origin's: each
// manifest was ingested in a table of its own (see Commit), which the range
// covers whole, so Pebble drops the table and then the tombstone's. A
// point tombstone over a manifest's key stayed in L0, one small table per
// checkpoint, never compacted: Pebble compacts L0 tables that do not
// overlap one another only once there are hundreds of them.
func manifestRanges(g []sstKV) []sstKV {
	out := make([]sstKV, 0, len(g))
	for _, kv := range g {
		if id, ok := decodeIDKey(kv.key); ok && kv.delete && id < math.MaxUint64 {
			kv = sstKV{key: kv.key, end: idKey(prefixManifest, id+1)}
		}
		out = append(out, kv)
	}
	return out
}

// sameGroup says whether two garbage keys go into the same sstable: blob
// keys of the same origin, or keys of the same other namespace.
func sameGroup(a, b []byte) bool {
	if a[0] != b[0] {
		return false
	}
	oa, okA := blobOrigin(a)
	ob, okB := blobOrigin(b)
	return okA == okB && oa == ob
}

// blobOrigin returns the origin in the prefix of a blob key, which may be
// malformed after it.
func blobOrigin(key []byte) (uint64, bool) {
	if len(key) < 9 || key[0] != prefixBlob {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:9]), true
}

// dedupeKVs sorts kvs by key and drops repeated keys (the same blob can be
// queued both by retention and by Open's sweep).
func dedupeKVs(kvs []sstKV) []sstKV {
	sort.Slice(kvs, func(i, j int) bool { return string(kvs[i].key) < string(kvs[j].key) })
	out := kvs[:0]
	for _, kv := range kvs {
		if len(out) > 0 && string(out[len(out)-1].key) == string(kv.key) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
