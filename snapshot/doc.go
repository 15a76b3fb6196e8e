// Package snapshot is ringflow's durable checkpoint store: an embedded
// Pebble instance under the job's state dir that holds complete checkpoints
// and nothing else. (Keyed state with copy-on-write snapshots lives in
// snapshot/cow; the coordinator drives both.)
//
// # What a checkpoint holds
//
// Every entry is opaque bytes, addressed by kind:
//
//	kind             address                          written by
//	keygroup         (operator, key group)            PutKeyGroup / ReuseKeyGroup,
//	                 + position in its delta chain     then AppendKeyGroupDelta
//	source-position  (operator, subtask)              PutSourcePosition
//	channel-state    (operator, subtask, channel)     PutChannelState (unaligned checkpoints)
//	timers           (operator, subtask)              PutTimers
//	sink-txn         (operator, subtask)              PutSinkTxn (pre-committed transactions)
//
// plus job metadata (Meta: maxParallelism, parallelism per operator, and
// every piece of state the job declared, with its type's layout, so that a
// restore can tell a changed job from its checkpoint) kept in the manifest. Writing:
//
//	s, err := snapshot.Open(stateDir, snapshot.Options{})
//	p, err := s.Begin(id)                  // ids increase
//	p.PutKeyGroup("count", kg, blob)       // from any goroutine
//	p.ReuseKeyGroup("count", kg2, id-1)    // unchanged since id-1: no bytes written
//	p.ReuseKeyGroup("count", kg3, id-1)    // few keys changed: reuse the chain ...
//	p.AppendKeyGroupDelta("count", kg3, d) // ... and write only their delta
//	err = p.Commit(meta)                   // the checkpoint exists iff this returns nil
//
// Reading: s.Latest() returns the newest checkpoint that verifies, with
// accessors per kind; KeyGroups(op, first, last) returns a key-group range
// (each with its base and deltas), which is what a subtask reads when
// restoring after rescaling.
//
// Key-group state is a chain: a base and zero or more deltas, applied in
// order on restore (the store never interprets them). Reusing a key group
// reuses its whole chain. Whole key groups suffice when changes cluster in
// few key groups; when 1% of keys change uniformly, nearly every key group
// changes, and only deltas keep an incremental checkpoint near 1% of a full
// one. The writer decides when a long chain is worth a fresh base
// (Pending.KeyGroupDeltas tells it the length).
//
// # Key layout in Pebble
//
// Keys start with a one-byte namespace. Integers in keys are big endian, so
// Pebble's byte order is id order.
//
//	+-----+--------------------+-----------------------------------+------------------------+
//	| 'b' | origin id (8B BE)  | entry key                         | -> blob bytes          |
//	+-----+--------------------+-----------------------------------+------------------------+
//	| 'm' | checkpoint id (8B) |                                   | -> manifest            |
//	+-----+--------------------+-----------------------------------+------------------------+
//	| 'q' | checkpoint id (8B) |                                   | -> quarantined manifest|
//	+-----+--------------------+-----------------------------------+------------------------+
//
//	entry key = kind (1B) | len(op) (1B) | op (UTF-8, 1..255B) | a (4B BE) | b (4B BE)
//	            a = key group for keygroup entries, else the subtask
//	            b = keygroup: 0 for the base, i for the i-th delta;
//	                channel-state: the input channel; otherwise 0
//
// A blob is keyed by the checkpoint that wrote it (its origin). A later
// checkpoint that reuses it lists the same origin in its own manifest, so
// an unchanged key group is stored once however many checkpoints refer to
// it. Blob keys are never rewritten: origins only grow.
//
// # Manifest format
//
// Little endian unless noted; sizes in bytes.
//
//	+--------+------+-----------------------------------------------------------+
//	| offset | size | field                                                     |
//	+--------+------+-----------------------------------------------------------+
//	|      0 |    4 | magic "RFCM"                                              |
//	|      4 |    2 | format version (2; version 1 lacks the declared states)   |
//	|      6 |    2 | reserved, 0                                               |
//	|      8 |    8 | checkpoint id                                             |
//	|     16 |    4 | maxParallelism                                            |
//	|     20 |    4 | operator count N                                          |
//	|        |      | N x { len(op) 1B | op | parallelism 4B }, sorted by op    |
//	|        |    4 | entry count M                                             |
//	|        |      | M x { entry key (as above, a/b big endian) |              |
//	|        |      |       origin 8B | length 8B | xxhash64 of the blob 8B }   |
//	|        |      |     sorted by entry key bytes, no duplicates              |
//	|        |    4 | declared state count S (version 2 on)                     |
//	|        |      | S x { len 4B | operator | len 4B | state | len 4B |       |
//	|        |      |       layout }, sorted by (operator, state), no duplicates|
//	|        |    8 | run number of the job on its state dir (version 2 on)     |
//	|        |    4 | flags: bit 0 final checkpoint of a run, bit 1 job record  |
//	|        |      | follows (version 2 on)                                    |
//	|        |      | if bit 1: len 4B | the job's record (Meta.Job), <= 64 KiB |
//	|    end |    8 | xxhash64 of every byte before it                          |
//	+--------+------+-----------------------------------------------------------+
//
// Validation runs before a manifest is written and again after it is read
// (a pair assertion across the durability boundary): magic, version, id,
// maxParallelism in [1, 32768], every operator id valid and listed with a
// parallelism in [1, maxParallelism], entries strictly ordered, key group
// below maxParallelism, every delta preceded by its base and earlier
// deltas, subtask below its operator's parallelism, origin in [1, id],
// length at most 1 GiB, and no trailing bytes. The decoder checks
// every count against the bytes that remain, so a corrupt manifest yields
// an error, never a panic or a huge allocation.
//
// # Commit protocol
//
// The store writes Pebble only by ingesting sstables it builds itself; it
// never uses Pebble's WAL or memtable. Commit(meta):
//
//  1. Ends the pending checkpoint (later Puts fail), then takes the commit
//     lock: commits run one at a time, in id order; a checkpoint older than
//     the newest complete one fails with ErrSubsumed.
//  2. Builds the manifest from the buffered entries (written ones with
//     origin = id, reused ones copied from the manifest they came from) and
//     validates it; bad input (an operator missing from meta, a key group
//     not below maxParallelism, ...) fails here, naming the entry.
//  3. Writes two sstables in <dir>/staging: one of every newly written
//     blob, one of the manifest, and fsyncs both.
//  4. Ingests both in one call (pebble.DB.Ingest): Pebble links the files
//     into <dir>/db, fsyncs that directory, and records both in one
//     version edit in its own MANIFEST, with an fsync. That record is the
//     commit point: blobs and manifest become visible and durable
//     together, or not at all. The checkpoint exists once its manifest is
//     durable, and not a moment earlier; nothing partial is ever visible,
//     so there are no orphan blobs to clean up after a crash mid-commit.
//  5. Only then: the manifest's references are counted, retention runs, and
//     what became garbage is deleted (below).
//
// Steps 2 and the blob table of step 3 are the commit's CPU work (copying
// and checksumming every new blob); Prepare(meta, pause) does them ahead
// of Commit, on the caller's thread, calling pause between keys and
// between 16 KiB writes and leaving the fsync to Commit. A table that
// passes 1 MiB has its write-back started as it grows, by a goroutine of
// its own that closes it after (writeBehind), so that the fsync finds
// little left to write. No entry can be added once Prepare has started; an abort after it removes the staged
// table. A job prepares on one of its workers, in the worker's spare time
// (see sched.Worker.Background), and commits on a goroutine of its own,
// since the syncs and the ingest wait on the disk. For the same reason
// the (empty) staging file of the blob table is not created by Prepare:
// creating a file waits in the kernel, 80–240 µs and at times
// milliseconds, which a worker's records would wait too. Each commit
// creates the next checkpoint's file at its end (Open creates the first),
// away from the moment a checkpoint starts, when the barriers are in
// flight; Begin takes it, and creates one only if that failed. A failure
// to create it there fails the checkpoint at Prepare or Commit if it has
// blobs to write; a checkpoint that ends without using its file gives it
// back for the next one.
//
// Why two tables: each spans only keys that nothing stored overlaps (the
// blob keys of a new origin; one manifest key), so Pebble places both in
// its bottom level and no compaction ever rewrites them. One table from
// the first blob to the manifest overlapped every older manifest and
// tombstone, landed in L0, and was rewritten by a compaction soon after:
// at 1M keys, ~30 MB of compaction per checkpoint, on the job's cores.
//
// Open takes Pebble's lock on the state dir first (a second store on the
// same dir fails), then empties the staging dir (what a crash mid-commit
// left there was never ingested), and fsyncs the state dir and its parent,
// so a crash right after the first checkpoints cannot lose the directory
// entries that lead to them (the crash-clone test found this).
//
// Why ingestion and not write batches: Pebble treats a failed WAL write or
// sync as fatal (the commit pipeline cannot recover from it), which would
// turn a full disk during one checkpoint into a crash. Building the table
// ourselves keeps almost every write of a checkpoint outside Pebble's
// critical path, so those failures fail that checkpoint only. It also makes
// a commit atomic, and an incremental checkpoint costs one small table.
//
// # Retention and garbage collection
//
// The newest Options.Retained (default 3) complete checkpoints that have
// not been found bad are kept; older ones and bad ones are dropped.
//
// At run time the store keeps reference counts: for every blob key, the
// number of retained manifests plus pending checkpoints (through
// ReuseKeyGroup) that name it. Dropping a manifest or ending a pending
// checkpoint releases its references; a blob whose count reaches zero, and
// every dropped manifest key, become garbage. A reference taken by a
// pending checkpoint keeps a blob alive even if the checkpoint it came from
// is dropped meanwhile (Flink's shared-state registry has the same rule).
//
// Garbage is deleted by ingesting tombstones, after the commit that
// produced it is durable, in one table per blob origin plus one for
// manifest keys (tables that do not overlap, ingested in one call). When
// no blob of an origin is referenced any more, which is the rule when
// most keys change between checkpoints, its table holds one range
// tombstone over the whole origin: it covers the origin's blob table
// whole, so Pebble drops that table without rewriting anything (a
// delete-only compaction). Otherwise it holds point tombstones. (A steady
// checkpoint costs two ingestions, each with an fsync per table, one of
// the directory and one of Pebble's MANIFEST.) If that fails, the garbage
// stays queued for the next commit. At Open, a mark-and-sweep rebuilds the
// counts: it marks every blob a retained manifest names and deletes every
// other blob, so garbage whose deletion was lost to a crash, or left by a
// quarantined manifest, is reclaimed then. The sweep reads every stored
// blob once (Pebble has no key-only scan), so Open costs about one read of
// the retained state. Pebble's compactions reclaim the space behind the
// tombstones.
//
// # Reading and failure behaviour
//
// Latest reads through a Pebble snapshot, newest checkpoint first: it
// re-reads the manifest, decodes and validates it, then reads every entry
// and checks its length and xxhash64 against the manifest. The first
// checkpoint that passes is returned; each newer one that failed is
// logged at level Error through Options.Logger, with the checkpoint and
// an error naming the entry and what was wrong, and listed in
// Checkpoint.Skipped. A checkpoint that failed is
// marked bad: it is no longer offered by Checkpoints, cannot be reused
// from, and retention drops it at the next commit. If none passes, the
// error wraps ErrNoCheckpoint and names every failure.
//
//	failure                                     effect
//	create/write/fsync of the staging table     Commit returns the error (ENOSPC included);
//	                                            nothing of the checkpoint exists; the store
//	                                            keeps working
//	Pebble's fsync of its directory on ingest   as above (Ingest returns it)
//	link into Pebble fails                      Pebble copies instead; Commit succeeds
//	any write of garbage collection             logged; retried at the next commit / Open
//	Pebble WAL or MANIFEST write or fsync       fatal in Pebble by design (a failed fsync
//	                                            leaves the page cache untrustworthy): the
//	                                            store panics with a message saying so; the
//	                                            process must restart and restore
//	crash at any point                          after restart, the newest checkpoint whose
//	                                            ingestion was durable; never a partial one
//	manifest fails checksum/validation at Open  reported, moved to the 'q' namespace
//	                                            (quarantined: kept for inspection, never
//	                                            deleted by the store), its id stays used
//	                                            (MaxID)
//	manifest or blob bad/missing at Latest      reported; fallback to the previous checkpoint
//	Pebble finds a bad block (its own CRC)      reported as corruption instead of Pebble's
//	                                            default fatal error; the read fails, so the
//	                                            checkpoint is skipped as above (Open's sweep
//	                                            is skipped too, and retried at the next Open)
//	a bad block among the manifests at Open     Open fails with the error: the store cannot
//	                                            tell which checkpoints exist, and guessing
//	                                            could delete the blobs of unread ones
//
// Falling back means restoring older state; two-phase-commit sinks must
// tolerate re-committing the transactions of the skipped checkpoint, which
// they do since commits are idempotent.
//
// # Concurrency and memory
//
// A Store is safe for concurrent use. A Pending checkpoint's Put and Reuse
// methods may be called from several goroutines at once; they copy and
// checksum outside any lock. Entries are buffered until Commit, so a
// checkpoint's newly written bytes are held twice at most (by the caller's
// frozen state and by the Pending) until it commits or aborts. The Pending
// holds them off the Go heap, in an arena of anonymous mmap chunks that
// the next checkpoints reuse (the pool keeps as many as the largest of the
// last 16 checkpoints took, so a periodic full checkpoint after a run of
// deltas does not fault in fresh ones): a checkpoint leaves no garbage for
// the Go collector, whose cycles (one per ~40 MB at 1M keys) took CPU from the
// job's workers. A Commit without Prepare yields its thread (sched_yield)
// every 50 us while it writes the table of new blobs, and writes it in
// 16 KiB pieces, so that a pinned worker it displaced gets its core back
// well before the next scheduler tick. Byte slices
// returned by a Checkpoint belong to it and must not be modified.
//
// # Savepoints
//
// A savepoint is one checkpoint written out of the store, whole, into a
// directory of its own (WriteSavepoint), so that it depends on nothing
// else: the directory can be copied or moved, and read anywhere
// (ReadSavepoint). It holds one file, SAVEPOINT, little endian unless
// noted:
//
//	+--------+------+-----------------------------------------------------------+
//	| offset | size | field                                                     |
//	+--------+------+-----------------------------------------------------------+
//	|      0 |    4 | magic "RFSP"                                              |
//	|      4 |    2 | format version (1)                                        |
//	|      6 |    2 | reserved, 0                                               |
//	|      8 |    8 | size of the whole file                                    |
//	|     16 |   16 | savepoint id (random; names it wherever it is copied)     |
//	|     32 |    8 | when it was written, Unix ns                              |
//	|     40 |    8 | run of the job that took it                               |
//	|     48 |    8 | checkpoint id                                             |
//	|     56 |    2 | len(job id) J, at most 1024                               |
//	|     58 |    J | job id of the job that took it                            |
//	|        |    8 | manifest length L                                         |
//	|        |    L | the checkpoint's manifest, as stored (see above), with    |
//	|        |      | every entry's origin the checkpoint itself                |
//	|        |    8 | xxhash64 of every byte before it (the header's checksum)  |
//	|        |      | every entry's bytes, in manifest order, back to back      |
//	+--------+------+-----------------------------------------------------------+
//
// Incremental checkpoints share blobs, each stored once under the
// checkpoint that wrote it; a savepoint copies every blob the checkpoint
// refers to, so its manifest refers to nothing outside the file (a delta
// chain stays a chain, its links all in the file). The file is written
// under a temporary name, synced, renamed and its directory synced: a
// directory holds a whole savepoint or none. ReadSavepoint checks the
// magic, the version, the header's checksum, the size (a truncated file
// says so), the manifest (decoded and validated as the store's are, and
// every origin the checkpoint's own), and every entry's length and
// checksum; each failure is an error wrapping ErrCorrupt that says what is
// wrong. ReadSavepointInfo checks the header only.
//
// A job writes a savepoint in the background, after the checkpoint
// completed, from a Pinned checkpoint (Store.Pin): a Pebble snapshot taken
// at the commit, so that retention may drop the checkpoint, and garbage
// collection delete its blobs, meanwhile. ReadCheckpoint reads a
// checkpoint of another store (a job restoring another job's retained
// checkpoint): it opens Pebble read-only (with its lock, so never while a
// job uses the store), verifies like Latest, and changes nothing.
//
// # Testing notes
//
// Corruption is injected two ways: a test hook ingests raw bytes under a
// manifest or blob key (so only the store's checksums can notice), and
// bytes of an sstable on a MemFS are flipped (so Pebble's block checksums
// notice first). Write faults and ENOSPC come from Pebble's vfs/errorfs,
// crashes from vfs.NewCrashableMem and CrashClone before every filesystem
// operation of a commit.
package snapshot
