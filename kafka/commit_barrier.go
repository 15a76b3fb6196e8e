//go:build ringflow_commit_at_barrier

package kafka

// commitAtBarrier is true in this build, which exists only to show that
// the end-to-end tests fail when the sink does not wait for the
// checkpoint: see commit_mode.go.
const commitAtBarrier = true
