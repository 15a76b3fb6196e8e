//go:build !linux

package affinity

// NB: a deliberate build failure. ringflow pins its worker threads
// (sched_setaffinity), parks them on futexes and keeps its rings in mmap'd
// shared memory: it runs on Linux only. A program that imports it fails to
// build elsewhere with this error, rather than with errors about undefined
// system calls, or with a library that builds but cannot run.
var _ = ringflow_runs_on_Linux_only
