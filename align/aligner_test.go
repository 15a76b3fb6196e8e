package align

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/invariants"
)

// dump renders all of a's state, to compare before and after a step.
func dump(a *Aligner) string {
	var b strings.Builder
	fmt.Fprintf(&b, "now=%d maxID=%d ended=%d endOutput=%v free=%d chans=%v\n",
		a.nowNs, a.maxID, a.ended, a.endOutput, len(a.free), a.chans)
	for _, cp := range a.pending {
		fmt.Fprintf(&b, "cp %+v read=%v recording=%v aligned=%d unaligned=%v stats=%+v\n",
			cp.Barrier, cp.read.ToArray(), cp.recording.ToArray(), cp.aligned, cp.unaligned, cp.stats)
	}
	return b.String()
}

func mustNew(t testing.TB, cfg Config) *Aligner {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustStep(t testing.TB, a *Aligner, in Input) []Action {
	t.Helper()
	acts, err := a.Step(in)
	if err != nil {
		t.Fatalf("Step(%+v): %v", in, err)
	}
	return acts
}

func TestConfig(t *testing.T) {
	valid := []Config{
		{Channels: 1},
		{Channels: 3, AlignmentTimeout: 10 * time.Millisecond},
		{Channels: 3, AlignmentTimeout: AlwaysAligned, MaxConcurrent: 5},
		{Channels: MaxChannels, Mode: AtLeastOnce, AlignmentTimeout: -time.Second, MaxConcurrent: 2},
	}
	for _, cfg := range valid {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
	invalid := map[string]Config{
		"Channels":      {Channels: 0},
		"Channels = -1": {Channels: -1},
		"1..1048576":    {Channels: MaxChannels + 1},
		"Mode":          {Channels: 1, Mode: 2},
		"MaxConcurrent": {Channels: 1, AlignmentTimeout: AlwaysAligned, MaxConcurrent: -1},
		"exactly-once":  {Channels: 1, Mode: AtLeastOnce},
		"= 1 (got 2)":   {Channels: 1, AlignmentTimeout: time.Second, MaxConcurrent: 2},
	}
	for want, cfg := range invalid {
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming %q", cfg, err, want)
		}
	}
}

// TestBadInputChangesNothing feeds inputs that cannot happen on a correct
// ring and checks each is an ErrBadInput that leaves the state as it was.
func TestBadInputChangesNothing(t *testing.T) {
	a := mustNew(t, Config{Channels: 3, AlignmentTimeout: 50 * time.Millisecond})
	b1 := Barrier{ID: 1}
	mustStep(t, a, Input{Type: InputBarrier, Channel: 0, Barrier: b1, NowNs: 10})
	mustStep(t, a, Input{Type: InputEnd, Channel: 2, NowNs: 10})
	bad := []Input{
		{Type: InputBarrier, Channel: 0, Barrier: Barrier{ID: 2}, NowNs: 10},          // blocked
		{Type: InputEnd, Channel: 0, NowNs: 10},                                       // blocked
		{Type: InputPeekedBarrier, Channel: 0, Barrier: b1, NowNs: 10},                // after read
		{Type: InputBarrier, Channel: 2, Barrier: b1, NowNs: 10},                      // after END
		{Type: InputEnd, Channel: 2, NowNs: 10},                                       // END twice
		{Type: InputBarrier, Channel: 3, Barrier: b1, NowNs: 10},                      // range
		{Type: InputBarrier, Channel: 1, Barrier: Barrier{}, NowNs: 10},               // id 0
		{Type: InputBarrier, Channel: 1, Barrier: Barrier{ID: 1, Kind: 3}, NowNs: 10}, // kind
		{Type: InputAbort, NowNs: 10},                                                 // id 0
		{Type: 0, NowNs: 10},
		{Type: 99, NowNs: 10},
	}
	before := dump(a)
	for _, in := range bad {
		acts, err := a.Step(in)
		if !errors.Is(err, ErrBadInput) || acts != nil {
			t.Errorf("Step(%+v) = %v, %v; want no actions and ErrBadInput", in, acts, err)
		}
		if after := dump(a); after != before {
			t.Fatalf("Step(%+v) failed but changed the state:\nbefore %s\nafter  %s", in, before, after)
		}
	}
	// A clock stepping back is no time passing, not an error.
	if _, err := a.Step(Input{Type: InputTick, NowNs: 9}); err != nil || a.nowNs != 10 {
		t.Fatalf("tick back in time: %v, now %d", err, a.nowNs)
	}
	// The machine still works: channel 1 completes the alignment.
	acts := mustStep(t, a, Input{Type: InputBarrier, Channel: 1, Barrier: b1, NowNs: 11})
	if len(acts) == 0 || acts[len(acts)-1].Op != OpComplete || acts[len(acts)-1].Unaligned {
		t.Fatalf("after bad input, the last barrier gave %v, want an aligned completion", acts)
	}
}

func TestDeadline(t *testing.T) {
	a := mustNew(t, Config{Channels: 2, AlignmentTimeout: 7 * time.Millisecond})
	if _, ok := a.Deadline(); ok {
		t.Fatal("deadline with nothing pending")
	}
	ms := int64(time.Millisecond)
	mustStep(t, a, Input{Type: InputBarrier, Channel: 1, Barrier: Barrier{ID: 4, TriggerNs: 3 * ms}, NowNs: 5 * ms})
	if d, ok := a.Deadline(); !ok || d != 10*ms {
		t.Fatalf("Deadline() = %d, %v; want trigger 3ms + timeout 7ms", d, ok)
	}
	if acts := mustStep(t, a, Input{Type: InputTick, NowNs: 10*ms - 1}); len(acts) != 0 {
		t.Fatalf("tick before the deadline: %v", acts)
	}
	acts := mustStep(t, a, Input{Type: InputTick, NowNs: 10 * ms})
	if len(acts) == 0 || acts[0].Op != OpSnapshot || !acts[0].Unaligned {
		t.Fatalf("tick at the deadline: %v, want an unaligned snapshot first", acts)
	}
	if _, ok := a.Deadline(); ok {
		t.Fatal("deadline after the switch")
	}
	// A trigger near the end of time saturates instead of wrapping.
	b := mustNew(t, Config{Channels: 2, AlignmentTimeout: time.Hour})
	mustStep(t, b, Input{Type: InputBarrier, Channel: 0, Barrier: Barrier{ID: 1, TriggerNs: math.MaxInt64 - 5}})
	if d, ok := b.Deadline(); !ok || d != math.MaxInt64 {
		t.Fatalf("Deadline() = %d, %v; want MaxInt64", d, ok)
	}
	// Savepoints and AlwaysAligned never time out.
	c := mustNew(t, Config{Channels: 2, AlignmentTimeout: time.Millisecond})
	mustStep(t, c, Input{Type: InputBarrier, Channel: 0, Barrier: Barrier{ID: 1, Kind: KindSavepoint}})
	if _, ok := c.Deadline(); ok {
		t.Fatal("a savepoint has a deadline")
	}
}

// TestStats checks the facts the stall report is built from.
func TestStats(t *testing.T) {
	a := mustNew(t, Config{Channels: 3, AlignmentTimeout: 20 * time.Millisecond})
	ms := int64(time.Millisecond)
	b := Barrier{ID: 2, TriggerNs: 1 * ms}
	mustStep(t, a, Input{Type: InputPeekedBarrier, Channel: 2, Barrier: b, NowNs: 3 * ms})
	mustStep(t, a, Input{Type: InputBarrier, Channel: 0, Barrier: b, NowNs: 4 * ms})
	mustStep(t, a, Input{Type: InputTick, NowNs: 21 * ms}) // switch: record 1 and 2
	mustStep(t, a, Input{Type: InputPeekedBarrier, Channel: 2, Barrier: b, NowNs: 22 * ms})
	acts := mustStep(t, a, Input{Type: InputBarrier, Channel: 1, Barrier: b, NowNs: 30 * ms})
	last := acts[len(acts)-1]
	want := Stats{ID: 2, TriggerNs: 1 * ms, FirstBarrierNs: 3 * ms, AlignStartNs: 4 * ms, SnapshotNs: 21 * ms,
		CompleteNs: 30 * ms, Unaligned: true, WaitedOn: 1, RecordedChannels: 2}
	if last.Op != OpComplete || last.Stats != want {
		t.Fatalf("got %v %+v\nwant complete %+v", last.Op, last.Stats, want)
	}
	if last.Stats.StartDelay() != 2*time.Millisecond || last.Stats.Alignment() != 17*time.Millisecond {
		t.Fatalf("start delay %v, alignment %v", last.Stats.StartDelay(), last.Stats.Alignment())
	}
	// Channel 0 read its barrier before the switch; 1 and 2 were recorded
	// until theirs came, 2's found ahead (peeked) before it was read.
	seen, done, ok := a.ChannelTimes(2)
	if wantSeen, wantDone := []int64{4 * ms, 30 * ms, 3 * ms}, []int64{4 * ms, 30 * ms, 22 * ms}; !ok ||
		!slices.Equal(seen, wantSeen) || !slices.Equal(done, wantDone) {
		t.Fatalf("ChannelTimes(2) = %v, %v, %v; want %v, %v", seen, done, ok, wantSeen, wantDone)
	}
	if _, _, ok := a.ChannelTimes(3); ok {
		t.Fatal("ChannelTimes of a checkpoint never started")
	}
}

// TestNoAllocationPerBarrier: the runtime's questions never allocate, and a
// checkpoint's barriers allocate far less than once each (roaring allocates
// a container per checkpoint, growing logarithmically).
func TestNoAllocationPerBarrier(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariant checks (-race, -tags invariants) allocate")
	}
	const channels = 256
	for _, cfg := range []Config{
		{Channels: channels, AlignmentTimeout: AlwaysAligned},
		{Channels: channels, AlignmentTimeout: 0},
		{Channels: channels, Mode: AtLeastOnce, AlignmentTimeout: AlwaysAligned},
	} {
		a := mustNew(t, cfg)
		id := uint64(1)
		cycle(t, a, id) // warm up the action slice
		allocs := testing.AllocsPerRun(20, func() {
			id++
			cycle(t, a, id)
		})
		if allocs > channels/16 {
			t.Errorf("%+v: %.0f allocations for %d barriers", cfg, allocs, channels)
		}
		if n := testing.AllocsPerRun(100, func() { _ = a.Blocked(7) || a.Recording(9) != 0 }); n != 0 {
			t.Errorf("Blocked/Recording allocate %.0f times", n)
		}
	}
}

// FuzzStep feeds arbitrary input sequences: Step never panics (with
// invariant checks compiled in, every step also cross-checks the state), and
// a failed step changes nothing.
func FuzzStep(f *testing.F) {
	f.Add([]byte{3, 0, 1, 0, 0, 1, 1, 0, 2, 1, 3, 0})
	f.Add([]byte{2, 1, 5, 1, 2, 1, 2, 1, 9, 2, 0, 1, 4, 4, 4, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		cfgs := []Config{
			{AlignmentTimeout: AlwaysAligned},
			{AlignmentTimeout: 0},
			{AlignmentTimeout: 3},
			{AlignmentTimeout: AlwaysAligned, MaxConcurrent: 2},
			{Mode: AtLeastOnce, AlignmentTimeout: AlwaysAligned, MaxConcurrent: 3},
		}
		cfg := cfgs[int(data[0])%len(cfgs)]
		cfg.Channels = 1 + int(data[1])%4
		a := mustNew(t, cfg)
		now := int64(0)
		for i := 2; i+2 < len(data); i += 3 {
			op, x, y := data[i], data[i+1], data[i+2]
			now += int64(op >> 4)
			in := Input{Type: InputType(op % 6), Channel: int(x % 5), NowNs: now,
				Barrier: Barrier{ID: uint64(y % 8), TriggerNs: int64(y >> 3), Kind: Kind(x >> 6)}}
			before := dump(a)
			if _, err := a.Step(in); err != nil && dump(a) != before {
				t.Fatalf("Step(%+v) failed (%v) but changed the state", in, err)
			}
		}
	})
}
