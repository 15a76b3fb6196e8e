// Package postgres is an exactly-once PostgreSQL sink for ringflow: a
// ringflow.TwoPhaseSink that inserts records as rows of a table and makes
// them visible only when the checkpoint covering them completes, using
// PostgreSQL's two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED).
// With checkpoints on, the table then holds every record's row exactly
// once across failures, restarts and kills of the process.
//
//	job := ringflow.NewJob(ringflow.Config{Parallelism: 2,
//		Checkpoint: ringflow.CheckpointConfig{Interval: time.Second, StateDir: "state"}})
//	...
//	ringflow.TxnSink(counts, "counts", postgres.Sink(postgres.Config[WordCount]{
//		ConnString: "postgres://app@db.internal/analytics",
//		Table:      "word_counts",
//		Columns:    []string{"word", "count"},
//		Row: func(row []any, c WordCount) []any {
//			return append(row, c.Word, c.Count)
//		},
//	}))
//
// # The server
//
// PostgreSQL 11 or later, with max_prepared_transactions above 0 (it is 0
// by default): each sink subtask keeps up to one prepared transaction per
// checkpoint in flight plus one, so parallelism × (Checkpoint.MaxConcurrent
// + 1) is the least that works; leave room for other users. Open checks it
// and fails with ErrPreparedTransactionsDisabled when it is 0. Open also
// checks that the table and columns exist and that the user may insert
// into them, and says which is missing. A prepared transaction must be
// committed by the user that prepared it, from its database. Each subtask
// holds two connections (see below), so max_connections must leave room
// for 2 × parallelism.
//
// # Transactions
//
// Each subtask writes each checkpoint's records in one transaction of its
// own, on a connection of its own:
//
//	task thread (Write, PreCommit)     writer goroutine, data connection
//	rows → batch ── full ──────────────→ BEGIN (first batch), COPY batch
//	barrier n: PreCommit ── last batch, gid ─→ COPY, PREPARE TRANSACTION gid
//	        returns gid, durable ─── waits ──→ ... done
//	checkpoint n complete: Commit(gid) on the control connection:
//	                                      COMMIT PREPARED gid
//
// PREPARE TRANSACTION makes the transaction durable on the server, though
// invisible; it survives the client's crash and the server's restart. The
// engine completes checkpoint n only after the durable function has seen
// the PREPARE succeed, and keeps the gid in the checkpoint; Commit runs
// when checkpoint n completes, and again, for the gids of the checkpoint a
// job restores, in Recover. A gid the server does not know was committed
// already (only Recover rolls back, and never a gid it is given), so
// Commit is idempotent. A PREPARE that fails fails every later call of the
// sink, so no checkpoint after it completes and no Commit mistakes its gid
// for one committed before.
//
// # While checkpoint n prepares
//
// The task thread does not wait for PREPARE: it goes on with checkpoint
// n+1's records while the writer goroutine finishes n. The writer serves
// batches strictly in order on one data connection (after PREPARE
// TRANSACTION the session holds no transaction, so n+1's BEGIN follows on
// the same connection), and exactly two batches exist per subtask: the
// task thread fills one while the writer copies or prepares with the
// other. When the writer is a full batch behind, Write waits for it: the
// sink's memory is two batches of BatchSize rows (plus pgx's encoding
// buffer) whatever the checkpoint interval and the server's speed, and a
// slow server backpressures the job rather than filling the heap. A
// second connection, the control connection, runs COMMIT PREPARED and
// ROLLBACK PREPARED on the task thread, so a commit never waits behind
// data; it is also the one Open and Recover check and clean up with.
//
// Rows go in with COPY (pgx's CopyFrom, in the binary format), not
// multi-row INSERT: COPY streams a batch in one round trip with no
// statement to build, parse or plan, where an INSERT of n rows is a
// statement of n × columns parameters (at most 65535), planned anew for
// each distinct n; it is the server's fastest way in. The price: COPY
// cannot upsert (no ON CONFLICT), and a row that violates a constraint
// fails the job. The sink appends; a view or a query over the table can
// pick each key's latest row.
//
// # Names and recovery
//
// A gid is
//
//	ringflow/<job>/<operator>/<subtask>/<nonce>.<seq>
//
// from ringflow.TaskInfoFrom: the job's id, kept in its state directory,
// the sink's operator name, the subtask that prepared it, a random nonce
// drawn at Open and a sequence number (Config.TxnPrefix replaces the job
// and operator). So a run that resumes a state directory finds what an
// earlier one left behind, and no gid is ever reused. Bytes of a name
// outside [A-Za-z0-9_.-] are written %XX, and a prefix over 150 bytes is
// replaced by its hash: a gid fits PostgreSQL's 200 bytes and never
// needs quoting. Each session's
// application_name is "ringflow-sink <hash of job and operator> <subtask>".
//
// Recover, which runs before a restored subtask writes anything, first
// terminates the sessions an earlier run of its share left on the server
// and waits for them to end: a killed process's last PREPARE may still be
// running there, and would otherwise land after the clean-up. Then it
// commits the gids of the restored checkpoint and rolls back every other
// prepared transaction of its share (found in pg_prepared_xacts by the
// gid's prefix): a transaction prepared for a checkpoint that never
// completed.
//
// The share of subtask i of p is every subtask j, of any earlier run, with
// j % p == i. That is how ringflow hands a checkpoint's transactions to a
// job restored at another parallelism, so the subtask that commits a
// vanished subtask's checkpointed transactions is the one that rolls back
// the rest of them: no subtask can roll back a transaction another is
// about to commit, and none is left to no one. (A rule such as "subtask 0
// cleans up for the vanished subtasks" would race with the subtask
// committing their transactions.)
//
// # Limits
//
// A subtask's transaction stays open from its first batch to the next
// checkpoint, so the server's idle_in_transaction_session_timeout, if
// set, must exceed the checkpoint interval, and an open or prepared
// transaction holds back VACUUM as any long transaction does: keep the
// interval in seconds, not hours. A prepared transaction holds its locks
// until committed. A row that
// conflicts on a unique index with a row of an earlier transaction that is
// prepared but not yet committed makes the COPY wait for that commit,
// which the same subtask issues; should its Write wait for the writer
// meanwhile, the commit never comes: set lock_timeout (for example
// "options=-c lock_timeout=10s" in the connection string) to turn that
// into an error. A job whose state directory is lost leaves its prepared
// transactions behind for good; roll them back by hand (SELECT gid FROM
// pg_prepared_xacts WHERE gid LIKE 'ringflow/<job>/%'), as they hold
// locks and keep VACUUM from cleaning up after them.
package postgres
