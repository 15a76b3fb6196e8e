package align

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/testseed"
)

var (
	seeds      = testseed.Flag("seed", "ALIGN_SEED")
	trialsFlag = flag.Int("trials", 3000, "trials of TestRandomAgainstNaive")
)

// TestRandomAgainstNaive drives an Aligner through a simulated runtime over
// random channel contents and random interleavings of arrivals, reads,
// peeks, ticks and coordinator aborts, and checks after every step that
//   - its decisions (snapshots, forwards, recordings, completions, aborts)
//     and its blocked and recording channels equal naiveAligner's; and
//   - for every completed exactly-once checkpoint n, on every channel, the
//     records processed before snapshot n plus the records recorded as
//     channel state of n are exactly the records before barrier n (or
//     before END where barrier n never came), neither both nor neither;
//     at-least-once: every record before barrier n was processed before
//     the snapshot and nothing was recorded.
//
// It logs its seed; replay with -seed N (or ALIGN_SEED=N).
func TestRandomAgainstNaive(t *testing.T) {
	seed := seeds.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	trials := *trialsFlag
	if testing.Short() {
		trials /= 4
	}
	var stats simStats
	for trial := 0; trial < trials; trial++ {
		s := newSim(t, rng, fmt.Sprintf("seed %d trial %d", seed, trial))
		s.run()
		stats.add(s)
	}
	t.Logf("%d trials: %+v", trials, stats)
	if trials >= 100 && (stats.Aligned == 0 || stats.Unaligned == 0 || stats.AtLeastOnce == 0 || stats.Aborted == 0 ||
		stats.RecordedRecords == 0) {
		t.Errorf("the random trials missed a path: %+v", stats)
	}
}

// simStats counts what the trials exercised, so a generator that stops
// reaching a path fails the test instead of passing vacuously.
type simStats struct {
	Aligned, Unaligned, AtLeastOnce, Aborted, RecordedRecords, Steps int
}

func (st *simStats) add(s *sim) {
	st.Aligned += s.count.Aligned
	st.Unaligned += s.count.Unaligned
	st.AtLeastOnce += s.count.AtLeastOnce
	st.Aborted += s.count.Aborted
	st.RecordedRecords += s.count.RecordedRecords
	st.Steps += s.count.Steps
}

type frameType uint8

const (
	frameData frameType = iota
	frameBarrier
	frameEnd
)

// frame is one frame of a channel's script; data frames carry the
// channel's record number.
type frame struct {
	typ frameType
	rec int
	b   Barrier
}

// sim is a naive runtime: per channel a FIFO script of frames, how much of
// it has arrived in the ring, the read position and the recording position.
type sim struct {
	t     *testing.T
	rng   *rand.Rand
	where string
	cfg   Config
	a     *Aligner
	naive *naiveAligner
	nowNs int64

	script   [][]frame
	avail    []int    // frames arrived in the ring
	readPos  []int    // frames consumed
	recPos   []int    // next frame to copy while recording
	recData  []int    // records consumed (processed) per channel
	blocked  []bool   // from OpBlock/OpUnblock
	recFor   []uint64 // from OpRecord/OpStopRecord
	snapshot map[uint64][]int
	recorded map[uint64][][]int
	snapKind map[uint64]bool // unaligned
	count    simStats
	log      []string
}

func newSim(t *testing.T, rng *rand.Rand, where string) *sim {
	s := &sim{t: t, rng: rng, where: where, snapshot: map[uint64][]int{},
		recorded: map[uint64][][]int{}, snapKind: map[uint64]bool{}}
	s.cfg = randomConfig(rng)
	a, err := New(s.cfg)
	if err != nil {
		t.Fatalf("%s: New(%+v): %v", where, s.cfg, err)
	}
	s.a, s.naive = a, newNaive(s.cfg)
	n := s.cfg.Channels
	s.script = randomScripts(rng, s.cfg)
	s.avail, s.readPos, s.recPos, s.recData = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	s.blocked, s.recFor = make([]bool, n), make([]uint64, n)
	return s
}

func randomConfig(rng *rand.Rand) Config {
	cfg := Config{Channels: 1 + rng.IntN(5), AlignmentTimeout: AlwaysAligned}
	switch rng.IntN(5) {
	case 0:
		cfg.MaxConcurrent = 1 + rng.IntN(2)
	case 1:
		cfg.AlignmentTimeout = 0
	case 2, 3:
		cfg.AlignmentTimeout = time.Duration(1+rng.IntN(40)) * time.Millisecond
	case 4:
		cfg.Mode = AtLeastOnce
		cfg.MaxConcurrent = 1 + rng.IntN(3)
	}
	return cfg
}

// randomScripts writes each channel's frames: data records, barriers of
// checkpoints 1..K in order (each sometimes missing: its upstream gave it
// up), and usually END.
func randomScripts(rng *rand.Rand, cfg Config) [][]frame {
	k := 1 + rng.IntN(6)
	barriers := make([]Barrier, k)
	for i := range barriers {
		barriers[i] = Barrier{ID: uint64(i + 1), TriggerNs: int64(i*40+rng.IntN(20)) * int64(time.Millisecond)}
		if rng.IntN(10) == 0 {
			barriers[i].Kind = KindSavepoint
		}
	}
	scripts := make([][]frame, cfg.Channels)
	for c := range scripts {
		rec := 0
		for _, b := range barriers {
			for range rng.IntN(6) {
				scripts[c] = append(scripts[c], frame{typ: frameData, rec: rec})
				rec++
			}
			if rng.IntN(12) == 0 {
				continue // upstream aborted b: no barrier on this channel
			}
			if b.Kind == KindAligned && cfg.AlignmentTimeout >= 0 && rng.IntN(5) == 0 {
				b.Kind = KindUnaligned // its upstream switched
			}
			scripts[c] = append(scripts[c], frame{typ: frameBarrier, b: b})
		}
		for range rng.IntN(4) {
			scripts[c] = append(scripts[c], frame{typ: frameData, rec: rec})
			rec++
		}
		if rng.IntN(4) != 0 {
			scripts[c] = append(scripts[c], frame{typ: frameEnd})
		}
	}
	return scripts
}

func (s *sim) run() {
	steps := 50 + s.rng.IntN(250)
	for i := 0; i < steps; i++ {
		s.randomStep()
	}
	// Drain: everything arrives, the runtime reads whatever it may, time
	// runs out for any alignment, and the coordinator aborts what can never
	// finish (a channel's upstream gave it up). Then nothing may be left:
	// every frame read, nothing pending, blocked or recording.
	for progress := true; progress; {
		progress = false
		for c := range s.script {
			s.avail[c] = len(s.script[c])
			s.scan(c)
			for s.read(c) {
				progress = true
			}
		}
		s.nowNs += int64(time.Second)
		s.feed(Input{Type: InputTick, NowNs: s.nowNs})
		if !progress && s.a.Pending() > 0 {
			s.feed(Input{Type: InputAbort, Barrier: Barrier{ID: s.a.pending[0].ID}, NowNs: s.nowNs})
			progress = true
		}
	}
	for c := range s.script {
		if s.readPos[c] != len(s.script[c]) || s.blocked[c] || s.recFor[c] != 0 {
			s.fail("stuck: channel %d read %d of %d frames, blocked %v, recording %d",
				c, s.readPos[c], len(s.script[c]), s.blocked[c], s.recFor[c])
		}
	}
	if s.a.Pending() != 0 {
		s.fail("stuck: %d checkpoints pending", s.a.Pending())
	}
}

func (s *sim) randomStep() {
	s.count.Steps++
	s.nowNs += int64(s.rng.IntN(3)) * int64(time.Millisecond)
	c := s.rng.IntN(s.cfg.Channels)
	switch r := s.rng.IntN(100); {
	case r < 35:
		s.arrive(c)
	case r < 70:
		s.read(c)
	case r < 80:
		s.peek(c)
	case r < 90:
		s.scan(c)
	case r < 98:
		s.feed(Input{Type: InputTick, NowNs: s.nowNs})
	default:
		s.feed(Input{Type: InputAbort, Barrier: Barrier{ID: uint64(1 + s.rng.IntN(6))}, NowNs: s.nowNs})
	}
}

// arrive makes channel c's next frame visible, unless it is a barrier not
// triggered yet.
func (s *sim) arrive(c int) {
	if s.avail[c] == len(s.script[c]) {
		return
	}
	if f := s.script[c][s.avail[c]]; f.typ == frameBarrier && f.b.TriggerNs > s.nowNs {
		return
	}
	s.avail[c]++
}

// read consumes channel c's next frame if the runtime may.
func (s *sim) read(c int) bool {
	if s.a.Blocked(c) || s.readPos[c] == s.avail[c] {
		return false
	}
	f := s.script[c][s.readPos[c]]
	if s.recFor[c] != 0 && s.recPos[c] <= s.readPos[c] {
		s.copyFrame(c, f) // copy before consuming
		s.recPos[c] = s.readPos[c] + 1
	}
	s.readPos[c]++
	switch f.typ {
	case frameData:
		s.recData[c]++
	case frameBarrier:
		s.feed(Input{Type: InputBarrier, Channel: c, Barrier: f.b, NowNs: s.nowNs})
	case frameEnd:
		s.feed(Input{Type: InputEnd, Channel: c, NowNs: s.nowNs})
	}
	return true
}

func (s *sim) copyFrame(c int, f frame) {
	if f.typ == frameData {
		id := s.recFor[c]
		s.recorded[id][c] = append(s.recorded[id][c], f.rec)
	}
}

// peek reports the first one or two barriers ahead of the read position,
// in ring order, as a worker looking into a backpressured task does.
func (s *sim) peek(c int) {
	want := 1 + s.rng.IntN(2)
	for pos := s.readPos[c]; pos < s.avail[c] && want > 0; pos++ {
		if f := s.script[c][pos]; f.typ == frameBarrier {
			s.feed(Input{Type: InputPeekedBarrier, Channel: c, Barrier: f.b, NowNs: s.nowNs})
			want--
		}
	}
}

// scan advances a recording channel's copy over what has arrived,
// reporting each barrier it passes; the aligner says when to stop.
func (s *sim) scan(c int) {
	for pos := max(s.recPos[c], s.readPos[c]); s.recFor[c] != 0 && pos < s.avail[c]; pos++ {
		switch f := s.script[c][pos]; f.typ {
		case frameData:
			s.copyFrame(c, f)
		case frameBarrier:
			id := s.recFor[c]
			s.recPos[c] = pos
			s.feed(Input{Type: InputPeekedBarrier, Channel: c, Barrier: f.b, NowNs: s.nowNs})
			if s.recFor[c] != id {
				return // stopped here (and maybe restarted from the read position)
			}
		case frameEnd:
			s.recPos[c] = pos
			return // END is read, not copied
		}
		s.recPos[c] = pos + 1
	}
}

// feed steps both aligners, executes the actions and checks them.
func (s *sim) feed(in Input) {
	acts, err := s.a.Step(in)
	if err != nil {
		s.fail("Step(%+v): %v", in, err)
	}
	want := s.naive.step(in)
	got := eventsOf(acts)
	s.log = append(s.log, fmt.Sprintf("%v ch=%d id=%d kind=%v now=%v -> %v", in.Type, in.Channel,
		in.Barrier.ID, in.Barrier.Kind, time.Duration(in.NowNs), got))
	if !slices.Equal(got, want) {
		s.fail("step %v: aligner did %v, naive aligner %v", in, got, want)
	}
	s.checkOrder(acts)
	for _, act := range acts {
		s.execute(act)
	}
	for c := range s.script {
		if s.blocked[c] != s.a.Blocked(c) || s.blocked[c] != s.naive.blocked(c) {
			s.fail("channel %d: blocked by actions %v, Blocked() %v, naive %v",
				c, s.blocked[c], s.a.Blocked(c), s.naive.blocked(c))
		}
		if s.recFor[c] != s.a.Recording(c) || s.recFor[c] != s.naive.recordingFor(c) {
			s.fail("channel %d: recording by actions %d, Recording() %d, naive %d",
				c, s.recFor[c], s.a.Recording(c), s.naive.recordingFor(c))
		}
	}
}

// checkOrder checks the order Step promises within one step.
func (s *sim) checkOrder(acts []Action) {
	type key struct {
		op Op
		id uint64
	}
	at := map[key]int{}
	for i, act := range acts {
		if act.Op == OpEndOfInput && i != len(acts)-1 {
			s.fail("end-of-input before other actions: %v", acts)
		}
		at[key{act.Op, act.Barrier.ID}] = i
	}
	for i, act := range acts {
		id := act.Barrier.ID
		snap, hasSnap := at[key{OpSnapshot, id}]
		fwd, hasFwd := at[key{OpForward, id}]
		if hasSnap != hasFwd || hasSnap && snap > fwd {
			s.fail("snapshot and forward of %d out of order: %v", id, acts)
		}
		switch act.Op {
		case OpUnblock, OpRecord, OpComplete:
			if hasFwd && i < fwd {
				s.fail("%v before the forward of %d: %v", act, id, acts)
			}
		case OpStopRecord:
			if c, ok := at[key{OpComplete, id}]; ok && c < i {
				s.fail("%v after the completion: %v", act, acts)
			}
			if ab, ok := at[key{OpAbort, id}]; ok && ab < i {
				s.fail("%v after the abort: %v", act, acts)
			}
		case OpAbort:
			for j := i + 1; j < len(acts); j++ {
				if older := acts[j].Barrier.ID; older != 0 && older < id {
					s.fail("%v of an older checkpoint after %v: %v", acts[j], act, acts)
				}
			}
		}
	}
}

func (s *sim) execute(act Action) {
	id := act.Barrier.ID
	switch act.Op {
	case OpBlock:
		s.blocked[act.Channel] = true
	case OpUnblock:
		s.blocked[act.Channel] = false
	case OpSnapshot:
		s.snapshot[id] = slices.Clone(s.recData)
		s.snapKind[id] = act.Unaligned
		s.recorded[id] = make([][]int, s.cfg.Channels)
	case OpRecord:
		if s.recFor[act.Channel] != 0 {
			s.fail("record channel %d for %d while recording %d", act.Channel, id, s.recFor[act.Channel])
		}
		s.recFor[act.Channel] = id
		s.recPos[act.Channel] = s.readPos[act.Channel]
	case OpStopRecord:
		s.finishCopy(act.Channel, id)
		s.recFor[act.Channel] = 0
	case OpComplete:
		s.checkComplete(id, act)
	case OpAbort:
		s.count.Aborted++
		delete(s.snapshot, id)
		delete(s.recorded, id)
	case OpEndOfInput:
		for c := range s.script {
			if !s.a.chans[c].ended {
				s.fail("end of input with channel %d not ended", c)
			}
		}
	}
}

// finishCopy copies channel c's frames up to barrier id or END, as
// OpStopRecord asks: a peek may have found the barrier before the copy
// reached it. When the barrier was read (or the stop is an abort's), there
// is nothing left to copy.
func (s *sim) finishCopy(c int, id uint64) {
	start := max(s.recPos[c], s.readPos[c])
	for pos, f := range s.script[c][:s.avail[c]] {
		if f.typ == frameEnd || f.typ == frameBarrier && f.b.ID == id {
			if pos < start {
				return // consumed: everything before it was copied on the way
			}
			for _, g := range s.script[c][start:pos] {
				s.copyFrame(c, g)
			}
			s.recPos[c] = pos
			return
		}
	}
}

// checkComplete checks the channel-state invariant for checkpoint id.
func (s *sim) checkComplete(id uint64, act Action) {
	snap, ok := s.snapshot[id]
	if !ok || s.snapKind[id] != act.Unaligned {
		s.fail("complete %d without its snapshot", id)
	}
	for c, script := range s.script {
		before := recordsBefore(script, id)
		rec := s.recorded[id][c]
		switch {
		case s.cfg.Mode == AtLeastOnce:
			if snap[c] < before || len(rec) != 0 {
				s.fail("at-least-once checkpoint %d channel %d: %d records before the barrier, %d processed "+
					"before the snapshot, %d recorded", id, c, before, snap[c], len(rec))
			}
		default:
			want := make([]int, 0)
			for r := snap[c]; r < before; r++ {
				want = append(want, r)
			}
			if snap[c] > before || !slices.Equal(append(make([]int, 0), rec...), want) {
				s.fail("checkpoint %d channel %d: records 0..%d before the barrier; processed before "+
					"the snapshot 0..%d, recorded %v (want %v)", id, c, before-1, snap[c]-1, rec, want)
			}
		}
		s.count.RecordedRecords += len(rec)
	}
	switch {
	case s.cfg.Mode == AtLeastOnce:
		s.count.AtLeastOnce++
	case act.Unaligned:
		s.count.Unaligned++
	default:
		s.count.Aligned++
	}
	delete(s.snapshot, id)
	delete(s.recorded, id)
}

// recordsBefore counts the data records before barrier id in script, or
// all of them if the barrier is not there.
func recordsBefore(script []frame, id uint64) int {
	n := 0
	for _, f := range script {
		if f.typ == frameBarrier && f.b.ID == id {
			break
		}
		if f.typ == frameData {
			n++
		}
	}
	return n
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	tail := s.log[max(0, len(s.log)-30):]
	s.t.Fatalf("%s, config %+v:\n%s\nlast steps:\n  %s", s.where, s.cfg, fmt.Sprintf(format, args...),
		strings.Join(tail, "\n  "))
}
