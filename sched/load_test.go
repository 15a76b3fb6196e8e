package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/scenario"
)

// TestLoadScenarios runs the narrated golden scenarios of the policy core in
// testdata/load/*.txt. Commands:
//
//	init workers=N [off=true]        a load review as Pool makes it; the clock at 0
//	load w=I [behind=F] [busy=F] [round=D]
//	                                 worker I's load from now on: the share of its
//	                                 time behind (Backlogged) and in rounds with work,
//	                                 and how long such a round takes (defaults 0,
//	                                 0.5, 1µs)
//	wake-for d=D                     Pool.WakeFor(d) now
//	run for=D|to=D [every=D]         worker 0's rounds every D (default 1ms): each
//	                                 feeds the review when it is due and prints its
//	                                 decision, if any
//	stop-hosting                     worker 0's tasks are done
//	state                            the review's state
//	ladder [spin=B]                  a fresh idle ladder; spin: the pool allows spinning
//	idle polls=N                     N polls in a row without work: the rungs, counted
//	progress                         a poll with progress
//	wait                             the rung for a wait without a poll
//	away [held=B] [done=B] [resting=B] [parked=B] [rung=B] [wake-at=D] [seen=D] now=D
//	                                 the away rule's verdict, and what it read
//	look since=D                     whether a worker that looked D ago looks again
//
// Durations are Go durations; the clock only goes forward. With -rewrite the
// expected output is regenerated; the comments and commands are kept.
func TestLoadScenarios(t *testing.T) {
	scenario.RunGlob(t, "testdata/load/*.txt", *rewrite, func() scenario.Interpreter {
		h := &loadScenario{}
		return h.run
	})
}

// loadScenario is the interpreter's state: a load review with simulated
// workers and a clock, and an idle ladder.
type loadScenario struct {
	p         *loadPolicy
	now       time.Duration
	wakeUntil time.Duration
	obs       []workerObs
	loads     []simLoad
	ladder    idleLadder
	spin      bool
}

// simLoad is a simulated worker's load.
type simLoad struct {
	behind, busy float64
	round        time.Duration
	rounds       float64 // fraction of a busy round carried over
}

func (h *loadScenario) run(t *testing.T, c scenario.Command) []string {
	t.Helper()
	switch c.Name {
	case "init":
		c.Allow(t, "workers off")
		n := c.Int(t, "workers", 2)
		h.p = &loadPolicy{off: c.Bool(t, "off", false) || n == 1, active: n}
		h.now, h.wakeUntil = 0, 0
		h.obs, h.loads = make([]workerObs, n), make([]simLoad, n)
		for i := range h.loads {
			h.loads[i] = simLoad{busy: 0.5, round: time.Microsecond}
		}
		return []string{"ok"}
	case "ladder":
		c.Allow(t, "spin")
		h.ladder, h.spin = 0, c.Bool(t, "spin", true)
		return []string{"ok"}
	case "idle":
		c.Allow(t, "polls")
		return h.idle(c.Int(t, "polls", 1))
	case "progress":
		c.Allow(t, "")
		return []string{h.ladder.next(true, h.spin).String()}
	case "wait":
		c.Allow(t, "")
		return []string{h.ladder.wait(h.spin).String()}
	case "away":
		c.Allow(t, "held done resting parked rung wake-at seen now")
		return h.away(t, c)
	case "look":
		c.Allow(t, "since")
		if lookDue(c.Duration(t, "since", 0)) {
			return []string{"look"}
		}
		return []string{"not yet"}
	}
	if h.p == nil {
		t.Fatalf("%s: %s before init", c.Where, c.Name)
	}
	switch c.Name {
	case "load":
		c.Allow(t, "w behind busy round")
		i := c.Int(t, "w", 0)
		l := &h.loads[i]
		l.behind = c.Float(t, "behind", l.behind)
		l.busy = c.Float(t, "busy", l.busy)
		l.round = c.Duration(t, "round", l.round)
		return []string{"ok"}
	case "wake-for":
		c.Allow(t, "d")
		h.wakeUntil = max(h.wakeUntil, h.now+c.Duration(t, "d", 0))
		return []string{fmt.Sprintf("wake until %v", h.wakeUntil)}
	case "run":
		c.Allow(t, "for to every")
		end := c.Duration(t, "to", h.now+c.Duration(t, "for", 0))
		return h.runTo(t, c, end, c.Duration(t, "every", time.Millisecond))
	case "stop-hosting":
		c.Allow(t, "")
		return []string{describe(h.p.StopHosting(), len(h.obs))}
	case "state":
		c.Allow(t, "")
		return h.state()
	}
	t.Fatalf("%s: unknown command %q", c.Where, c.Name)
	return nil
}

// runTo advances the clock to end in rounds of every, feeding each round to
// the review as worker 0 does, and lists the decisions.
func (h *loadScenario) runTo(t *testing.T, c scenario.Command, end, every time.Duration) []string {
	if end < h.now || every <= 0 {
		t.Fatalf("%s: run to %v from %v every %v", c.Where, end, h.now, every)
	}
	var out []string
	for h.now < end {
		h.advance(min(every, end-h.now))
		if !h.p.due(h.now, h.wakeUntil) {
			continue
		}
		if d := h.p.Review(h.now, h.wakeUntil, h.obs); d != (loadDecision{}) {
			out = append(out, fmt.Sprintf("%v: %s", h.now, describe(d, len(h.obs))))
		}
	}
	if len(out) == 0 {
		out = append(out, "(no decision)")
	}
	return out
}

// advance moves the clock by dt, adding each worker's load to its counters.
func (h *loadScenario) advance(dt time.Duration) {
	h.now += dt
	for i := range h.obs {
		l, o := &h.loads[i], &h.obs[i]
		o.backlog += time.Duration(l.behind * float64(dt))
		busy := time.Duration(l.busy * float64(dt))
		o.busy += busy
		l.rounds += float64(busy) / float64(l.round)
		whole := int64(l.rounds)
		o.busyRounds += whole
		l.rounds -= float64(whole)
	}
}

// describe prints a decision in the order it is carried out.
func describe(d loadDecision, workers int) string {
	var parts []string
	span := func(from int) string {
		if from == workers-1 {
			return fmt.Sprintf("w%d", from)
		}
		return fmt.Sprintf("w%d..w%d", from, workers-1)
	}
	if d.lendFrom > 0 {
		parts = append(parts, "lend "+span(d.lendFrom))
	}
	if d.endFrom > 0 {
		parts = append(parts, "end rest "+span(d.endFrom))
	}
	if d.wake > 0 {
		parts = append(parts, fmt.Sprintf("wake w%d", d.wake))
	}
	if d.unlend {
		parts = append(parts, "unlend")
	}
	if d.rest > 0 {
		parts = append(parts, fmt.Sprintf("rest w%d", d.rest))
	}
	if len(parts) == 0 {
		return "(nothing)"
	}
	return strings.Join(parts, ", ")
}

func (h *loadScenario) state() []string {
	p := h.p
	var lent []string
	for i, l := range p.lent {
		if l {
			lent = append(lent, fmt.Sprintf("w%d", i))
		}
	}
	rested := "never"
	if p.rested {
		rested = p.restedAt.String()
	}
	behind, slow := p.worker0Load()
	return []string{
		fmt.Sprintf("now=%v off=%t active=%d lent=[%s] burst=%t woken=%d",
			h.now, p.off, p.active, strings.Join(lent, " "), p.burst, p.woken),
		fmt.Sprintf("calm-since=%v until=%v cooldown=%v rested-at=%s",
			p.calmSince, p.until, p.cooldown, rested),
		fmt.Sprintf("worker 0: behind=%.2f slow=%t", behind, slow),
	}
}

// idle feeds n polls without work to the ladder and counts the rungs in a
// row.
func (h *loadScenario) idle(n int) []string {
	var out []string
	var last rung
	count := 0
	flush := func() {
		if count > 0 {
			out = append(out, fmt.Sprintf("%v x%d", last, count))
		}
	}
	for range n {
		r := h.ladder.next(false, h.spin)
		if r != last || count == 0 {
			flush()
			last, count = r, 0
		}
		count++
	}
	flush()
	return out
}

// simPeer is a peer's published state, recording what the away rule read.
type simPeer struct {
	isHeld, isDone, isResting, isParked, isRung bool
	wake, seen                                  time.Duration
	read                                        []string
}

func (s *simPeer) note(what string)        { s.read = append(s.read, what) }
func (s *simPeer) held() bool              { s.note("held"); return s.isHeld }
func (s *simPeer) finished() bool          { s.note("done"); return s.isDone }
func (s *simPeer) resting() bool           { s.note("resting"); return s.isResting }
func (s *simPeer) parked() bool            { s.note("parked"); return s.isParked }
func (s *simPeer) rung() bool              { s.note("rung"); return s.isRung }
func (s *simPeer) wakeAt() time.Duration   { s.note("wake-at"); return s.wake }
func (s *simPeer) lastSeen() time.Duration { s.note("seen"); return s.seen }

func (h *loadScenario) away(t *testing.T, c scenario.Command) []string {
	s := &simPeer{
		isHeld: c.Bool(t, "held", false), isDone: c.Bool(t, "done", false),
		isResting: c.Bool(t, "resting", false), isParked: c.Bool(t, "parked", false),
		isRung: c.Bool(t, "rung", false),
		wake:   c.Duration(t, "wake-at", 0), seen: c.Duration(t, "seen", 0),
	}
	v := judgeAway(s, c.Duration(t, "now", 0))
	return []string{fmt.Sprintf("%v (read %s)", v, strings.Join(s.read, " "))}
}

// TestIdleCoreAllocs: the calls a worker makes at every idle poll and every
// look at its peers allocate nothing.
func TestIdleCoreAllocs(t *testing.T) {
	p, err := New(Options{Workers: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workers()[1]
	now := time.Now()
	var l idleLadder
	allocs := testing.AllocsPerRun(1000, func() {
		l.next(false, true)
		l.wait(true)
		w.away(now)
		lookDue(time.Microsecond)
	})
	if allocs != 0 {
		t.Errorf("an idle poll's ladder step and a look at a peer allocate %v times, want 0", allocs)
	}
}
