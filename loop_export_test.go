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
