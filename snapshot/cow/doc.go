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
// doubling (rebuilding that one key group's table at once: a pause
// proportional to 1/maxP of the state) and never shrinks: when it is half
// full while it has fewer than 4096 slots, and when 7/8 full from then on.
// Small tables are kept sparse because a linear probe run's length, and
// the branch mispredicted where it ends, cost more than their footprint:
// one subtask's 50k keys (64 key groups of ~780 keys; BenchmarkSubtaskUpdate)
// took ~25 ns per update in tables of 1024 slots (76% full) and ~17 ns in
// tables of 2048, against ~19 ns for a Go map, and keyed-count at 100k keys
// ran 12% faster. Large tables are kept dense because there the footprint
// decides: at 200k keys per subtask, tables of 4096 slots (76% full, 4 MiB
// in all) took ~38-41 ns per update where tables of 8192 took ~57-62 ns.
// (docs/perf.md has the measurements.)
// The probe index is the high bits of hash*φ (Fibonacci hashing): the key
// group already consumed the low bits.
//
// PrefetchAhead(hashes, i), called before each lookup of a batch, prefetches
// the home slots of the records a group of PrefetchGroup ahead, so that the
// batch's cache and TLB misses overlap: at millions of keys a lookup is one
// DRAM miss, and taking those misses one at a time is what bounds any hash
// map, a Go map included. A group at a time keeps the prefetches within
// what the core's miss buffers hold; Prefetch(hashes) asks for a few
// hashes at once. Both do nothing while the tables are small enough to stay
// in the caches, where they only cost time; above that, whether they pay
// depends on where the state sits, and the keyed operators ask a
// prefetch.Policy, which measures, before each batch.
//
// # Snapshots: shadow paging
//
// A table's slots are split into fixed pages of 256 slots (4 KiB for
// uint64/int64), reached through a per-key-group directory. Each directory
// entry holds the page pointer, two bitmaps (occupied slots; slots written
// in the current interval) and ver, the version in which the page was last
// allocated, copied or first written:
//
//	Map ─ tables[kg] ─ dir ─┬─ {page*, ver, occ, dirty} ─ page: [256]{key, value}
//	                        ├─ {page*, ver, occ, dirty} ─ page
//	                        └─ ...
//
// Versions number the intervals between freezes: the Map starts at
// version 1, and Freeze returns a snapshot of the current version v and
// moves the Map to v+1. Freeze copies each key group's table header
// (directory slice, length, geometry, change-tracking fields) into the
// Snapshot: O(key groups), no page touched. From then on the directories
// and pages are shared. A write checks the directory entry of its page: if
// the page's ver is not the current version, this is the page's first write
// in the interval, and the slow path runs: if a live snapshot can see the
// page (ver <= Map.required, the newest live snapshot's version), the
// writer copies the key group's directory (once) and the page (once, a
// chunk at a time: see below) and writes the copy; either way it sets ver and clears the dirty bitmap. So a
// page is copied at most once per snapshot, on the first write to it, and
// the cost is amortised into the writer and bounded by the state it
// actually touches. Pages not written after a freeze are never copied.
//
// CopyAhead makes those copies before the writes do, for the pages
// written in the interval the newest snapshot froze (the ones the next
// interval's writes are likely to copy): a task calls it, a page at a time,
// when it has no records waiting, so that the copies a checkpoint costs
// fall in time the task had, not in front of its records.
//
// Pages of plain data (no pointers in K or V) come from slabs mapped
// outside the Go heap, returned to the kernel when the Map is closed and
// its last Snapshot released: the state is most of a job's memory, and on
// the heap it doubled the garbage collector's goal (see newPage). With
// Config.HugePages, slabs are advised for transparent huge pages, so that
// at millions of keys updates and copies rarely miss the TLB.
//
// Why pages rather than Flink's per-entry versions (CopyOnWriteStateMap):
// Flink's freeze copies the bucket array, which is O(entries); per-entry
// versions also cost memory in every entry and a version check that touches
// the entry. Shadow paging keeps entries 16 bytes for uint64/int64, makes
// the copy-on-write check a read of the small, cache-resident directory
// (which the probe reads anyway, for the occupancy bitmap), and makes the
// freeze O(key groups). The price is copying each page written after a
// freeze, 4 KiB, a chunk at a time as its entries are first written.
//
// # Partial pages: the first write copies one chunk
//
// Copying a whole page at the first write was what a checkpoint cost a
// record: at 1M keys and 1M records/s nearly every record in the first
// milliseconds after a freeze is the first to write its page, and a copy of
// a cold 4 KiB page is about the time between records, so the records
// queued behind the copies. Instead the first write makes a partial copy: a
// fresh page holding only the 256-byte chunk (16 entries) being written,
// with the frozen page as its base, from which the other chunks are read:
//
//	{page*, base*, have, ver, occ, dirty}    have: chunks of page that hold the data
//
// The page's next write to another chunk copies all the chunks it lacks at
// once, and the page drops its base; so does CopyAhead, in a task's idle
// steps, which after a freeze mostly finds partial pages to complete. A
// page's second write comes later than its first (at 1M records/s, about
// 8 ms later for a page of 4,096 at 1M keys), when most pages have been
// completed in idle time, and under full load the two steps cost a page
// copy and a chunk, not sixteen chunk copies. A partial page that a freeze
// catches belongs to that snapshot as it is, and its next write copies it
// whole. Reads pay one predictable branch (base == nil) while no page is
// partial. docs/perf.md ("Copy-on-write state") has the measurements.
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
// reclaiming, so it stays O(key groups): it only prunes the live-snapshot
// list, which hands on what released snapshots held outside the pages —
// their array of key-group headers (the next Freeze captures into it) and
// the directories no table or live snapshot uses (for the next directory
// copies). Steady checkpointing therefore allocates no pages, directories
// or header arrays; fresh memory costs a page fault on first touch, and
// the first writes after a freeze and the freeze itself are where a
// record's latency would pay for it.
//
// Values are copied by assignment when a page is copied. If V refers to
// memory (slices, maps, pointers), treat that memory as immutable: replace
// the value, never mutate through it, or a snapshot would see the change.
// Likewise the pointer Upsert returns is dead after the next mutating call
// or Freeze.
//
// # Changed key groups and deltas
//
// Two granularities, both exact up to "written" (a write of an unchanged
// value, or an entry moved by a deletion's backward shift, counts):
//
//   - Key groups. Every mutation records the version in its key group's
//     header, which Freeze captures: Snapshot.ChangedSince(kg, v) says
//     whether kg was written after snapshot v. An incremental checkpoint
//     references the previous blob of a key group that has not changed.
//   - Entries. A page's dirty bitmap marks the slots written during
//     interval ver, and each table logs the keys deleted during the current
//     interval. Snapshot v's pages with ver == v, their occupied dirty slots,
//     and the interval's deleted keys are exactly the changes since
//     snapshot v-1: AppendKeyGroupDelta writes them and ApplyKeyGroupDelta
//     replays them on top of the v-1 state. Growth carries the dirty bits
//     over. If an interval deletes more keys than the table holds (at
//     least 1024), its log is dropped and that snapshot has no delta
//     (ErrNoDelta): write the full blob, which is then about as small.
//
// Version 0 is the initial state: empty, or as restored by LoadKeyGroup and
// ApplyKeyGroupDelta before the first Freeze.
//
// # Key-group blob formats
//
// Snapshot.AppendKeyGroup writes one frozen key group in full;
// Map.LoadKeyGroup reads it back into any Map with the same maxParallelism
// whose range holds the key group (rescaling). AppendKeyGroupDelta and
// ApplyKeyGroupDelta do the same for a delta. Integers are unsigned varints
// unless noted; keys and values are as encoded by the Codecs.
//
//	full:   | "RFKG" | version=1 | maxP | keyGroup | count | count × (key, value)   | crc32c |
//	delta:  | "RFKD" | version=1 | maxP | keyGroup | nDel  | nDel × key              |
//	        |        nPut | nPut × (key, value)                                   | crc32c |
//
// The CRC-32C (Castagnoli, 4 bytes little-endian) covers everything before
// it. Every key must encode to at least one byte. Readers trust nothing:
// checksum, magic, version, maxP, key group in range (and empty, for a full
// load), counts against the bytes present, every key's hash mapping to the
// blob's key group, no duplicate key and no trailing bytes; any failure is
// an error wrapping ErrCorrupt, ErrKeyGroupNotOwned or ErrNotEmpty, and the
// Map is left unchanged.
package cow
