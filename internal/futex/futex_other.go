//go:build !linux

package futex

// NB: a deliberate build failure: ringflow runs on Linux only (see package
// internal/affinity).
var _ = ringflow_runs_on_Linux_only
