package operator

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	golden "github.com/ringflow/ringflow/internal/scenario"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/loop/*.txt")

// TestLoopScenarios runs the narrated golden scenarios of a loop's head in
// testdata/loop/*.txt: one head subtask and its back edge from T tail
// subtasks, driven as its task and its tails would. Commands:
//
//	init tails=T
//	feed tail=K recs=1,2,3  (tail K feeds a batch back)
//	marker tail=K id=N      (tail K snapshots checkpoint N)
//	snapshot id=N           (the head snapshots N: its log opens)
//	complete id=N           (the head's task completes its part of N)
//	abort id=N
//	timers id=N count=K [due=MS]  (a body subtask held K timers pending at
//	                        its snapshot of N, the earliest processing-time
//	                        one due at Unix ms MS)
//	pump [room=N]           (the task pumps; room: batches the output takes)
//	state
//	probe                   (the timers the loop's probe keeps)
//	write id=N              (the head's snapshot of N writes its log)
//	restore                 (a new head restores the logs written)
//
// With -rewrite the expected output is regenerated.
func TestLoopScenarios(t *testing.T) {
	golden.RunGlob(t, "testdata/loop/*.txt", *rewrite, func() golden.Interpreter {
		var s loopScenario
		return s.run
	})
}

type loopScenario struct {
	probe *LoopProbe
	loop  *Loop[int]
	head  *LoopHead[int]
	fed   [][]int
	out   []string // released reports, since the last command
	snaps map[uint64]StateSnapshot
	blobs [][]byte
}

type loopSink struct{ s *loopScenario }

func (k loopSink) Push(recs []int, _ []int64) { k.s.fed = append(k.s.fed, slices.Clone(recs)) }

func (s *loopScenario) newHead(tails int) {
	codec, err := CodecFor[int]()
	if err != nil {
		panic(err)
	}
	if s.probe == nil {
		// NB: one probe serves every attempt of a loop, so a restored
		// head keeps it.
		s.probe = NewLoopProbe(1)
	}
	s.loop = NewLoop[int](codec, 1, tails, s.probe)
	s.head = s.loop.Head(&Context{Operator: "loop", Parallelism: 1}, loopSink{s})
	s.head.Bind(nil, func(r *SnapshotReport) { s.out = append(s.out, "released "+verdict(r)) })
}

// verdict says what a head's report of a checkpoint says of its loop, as
// a final checkpoint would judge it.
func verdict(r *SnapshotReport) string {
	due := ""
	if !r.LoopTimersDue.IsZero() {
		due = fmt.Sprintf(" (due at %d)", r.LoopTimersDue.UnixMilli())
	}
	return fmt.Sprintf("checkpoint %d: %d records logged, %d timers pending%s: %v",
		r.ID, r.LoopRecords, r.LoopTimers, due, JudgeLoops(r.LoopRecords, r.LoopTimers))
}

func (s *loopScenario) run(t *testing.T, c golden.Command) []string {
	s.out = nil
	id := uint64(c.Int(t, "id", 0))
	switch c.Name {
	case "init":
		s.probe = nil
		s.newHead(c.Int(t, "tails", 1))
		s.snaps = map[uint64]StateSnapshot{}
		return []string{"ok"}
	case "feed":
		s.loop.Tail(c.Int(t, "tail", 0)).Push(parseInts(t, c.String("recs", "")), nil)
		return []string{"ok"}
	case "marker":
		if _, err := s.loop.Tail(c.Int(t, "tail", 0)).SnapshotState(id); err != nil {
			t.Fatal(err)
		}
		return []string{"ok"}
	case "snapshot":
		snap, err := s.head.SnapshotState(id)
		if err != nil {
			t.Fatal(err)
		}
		s.snaps[id] = snap
		return []string{"ok"}
	case "complete":
		r := &SnapshotReport{ID: id}
		if s.head.Hold(r) {
			return []string{"held until the markers are back"}
		}
		return []string{"goes now: " + verdict(r)}
	case "timers":
		var due time.Time
		if ms := c.Int(t, "due", 0); ms != 0 {
			due = time.UnixMilli(int64(ms))
		}
		s.probe.Timers(id, c.Int(t, "count", 0), due)
		return []string{"ok"}
	case "abort":
		s.head.NotifyAborted(id)
		return []string{"ok"}
	case "pump":
		room := c.Int(t, "room", 1<<30)
		s.fed = nil
		n := s.head.Pump(func() bool { room--; return room >= 0 })
		out := []string{fmt.Sprintf("fed %d", n)}
		for _, b := range s.fed {
			out = append(out, fmt.Sprintf("batch %v", b))
		}
		return append(out, s.out...)
	case "state":
		return s.state()
	case "probe":
		return s.probeState()
	case "write":
		w := &blobWriter{}
		if err := s.snaps[id].WriteTo(w); err != nil {
			t.Fatal(err)
		}
		s.blobs = append(s.blobs, w.blob)
		return []string{fmt.Sprintf("%d bytes", len(w.blob))}
	case "restore":
		s.newHead(s.loop.tails)
		if err := s.head.RestoreState(blobReader(s.blobs)); err != nil {
			return []string{"error: " + err.Error()}
		}
		return []string{"ok"}
	}
	t.Fatalf("%s: unknown command %q", c.Where, c.Name)
	return nil
}

func (s *loopScenario) state() []string {
	h := s.head
	out := []string{fmt.Sprintf("snapshotted=%d backlog=%d pending=%v backlogged=%v replay=%d",
		h.snapID, h.backlog, h.Pending(), h.Backlogged(), len(h.replay))}
	h.take()
	for k, q := range h.local {
		var es []string
		for _, e := range q {
			if e.marker != 0 {
				es = append(es, fmt.Sprintf("marker %d", e.marker))
			} else {
				es = append(es, fmt.Sprint(e.recs))
			}
		}
		out = append(out, fmt.Sprintf("tail %d: blocked=%v [%s]", k, h.blocked(k), strings.Join(es, ", ")))
	}
	for _, l := range h.logs {
		var open []string
		for k, o := range l.open {
			if o {
				open = append(open, strconv.Itoa(k))
			}
		}
		out = append(out, fmt.Sprintf("log %d: %d records, open for tails [%s], report held=%v",
			l.id, l.n, strings.Join(open, " "), l.report != nil))
	}
	return out
}

// probeState lists the timers the probe still keeps, by checkpoint.
func (s *loopScenario) probeState() []string {
	p := s.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []string{fmt.Sprintf("heads done up to %v", p.mu.done)}
	for _, id := range slices.Sorted(maps.Keys(p.mu.pending)) {
		out = append(out, fmt.Sprintf("checkpoint %d: %d timers", id, p.mu.pending[id].n))
	}
	return out
}

func parseInts(t *testing.T, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("recs: %v", err)
		}
		out = append(out, n)
	}
	return out
}

// blobWriter keeps the subtask state a head writes.
type blobWriter struct{ blob []byte }

func (w *blobWriter) PutKeyGroup(string, int, []byte) error         { return fmt.Errorf("unexpected") }
func (w *blobWriter) ReuseKeyGroup(string, int, uint64) error       { return fmt.Errorf("unexpected") }
func (w *blobWriter) AppendKeyGroupDelta(string, int, []byte) error { return fmt.Errorf("unexpected") }
func (w *blobWriter) PutSubtask(state string, blob []byte) error {
	if state != loopLogState {
		return fmt.Errorf("state %q", state)
	}
	w.blob = slices.Clone(blob)
	return nil
}
func (w *blobWriter) BeforeCommit(fn func() error) { fn() }
func (w *blobWriter) Pause() error                 { return nil }

// blobReader restores the blobs written as the logs of old subtasks.
type blobReader [][]byte

func (r blobReader) KeyGroup(string, int) ([]byte, [][]byte, bool) { return nil, nil, false }
func (r blobReader) Subtask(state string) [][]byte {
	if state != loopLogState {
		return nil
	}
	return r
}
func (r blobReader) Checkpoint() uint64 { return 1 }
