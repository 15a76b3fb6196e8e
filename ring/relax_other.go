//go:build !amd64 && !arm64

package ring

func cpuRelax() {}
