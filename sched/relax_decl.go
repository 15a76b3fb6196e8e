//go:build amd64 || arm64

package sched

// cpuRelax is PAUSE on amd64 and YIELD on arm64: a spinning thread's hint.
//
//go:noescape
func cpuRelax()
