// Package cow holds keyed state per key group, with copy-on-write snapshots
// whose synchronous part costs O(key groups), independent of the number of
// entries.
//
// A Map[K, V] is one subtask's keyed state: one hash table per key group in
// the subtask's range (keygroups.RangeOf). The key group of a key is
// Hash(k) % maxParallelism, the same function the job partitions by, so a
// subtask only ever sees keys of its own key groups, and rescaling means
// loading whole key groups into Maps of other ranges.
//
// # Per-record path
//
// Each key group's table is open addressing with linear probing: slots of
// {key, value} inline, no per-entry allocation, no interface or function
// call on the hot path (the caller may pass the key's hash, which the
// partitioner already computed: GetHashed, UpsertHashed). Upsert returns a
// pointer to the value, so `*p += 1` is one probe. Deletion shifts the rest
// of the probe run back, so there are no tombstones. A table grows by
// doubling when it is 3/4 full. The probe index is the high bits of
// hash*φ (Fibonacci hashing): the key group already consumed the low bits.
//
// Prefetch(hashes) reads the home slot of every record of a batch before the
// batch is processed, so that the batch's cache and TLB misses overlap: at
// millions of keys a lookup is one DRAM miss, and taking those one at a time
// is what bounds a plain Go map.
//
// # Snapshots: shadow paging
//
// A table's slots are split into fixed pages of 256 slots (4 KiB for
// uint64/int64), reached through a per-key-group directory. Each directory
// entry holds the page pointer, the page's occupancy bitmap and the version
// at which the page was allocated or copied:
//
//	Map ─ tables[kg] ─ dir ─┬─ {page*, occ bitmap, ver} ─ page: [256]{key, value}
//	                        ├─ {page*, occ bitmap, ver} ─ page
//	                        └─ ...
//
// Freeze copies each key group's table header (directory slice, length,
// geometry, last-write version) into the Snapshot and bumps the Map's
// version: O(key groups), no page touched. From then on the directories
// and pages are shared. A write checks the directory entry of the page it
// lands on: if the page's version is not newer than the newest live
// snapshot (Map.required), the writer first copies the key group's
// directory (once) and the page (once), and writes the copy. So a page is
// copied at most once per snapshot, on the first write to it; the cost is
// amortised into the writer and bounded by the state the writer actually
// touches. Pages never written after a freeze are never copied.
//
// Why pages rather than Flink's per-entry versions (CopyOnWriteStateMap):
// Flink's freeze copies the bucket array, which is O(entries); per-entry
// versions also cost memory in every entry and a version check that touches
// the entry. Shadow paging keeps entries 16 bytes for uint64/int64, makes
// the copy-on-write check a read of the small, cache-resident directory,
// and makes the freeze O(key groups). The price is copying 4 KiB for the
// first write to a page after a freeze.
//
// # Concurrency
//
// The Map belongs to one goroutine (the task). A Snapshot is immutable and
// may be read from any goroutine (the background writer) while the task
// keeps writing: the task never writes a page or directory a live snapshot
// can reach. Release (any goroutine) marks a snapshot done with an atomic;
// the task notices on its next page copy or allocation, lowers
// Map.required, and moves the pages only released snapshots could reach
// (the "retired" pages, each remembering the version range that saw it) to
// a free list for reuse. The atomic is the happens-before edge between the
// reader's last read and the page's reuse. Freeze never does this
// reclaiming (only a cheap prune of the live-snapshot list), so it stays
// O(key groups).
//
// Values are copied by assignment when a page is copied. If V refers to
// memory (slices, maps, pointers), treat that memory as immutable: replace
// the value, never mutate through it, or a snapshot would see the change.
// Likewise the pointer Upsert returns is dead after the next mutating call
// or Freeze.
//
// # Changed key groups
//
// Every mutation records the Map's version in its key group's header, and
// Freeze captures it: Snapshot.ChangedSince(kg, v) says whether kg was
// written after snapshot v, exactly (a written but unchanged value counts
// as written). An incremental checkpoint references the previous blob of a
// key group that has not changed. Version 0 is the initial state: empty,
// or as restored by LoadKeyGroup before the first Freeze.
//
// # Key-group blob format
//
// Snapshot.AppendKeyGroup writes one frozen key group; Map.LoadKeyGroup
// reads it back into any Map with the same maxParallelism whose range holds
// the key group. All integers are unsigned varints unless noted.
//
//	+-------+---------+------+----------+-------+-------------------------------+--------+
//	| magic | version | maxP | keyGroup | count | count × (key, value)          | crc32c |
//	| RFKG  | 1 byte  |      |          |       | as encoded by the Codecs      | 4B LE  |
//	+-------+---------+------+----------+-------+-------------------------------+--------+
//
// The CRC-32C (Castagnoli) covers everything before it. A key and its value
// together must encode to at least one byte. LoadKeyGroup trusts nothing:
// checksum, magic, version, maxP, key group in range and empty, count
// against the bytes present, every key's hash mapping to the blob's key
// group, no duplicate key and no trailing bytes; any failure is an error
// wrapping ErrCorrupt, ErrKeyGroupNotOwned or ErrNotEmpty, and the Map is
// left unchanged.
package cow
