//go:build !amd64 && !arm64

package sched

func cpuRelax() {}
