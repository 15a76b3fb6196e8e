package operator

import (
	"time"

	"github.com/ringflow/ringflow/internal/prefetch"
)

// aheadChoice runs a keyed operator's prefetch policy (prefetch.Policy):
// it holds whether the batch at hand asks for its state a group ahead
// (cow.Map.PrefetchAhead), and times the batches the policy wants timed.
// The operator calls begin before a batch's lookups and end after them,
// before it pushes anything downstream, so that the time is its own.
type aheadChoice struct {
	policy prefetch.Policy
	on     bool // the batch at hand prefetches
	timed  bool
	start  time.Time
}

func (a *aheadChoice) begin() {
	a.on, a.timed = a.policy.Ahead(), a.policy.Timed()
	if a.timed {
		a.start = time.Now()
	}
}

func (a *aheadChoice) end(records int) {
	var took time.Duration
	if a.timed {
		took = time.Since(a.start)
	}
	a.policy.Done(records, took)
}
