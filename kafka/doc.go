// Package kafka connects ringflow jobs to Apache Kafka, on the franz-go
// client: Source reads topics exactly once across failures, restores and
// rescaling, and Sink writes each checkpoint's records in a Kafka
// transaction, committed when the checkpoint completes. Together they give
// a job exactly-once results end to end, as seen by read_committed
// consumers of its output.
//
//	orders := ringflow.SourceWithOwnEventTime(job, "orders", kafka.Source(kafka.SourceConfig[Order]{
//		Brokers: brokers, Topics: []string{"orders"}, Decode: decodeOrder,
//		OutOfOrderness: 5 * time.Second, IdleTimeout: time.Minute,
//	}))
//	totals := ringflow.Window(ringflow.KeyBy(orders, customer), "totals", ringflow.TumblingWindows(time.Minute), sum{})
//	ringflow.TxnSink(totals, "out", kafka.Sink(kafka.SinkConfig[ringflow.WindowResult[string, int64]]{
//		Brokers: brokers, Topic: "totals", Encode: encodeTotal,
//	}))
//
// # Source
//
// Each subtask of a source reads some partitions of its topics, directly
// (it joins no consumer group): with every partition of every topic sorted
// by topic and partition, the k-th belongs to subtask k mod parallelism.
// The partitions are those the topics have when the job first starts;
// partitions added later are not read, and neither are topics added to
// SourceConfig.Topics for a job that resumes from a checkpoint: the
// checkpoint names the partitions to read.
//
// A subtask's position — the whole of what the source keeps — is the next
// offset of each of its partitions, and it lives only in ringflow's
// checkpoints:
//
//	+---------+-------+------------------------------------------------------+
//	| version | count | count × (topic, partition, next offset, stop offset) |
//	| 1 byte  | uvar  | uvarint length + bytes, varint, varint, varint        |
//	+---------+-------+------------------------------------------------------+
//
// A restored subtask assigns itself its partitions at exactly those
// offsets, so it reads exactly the records after those the checkpoint
// covers; nothing read from a broker (a group's committed offsets, the
// latest offset) decides where it resumes. A subtask that owns no
// partition still has a position (count 0), so that only a fresh start
// has none. On a fresh start a subtask lists its partitions' offsets
// (SourceConfig.Start) and keeps them from then on, so that even the first
// checkpoint holds explicit offsets.
//
// The source is a ringflow.SplitSource: restored at another parallelism
// (Config.RestoreFrom), the partitions of all old subtasks are shared out
// again by the same rule, each with its offset.
//
// Reading never blocks the job: a goroutine per subtask polls the client
// and hands each partition's fetched batch over a channel of
// SourceConfig.Buffer batches; Read takes what is there, decodes it on the
// worker thread and advances the offsets as it hands records over. Open,
// on a fresh start, waits for a metadata and an offsets request (at most
// SourceConfig.OpenTimeout).
//
// The source reads committed records only (isolation level
// read_committed) unless told otherwise, and keeps transaction markers
// from the client, only to step over them: a partition's next offset may
// be a marker's. A restored offset the brokers no longer hold (deleted by
// retention) fails the task rather than skipping to another offset.
//
// With SourceConfig.Bounded the source stops at the end offsets (last
// stable offsets) its partitions had when the job first started; they are
// kept in the position, so a restored job stops where the first run would
// have, and the job ends when every subtask has read its partitions to
// their end. A partition is at its end when the source has seen a record
// or transaction marker at or past the offset before its bound: on a
// compacted topic whose last records before the bound were compacted
// away, that waits for a record after them.
//
// With SourceConfig.Group, the offsets of each completed checkpoint are
// committed to that consumer group (as a client outside the group,
// generation -1), on a goroutine of the subtask's own, for tools that
// watch a group's lag. They are never read back.
//
// # Event time
//
// Added with ringflow.SourceWithOwnEventTime, the source stamps each
// record with its event time (SourceConfig.EventTime, or the Kafka
// record's timestamp) and keeps a watermark per partition: the newest
// timestamp read from it, less SourceConfig.OutOfOrderness, less 1 ms.
// Its own watermark is the lowest of its partitions' that are neither
// idle (no record for SourceConfig.IdleTimeout) nor read to their bound,
// so records in order within each partition are never late, however the
// partitions interleave in a batch. A subtask whose partitions are all
// idle, or that owns none, is idle. Added with ringflow.SourceWithEventTime
// and a WatermarkStrategy instead, the watermark follows the newest
// timestamp of each batch of the subtask, whatever partition it came
// from.
//
// # Sink
//
// With ExactlyOnce delivery (the default in a job with checkpoints), each
// subtask writes the records between two checkpoints in one Kafka
// transaction:
//
//	records ─► txn on id slot 0 ─► barrier n: pre-commit (flush) ─► checkpoint n completes: commit
//	records ─────────────────────────► txn on id slot 1 ─► barrier n+1: pre-commit ─► ...
//
// A transactional id carries one transaction at a time, and the next
// checkpoint's records flow while the previous transaction awaits its
// commit, so each subtask has a pool of SinkConfig.PoolSize transactional
// ids, <prefix>-<subtask>-<slot>, each with its own producer. The prefix is
// SinkConfig.TransactionalIDPrefix or "ringflow-<job id>-<operator>": the
// job id is kept in the job's state directory, so a restarted or resumed
// job finds the ids its predecessor used. A subtask that needs a slot
// while every one holds a transaction not yet committed — checkpoints are
// failing or not completing — fails with ErrPoolExhausted.
//
// At a checkpoint's barrier, PreCommit ends the subtask's transaction: its
// handle, which the checkpoint keeps, is the transactional id and the
// producer id and epoch that wrote it, with the subtask's layout
// (parallelism, pool size); its durable step, on a goroutine of its own,
// flushes the producer and checks that every record got in, and the
// checkpoint completes only once it has. When the checkpoint completes,
// the producer commits the transaction.
//
//	+---------+-------------------+-------------+-------+---------+-------------+------+
//	| version | transactional id  | producer id | epoch | subtask | parallelism | pool |
//	| 1 byte  | uvarint len+bytes | varint      | varint| uvarint | uvarint     | uvar |
//	+---------+-------------------+-------------+-------+---------+-------------+------+
//
// A subtask that wrote nothing for a checkpoint leaves a handle with no
// transactional id, for its layout alone.
//
// Recover, in a restored job, first commits the restored checkpoint's
// transactions with a raw EndTxn request carrying the handle's producer id
// and epoch, as their producer would have, from whatever process: a
// transaction whose producer has moved on since (its id was used or
// fenced again: by an earlier attempt that restored the same checkpoint
// and committed it) is taken as committed, and logged. Then it fences
// every transactional id of its pool with InitProducerID, which bumps the
// id's epoch — a producer left from before can write no more — and aborts
// the transaction the id had open: the records written after the
// checkpoint, which the restored job writes again. The order matters:
// fencing first would abort the very transactions the checkpoint holds.
// After a restore at a lower parallelism, subtask i also fences the ids of
// the old subtasks j ≡ i (mod parallelism) it took over, which the
// handles' layout names. Each handle names its transactional ids' prefix
// too: a subtask given handles of another prefix (a process of a
// distributed job rescaled to fewer processes stands in for the old
// processes whose number no longer exists) fences the ids of each old
// subtask whose handles it got.
//
// A bounded job's last transactions are committed when its final
// checkpoint completes; if a failure or a kill comes between the two, the
// next attempt or run on the state directory recovers the sink alone from
// that checkpoint, which commits them, before it reports the job finished.
//
// Without checkpoints, an exactly-once sink's one transaction would last
// the whole run, so the default there is AtLeastOnce: records go out as
// they come, and each checkpoint (or the end of input) waits until the
// brokers have acknowledged every record before it. NoGuarantee never
// waits.
//
// # Transaction timeout
//
// The brokers abort a transaction open longer than its timeout
// (SinkConfig.TransactionTimeout, transaction.timeout.ms; at most the
// brokers' transaction.max.timeout.ms, 15 minutes by default). A
// transaction opens with the first record after checkpoint n's barrier
// and is committed when checkpoint n+1 completes, so the timeout must
// exceed the checkpoint interval plus the longest time a checkpoint takes
// to complete (including Config.Checkpoint.Timeout for one that stalls),
// or the brokers abort transactions of a healthy job. For a pre-committed
// transaction to survive a failure, the timeout must also exceed the time
// until a restored job recovers it: restart delays, or the time an
// operator takes to bring a killed job back. A transaction the brokers
// aborted at its timeout cannot be told from one committed and fenced
// since (both answer PRODUCER_FENCED), so a restore logs it and goes on:
// its records are lost to the output. One aborted otherwise fails the
// restore with ErrTransactionAborted.
//
// Meanwhile an open transaction holds back the last stable offset of
// every partition it wrote to: read_committed consumers of the output see
// its records only after the commit, one checkpoint interval behind, and
// see nothing past a transaction left open until it is committed, fenced
// or timed out.
//
// # Exchange
//
// Exchange is the transport of a job run as several processes
// (ringflow.Cluster): the engine cuts the job at its keyed exchanges into
// repartition topics, which Exchange creates (Cluster.Partitions
// partitions each) and reads and writes with this package's Source and
// Sink. Each process reads only its own partitions of each topic
// (SourceConfig.Partitions), committed records only, from the offsets its
// checkpoints keep, and writes each checkpoint's records in transactions
// on the ids <job id>-<process>-<topic>-<subtask>-<slot>, committed when
// its checkpoint completes. The ringflow package doc's "Distributed jobs"
// says why that is exactly once across processes. A job rescaled to
// another number of processes (ringflow.Cluster.RestoreFrom) gives each
// new process's readers its partitions from the positions of every old
// process: the source's rescale keeps to the partitions
// SourceConfig.Partitions selects.
//
// # Testing
//
// The package's tests run against franz-go's in-process cluster, kfake:
// transactions, injected broker errors, a cluster stopped and started
// again from its data directory, a job killed with SIGKILL mid
// transaction and resumed from its state directory, and a job run as
// three processes, killed with SIGKILL one at a time, or rescaled from 3
// processes to 2 and then 4, against the same job in one process. Example
// shows a job
// against kfake.
package kafka
