package ring

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. These are the shared (not FUTEX_PRIVATE) forms, so a
// sleeper in one process is woken by a store in another.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while the low 32 bits of word equal val, for at most d.
// Spurious returns are fine: callers re-check.
func futexWait(word *atomic.Uint64, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	// NB: the futex word is the low half of the 64-bit position; on a
	// little-endian machine that is the word's own address. A sleeper never
	// sees the position move by a multiple of 2^32, which would take more
	// than the capacity.
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitOp,
		uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on word.
func futexWake(word *atomic.Uint64) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakeOp,
		uintptr(1<<31-1), 0, 0, 0)
}
