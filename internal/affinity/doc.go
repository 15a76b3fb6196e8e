// Package affinity pins the calling goroutine's OS thread to one CPU, and
// reads and sets what the kernel knows of a thread: its CPU time, its
// context switches, its scheduling policy.
//
// It is Linux only (sched_setaffinity, sched_setattr, getrusage
// RUSAGE_THREAD), and so is ringflow: on any other system this package, and
// every ringflow package above it, fails to build with the one error
// "undefined: ringflow_runs_on_Linux_only" (see unsupported.go).
package affinity
