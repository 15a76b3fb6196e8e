package kafka

import "time"

// The package's tunables, each with the judgement it encodes.
const (
	// defaultBuffer is how many fetched batches a source subtask holds
	// ahead of the job: enough that Read finds records while the next
	// fetch is under way, few enough that what a slow job holds in memory
	// stays a few fetches' worth.
	defaultBuffer = 16
	// defaultOpenTimeout bounds a source's metadata and offset requests
	// at open, and each commit to a group: long enough for a cluster
	// electing a leader, short enough that a wrong address fails the job
	// rather than hangs it.
	defaultOpenTimeout = 30 * time.Second
	// defaultPoolSize is the transactional ids per sink subtask: the
	// current transaction, the previous one awaiting its checkpoint's
	// completion, and three more for checkpoints that fail or are
	// aborted in a row before the pool runs out.
	defaultPoolSize = 5
	// defaultTransactionTimeout is the brokers' default
	// transaction.max.timeout.ms, the longest a sink may ask for without
	// a change to the brokers: the longest a pre-committed transaction
	// survives a job being down.
	defaultTransactionTimeout = 15 * time.Minute
	// closeAbortTimeout bounds how long a closing sink tries to abort its
	// open transaction; one it leaves open is fenced by the next Recover
	// or aborted at its timeout.
	closeAbortTimeout = 5 * time.Second
	// marksMax is how many checkpoints' positions a source with a group
	// remembers until they complete; older ones, of checkpoints that
	// never completed, are forgotten.
	marksMax = 64
	// txnRetryMin and txnRetryMax bound the backoff between tries of a
	// transaction request whose coordinator is busy or moving.
	txnRetryMin, txnRetryMax = 10 * time.Millisecond, time.Second
)
