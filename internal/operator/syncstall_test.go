package operator

import (
	"runtime"
	"testing"
	"time"

	"github.com/ringflow/ringflow/sched"
)

// napState is an operator whose snapshot sleeps for nap: a synchronous part
// that loses its time asleep.
type napState struct{ nap time.Duration }

func (o *napState) Open(*Context) error { return nil }
func (o *napState) Watermark(int64)     {}
func (o *napState) End()                {}
func (o *napState) Close() error        { return nil }
func (o *napState) SnapshotState(uint64) (StateSnapshot, error) {
	time.Sleep(o.nap)
	return nil, nil
}
func (o *napState) RestoreState(StateReader) error { return nil }

// stallSink keeps the stalls recorded with it.
type stallSink struct{ got []sched.Stall }

func (s *stallSink) RecordStall(st sched.Stall) { s.got = append(s.got, st) }

// TestSyncPartStall: a synchronous part longer than the stall bound is
// recorded on its own, named as the checkpoint's part of its task, with
// where its time went (a sleep here), and its report carries the cause; a
// part within the bound is not recorded.
func TestSyncPartStall(t *testing.T) {
	// NB: the probe reads the thread's counters; the part must run on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	op := &napState{nap: 20 * time.Millisecond}
	ctx := &Context{Operator: "nap", Parallelism: 1}
	stalls := &stallSink{}
	task := &Task{Name: "nap#0", Ctx: ctx, Ops: []Operator{op}, Ctxs: []*Context{ctx},
		Checkpoints: &Checkpoints{Coord: nopCoord{}, Waker: nopWaker{}, StallBound: 5 * time.Millisecond, Stalls: stalls}}
	defer task.Close()

	if err := task.snapshot(1, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := task.Checkpoints.snap
	if r.SyncDuration < op.nap || r.SyncCause != "blocked" {
		t.Fatalf("part took %v, cause %q; want at least %v, blocked", r.SyncDuration, r.SyncCause, op.nap)
	}
	if len(stalls.got) != 1 {
		t.Fatalf("%d stalls recorded, want 1", len(stalls.got))
	}
	s := stalls.got[0]
	t.Logf("%v", s)
	if s.Task != "nap#0" || s.Part != "synchronous part of checkpoint 1" || s.Cause != "blocked" ||
		s.Duration != r.SyncDuration || s.Voluntary == 0 || s.OffCPU < op.nap/2 {
		t.Fatalf("stall %+v; want part of checkpoint 1 of nap#0, blocked, off its core for the nap", s)
	}

	// NB: a bound no part reaches, even preempted on a busy host.
	op.nap, task.Checkpoints.StallBound = 0, time.Hour
	if err := task.snapshot(2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := task.Checkpoints.snap; r.SyncCause != "" || len(stalls.got) != 1 {
		t.Fatalf("a part of %v has cause %q, %d stalls recorded; want none", r.SyncDuration, r.SyncCause, len(stalls.got))
	}
}
