//go:build !ringflow_commit_at_barrier

package postgres

// commitAtBarrier is false: a prepared transaction is committed only when
// the checkpoint that holds it completes. The tag
// ringflow_commit_at_barrier builds the sink to commit each transaction
// as soon as it is prepared, at the barrier, which loses exactly-once; it
// exists only to show that the end-to-end tests catch that.
const commitAtBarrier = false
