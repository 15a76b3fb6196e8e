package operator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLoopRandom drives a loop head with seeded random interleavings of
// tails feeding back, tails snapshotting (markers), the head
// snapshotting, pumping (with and without room), completing and aborting
// checkpoints, and checks it against a naive oracle: every record fed back
// is fed into the loop once, in its tail's order, and the log of each
// checkpoint that completes holds exactly the records a tail fed before
// its marker of that checkpoint and the head took after its snapshot —
// invariant 7, never both, never neither — and that each released part
// counts the timers the body reported for its checkpoint before the
// markers were back, and the probe forgets them after.
func TestLoopRandom(t *testing.T) {
	base := seeds.Seed(t)
	logged, timers := 0, 0
	for i := range 200 {
		seed := base + uint64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l, tm := loopRandom(t, seed)
			logged, timers = logged+l, timers+tm
		})
	}
	if logged == 0 || timers == 0 {
		t.Fatalf("completed checkpoints logged %d records, counted %d timers: the runs did not exercise both", logged, timers)
	}
}

// loopOracle is what the oracle knows of one checkpoint, as steps of
// the run (0: not yet).
type loopOracle struct {
	snapAt  int
	markAt  []int // by tail
	aborted bool
}

// loopRandom runs one interleaving and returns the records the completed
// checkpoints logged and the timers they counted.
func loopRandom(t *testing.T, seed uint64) (int, int) {
	rnd := rand.New(rand.NewPCG(seed, 0x100b))
	tails := 1 + rnd.IntN(3)
	var s loopScenario
	s.newHead(tails)
	released, timers, reported := map[uint64]int{}, map[uint64]int{}, map[uint64]int{}
	s.head.Bind(nil, func(r *SnapshotReport) { released[r.ID], timers[r.ID] = r.LoopRecords, r.LoopTimers })
	cps := map[uint64]*loopOracle{}
	var nextID uint64 = 1
	snapped := uint64(0) // the head's last snapshot
	fedBy := make([][]int, tails)
	var fedAt, takenAt, tailOf []int // by record
	var got []int
	s.fed = nil
	for step := 1; step <= 300; step++ {
		switch op := rnd.IntN(11); {
		case op < 4: // a tail feeds a batch back
			k := rnd.IntN(tails)
			var recs []int
			for range 1 + rnd.IntN(3) {
				r := len(fedAt)
				recs = append(recs, r)
				fedAt, takenAt, tailOf = append(fedAt, step), append(takenAt, 0), append(tailOf, k)
				fedBy[k] = append(fedBy[k], r)
			}
			s.loop.Tail(k).Push(recs, nil)
		case op < 5: // a tail snapshots the oldest checkpoint it has not
			k := rnd.IntN(tails)
			for id := uint64(1); id < nextID; id++ {
				if c := cps[id]; c.markAt[k] == 0 {
					c.markAt[k] = step
					if _, err := s.loop.Tail(k).SnapshotState(id); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
		case op < 6 && nextID-snapped <= 2: // a new checkpoint: the head snapshots it
			id := nextID
			nextID++
			cps[id] = &loopOracle{snapAt: step, markAt: make([]int, tails)}
			snapped = id
			if _, err := s.head.SnapshotState(id); err != nil {
				t.Fatal(err)
			}
			r := &SnapshotReport{ID: id}
			if s.head.Hold(r) {
				break
			}
			released[id], timers[id] = 0, r.LoopTimers // went at once: nothing was in transit
		case op < 9: // the head pumps
			room := rnd.IntN(4)
			s.fed = nil
			s.head.Pump(func() bool { room--; return room >= 0 })
			for _, b := range s.fed {
				for _, r := range b {
					got = append(got, r)
					takenAt[r] = step
				}
			}
		case op == 10: // a body subtask reports timers for a checkpoint, before some tail's marker of it
			if len(cps) == 0 {
				break
			}
			ids := slices.Sorted(maps.Keys(cps))
			id := ids[rnd.IntN(len(ids))]
			if !slices.Contains(cps[id].markAt, 0) {
				break
			}
			n := 1 + rnd.IntN(3)
			s.probe.Timers(id, n, time.Time{})
			if !cps[id].aborted {
				reported[id] += n
			}
		default: // the oldest checkpoint still held is aborted
			for id := uint64(1); id < nextID; id++ {
				if _, ok := released[id]; !ok && !cps[id].aborted {
					cps[id].aborted = true
					s.head.NotifyAborted(id)
					break
				}
			}
		}
	}
	for id, n := range released {
		c := cps[id]
		if c.aborted {
			t.Fatalf("checkpoint %d: released after it was aborted", id)
		}
		for k := range tails {
			if c.markAt[k] == 0 {
				t.Fatalf("checkpoint %d: released before tail %d's marker", id, k)
			}
		}
		want := 0
		for r := range fedAt {
			before := fedAt[r] < c.markAt[tailOf[r]]
			if before && takenAt[r] >= c.snapAt {
				want++
			}
		}
		if n != want {
			t.Fatalf("checkpoint %d: %d records logged, want %d (fed before the marker, taken after the snapshot)", id, n, want)
		}
		if timers[id] != reported[id] {
			t.Fatalf("checkpoint %d: %d timers pending, %d reported before its markers were back", id, timers[id], reported[id])
		}
	}
	// The probe keeps nothing for a checkpoint the head completed or
	// before.
	s.probe.mu.Lock()
	for id := range s.probe.mu.pending {
		if _, ok := released[id]; ok || id <= s.probe.mu.done[0] {
			t.Fatalf("the probe still keeps checkpoint %d (released: %v; the head is done up to %d)", id, ok, s.probe.mu.done[0])
		}
	}
	s.probe.mu.Unlock()
	// Every record the head took, once, each tail's in order.
	for k := range tails {
		var order []int
		for _, r := range got {
			if slices.Contains(fedBy[k], r) {
				order = append(order, r)
			}
		}
		if !slices.Equal(order, fedBy[k][:len(order)]) {
			t.Fatalf("tail %d: fed %v, the head took %v", k, fedBy[k], order)
		}
	}
	seen := map[int]bool{}
	for _, r := range got {
		if seen[r] {
			t.Fatalf("record %d taken twice", r)
		}
		seen[r] = true
	}
	logged, counted := 0, 0
	for id, n := range released {
		logged, counted = logged+n, counted+timers[id]
	}
	return logged, counted
}
