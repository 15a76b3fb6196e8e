//go:build amd64 || arm64

package ring

// cpuRelax tells the core that this thread is spinning (PAUSE on amd64,
// YIELD on arm64), which saves power and frees the sibling hyperthread.
//
//go:noescape
func cpuRelax()
