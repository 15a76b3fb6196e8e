// Package futex wraps the Linux futex system call: sleep while a 32-bit word
// holds a value, and wake the sleepers on a word. It uses the shared (not
// FUTEX_PRIVATE) operations, so the word may live in memory shared between
// processes.
package futex

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	opWait = 0 // FUTEX_WAIT
	opWake = 1 // FUTEX_WAKE
)

// Wait sleeps while *addr == val, for at most d (d <= 0: no limit). It may
// return early and spuriously; callers re-check their condition.
func Wait(addr *uint32, val uint32, d time.Duration) {
	var tsp unsafe.Pointer
	var ts unix.Timespec
	if d > 0 {
		ts = unix.NsecToTimespec(d.Nanoseconds())
		tsp = unsafe.Pointer(&ts)
	}
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opWait, uintptr(val), uintptr(tsp), 0, 0)
}

// Wake wakes every sleeper on addr.
func Wake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opWake, uintptr(1<<31-1), 0, 0, 0)
}
