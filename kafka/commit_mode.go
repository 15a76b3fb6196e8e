//go:build !ringflow_commit_at_barrier

package kafka

// commitAtBarrier is false: a sink's transaction is committed only when
// the checkpoint that holds it completes. The tag
// ringflow_commit_at_barrier builds the sink to commit each transaction
// as soon as it is flushed at the barrier, which loses exactly-once; it
// exists only to show that the end-to-end tests catch that.
const commitAtBarrier = false
