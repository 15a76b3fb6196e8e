package ringflow

import (
	"flag"

	"github.com/ringflow/ringflow/internal/operator"
)

// noLoopReplay drops restored loop logs instead of replaying them: the
// iteration tests must then fail, which shows that they depend on the log.
var noLoopReplay = flag.Bool("loop.noreplay", false, "drop restored loop logs (the iteration tests should then fail)")

// LoopReplayOff reports whether -loop.noreplay is set, and applies it.
func LoopReplayOff() bool {
	operator.NoLoopReplay = *noLoopReplay
	return *noLoopReplay
}

// noLoopTimerWait makes loops end without waiting for the timers of their
// bodies: the timer loop tests must then fail.
var noLoopTimerWait = flag.Bool("loop.notimerwait", false,
	"end loops without waiting for their bodies' timers (the timer loop tests should then fail)")

// LoopTimerWaitOff reports whether -loop.notimerwait is set, and applies it.
func LoopTimerWaitOff() bool {
	operator.NoLoopTimerWait = *noLoopTimerWait
	return *noLoopTimerWait
}
