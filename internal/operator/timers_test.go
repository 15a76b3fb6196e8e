package operator

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("seed", "")

// TestWindowTimers checks the bucketed window timer queue against a plain
// list: timers pop earliest time first, those of one time in the order
// they were added, and only up to the time asked for. Times come from a
// few values (as windows' ends do) and from a wide range, with pops
// interleaved with adds, and adds to the time being popped.
func TestWindowTimers(t *testing.T) {
	rnd := rand.New(rand.NewPCG(seeds.Seed(t), 5))
	type timer struct {
		ts  int64
		seq int // order of addition
	}
	var q windowTimers[int]
	var pending []timer // the model
	seq := 0
	pops := 0
	for step := range 200_000 {
		if rnd.IntN(3) > 0 {
			ts := int64(rnd.IntN(8)) * 1000 // a few window ends
			if rnd.IntN(4) == 0 {
				ts = rnd.Int64N(8000) // anything
			}
			q.add(ts, seq)
			pending = append(pending, timer{ts, seq})
			seq++
			continue
		}
		upTo := rnd.Int64N(9000)
		ts, p, ok := q.pop(upTo)
		i := -1
		for j, tm := range pending {
			if tm.ts <= upTo && (i < 0 || tm.ts < pending[i].ts || tm.ts == pending[i].ts && tm.seq < pending[i].seq) {
				i = j
			}
		}
		if ok != (i >= 0) {
			t.Fatalf("step %d: pop(%d) ok=%v, model has %d eligible", step, upTo, ok, i+1)
		}
		if !ok {
			continue
		}
		if want := pending[i]; ts != want.ts || p != want.seq {
			t.Fatalf("step %d: pop(%d) = (%d, %d), want (%d, %d)", step, upTo, ts, p, want.ts, want.seq)
		}
		pending = slices.Delete(pending, i, i+1)
		pops++
		if len(pending) > 2000 { // drain, so the model stays small
			for len(pending) > 0 {
				ts, p, ok := q.pop(1 << 62)
				i := 0
				for j, tm := range pending {
					if tm.ts < pending[i].ts || tm.ts == pending[i].ts && tm.seq < pending[i].seq {
						i = j
					}
				}
				if !ok || ts != pending[i].ts || p != pending[i].seq {
					t.Fatalf("step %d drain: pop = (%d, %d, %v), want (%d, %d)", step, ts, p, ok, pending[i].ts, pending[i].seq)
				}
				pending = slices.Delete(pending, i, i+1)
			}
		}
	}
	if pops < 10_000 {
		t.Fatalf("only %d pops", pops)
	}
	if len(q.buckets) != len(q.times.heap) {
		t.Fatalf("%d buckets for %d times", len(q.buckets), len(q.times.heap))
	}
}
