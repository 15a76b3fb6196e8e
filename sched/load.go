package sched

import (
	"fmt"
	"time"
)

// The idle ladder's rungs as the workers use them: variables so that a
// test can make workers park at once.
var (
	spinPolls  = ladderSpinPolls
	yieldPolls = ladderYieldPolls
)

// workerObs is what worker 0 observes of a worker at a load review: its
// cumulative counters since the pool started, which only the worker's
// thread writes.
type workerObs struct {
	backlog    time.Duration // time in rounds where a task was Backlogged
	busy       time.Duration // time in rounds where a task made progress
	busyRounds int64         // and how many such rounds
}

// loadDecision is what a load review asks the threads to do. A worker
// number 0 means none: worker 0 never rests.
type loadDecision struct {
	// lendFrom: workers lendFrom and up end their rests for a burst
	// (Pool.WakeFor) and are lent: they run worker 0's background work.
	lendFrom int
	// endFrom: workers endFrom and up end their rests for good: worker 0's
	// tasks are done, and it stops hosting theirs.
	endFrom int
	// wake: the worker that rested last ends its rest for the load.
	wake int
	// unlend: every lent worker stays awake for the load, no longer lent.
	unlend bool
	// rest: the worker asked to rest; it is no longer lent.
	rest int
}

// loadPolicy is the load review: from worker 0's observations of every
// worker's counters and a clock, it decides how many workers step their
// own tasks and which are lent. It has no goroutines, clocks or atomics:
// worker 0's thread calls it and carries out its decisions.
//
// Workers 0..active-1 step their tasks; the others rest, and worker 0 steps
// theirs. The pool sets off and active (every worker) when it is made.
type loadPolicy struct {
	off    bool // no resting: Options.NoRest, a single worker, or worker 0 has finished
	active int  // workers 0..active-1 step tasks; the others are asked to rest

	lent  []bool        // awake for Pool.WakeFor; one per worker, from the first call
	woke  time.Duration // the WakeFor deadline acted on
	burst bool          // the last workers awake are lent: a short calm will do

	started   bool          // the first review has set the counters' baselines
	checked   time.Duration // the last review
	calmSince time.Duration // since when every working worker has been calm
	until     time.Duration // no worker rests before this
	cooldown  time.Duration // the next wait after a wake
	rested    bool          // a worker has rested for a calm load; since restedAt
	restedAt  time.Duration // (not counting one resting again after a lend)

	backlog []time.Duration // each worker's backlog at the last review
	// worker 0's busy time and rounds at the last review, and what it did
	// in each of the last restBusyChecks reviews
	busy       time.Duration
	busyRounds int64
	recent     [restBusyChecks]restWindow
	nth        int
	woken      int // wakes of a resting worker for the load
}

// restWindow is what worker 0 did between two reviews: the share of the
// time it was behind, and its rounds with work and their time.
type restWindow struct {
	backlog    float64
	busy       time.Duration
	busyRounds int64
}

// due reports whether Review has anything to do at now: a WakeFor deadline
// not yet acted on, or a review every restCheck. It is cheap enough for
// every round of worker 0.
func (p *loadPolicy) due(now, wakeUntil time.Duration) bool {
	return !p.off && (wakeUntil != p.woke || !p.started || now-p.checked >= restCheck)
}

// Review takes worker 0's observations at now: obs holds every worker's
// counters, wakeUntil the latest Pool.WakeFor deadline (0: none yet). It
// first acts on a new deadline (lend), then, every restCheck, reviews the
// load (rest, wake or unlend). The returned decision's parts are carried
// out in the order of its fields.
func (p *loadPolicy) Review(now, wakeUntil time.Duration, obs []workerObs) loadDecision {
	var d loadDecision
	if p.off {
		return d
	}
	if p.lent == nil {
		p.lent = make([]bool, len(obs))
	}
	if wakeUntil != p.woke {
		p.lend(&d, wakeUntil)
	}
	if !p.started || now-p.checked >= restCheck {
		p.review(&d, now, obs)
	}
	return d
}

// lend acts on a new WakeFor deadline: every resting worker is woken and
// lent, and no worker rests before the deadline.
func (p *loadPolicy) lend(d *loadDecision, until time.Duration) {
	p.woke = until
	if n := len(p.lent); p.active < n {
		d.lendFrom = p.active
		for i := p.active; i < n; i++ {
			p.lent[i] = true
		}
		p.active = n
		p.burst = true
	}
	p.until = max(p.until, until)
	p.calmSince = until
}

// review asks one more worker to rest when every working one has been calm
// for restCalm (restBurstCalm after a lend), and wakes the one that rested
// last when worker 0 falls behind or its rounds grow slow.
func (p *loadPolicy) review(d *loadDecision, now time.Duration, obs []workerObs) {
	if !p.started {
		p.started = true
		p.backlog = make([]time.Duration, len(obs))
		for i, o := range obs {
			p.backlog[i] = o.backlog
		}
		p.busy, p.busyRounds = obs[0].busy, obs[0].busyRounds
		p.checked, p.calmSince, p.cooldown = now, now, restCooldown
		return
	}
	calm := p.observe(now, obs)
	behind, slow := p.worker0Load()
	n := len(p.lent)
	switch {
	case p.active < n && (behind > restBusyShare || slow):
		if p.rested && now-p.restedAt < restShortRest {
			p.cooldown = min(2*p.cooldown, restCooldownMax)
		} else {
			p.cooldown = restCooldown
		}
		p.until, p.calmSince, p.recent = now+p.cooldown, now, [restBusyChecks]restWindow{}
		d.wake = p.active
		p.active++
		p.woken++
	case !calm:
		p.calmSince = now
		if p.burst && now-p.until > restCalm {
			// The load came to stay: the lent workers work.
			clear(p.lent)
			p.burst = false
			d.unlend = true
		}
	case p.active > 1 && now-p.calmSince >= p.calmNeeded() && now >= p.until:
		p.active--
		p.calmSince = now
		g := p.active
		if p.lent[g] {
			// NB: a lent worker resting again goes on with the rest the
			// load allowed before Pool.WakeFor; it does not start one, or
			// with a lend every second every wake for load would look like
			// a failed rest and double the cooldown.
			p.lent[g] = false
			p.burst = p.active > 1 && p.lent[p.active-1]
		} else {
			p.rested, p.restedAt = true, now
		}
		d.rest = g
	}
}

// observe takes the counters of a review: it reports whether every working
// worker was calm since the last one, and records worker 0's window.
func (p *loadPolicy) observe(now time.Duration, obs []workerObs) (calm bool) {
	elapsed := float64(now - p.checked)
	p.checked = now
	calm = true
	for i, o := range obs {
		share := float64(o.backlog-p.backlog[i]) / elapsed
		p.backlog[i] = o.backlog
		if i < p.active && share >= restCalmShare {
			calm = false
		}
		if i == 0 {
			p.recent[p.nth%restBusyChecks] = restWindow{share, o.busy - p.busy, o.busyRounds - p.busyRounds}
			p.busy, p.busyRounds = o.busy, o.busyRounds
			p.nth++
		}
	}
	return calm
}

// worker0Load is worker 0 over the last restBusyChecks reviews: the share
// of its time it was behind, and whether its rounds with work were slow.
func (p *loadPolicy) worker0Load() (behind float64, slow bool) {
	var busy time.Duration
	var rounds int64
	for _, r := range p.recent {
		behind += r.backlog / restBusyChecks
		busy, rounds = busy+r.busy, rounds+r.busyRounds
	}
	return behind, rounds > 0 && busy/time.Duration(rounds) > restRoundMax
}

// calmNeeded is how long every working worker must have been calm before
// one more rests.
func (p *loadPolicy) calmNeeded() time.Duration {
	if p.burst {
		return restBurstCalm
	}
	return restCalm
}

// StopHosting turns the review off for good: worker 0's own tasks are
// done, and it is about to exit, so every resting worker steps its own
// tasks again.
func (p *loadPolicy) StopHosting() loadDecision {
	var d loadDecision
	if !p.off && p.active < len(p.lent) {
		d.endFrom = p.active
		p.active = len(p.lent)
	}
	p.off = true
	return d
}

// rung is what an idle worker does before its next poll.
type rung uint8

const (
	rungPoll  rung = iota // poll again at once: the last poll made progress
	rungSpin              // a PAUSE
	rungYield             // a sched_yield
	rungPark              // sleep on the doorbell
)

func (r rung) String() string {
	switch r {
	case rungPoll:
		return "poll"
	case rungSpin:
		return "spin"
	case rungYield:
		return "yield"
	case rungPark:
		return "park"
	}
	return fmt.Sprintf("rung(%d)", uint8(r))
}

// idleLadder counts a worker's polls in a row that found no work, and
// says which rung of the ladder the worker is on. It is a plain integer,
// so a worker's loop keeps it in a register.
type idleLadder int

// next records a poll and returns what the worker does before the next
// one: poll again at once after progress; otherwise spin (while spin, the
// pool's permission, allows), then yield, then park. After a park that
// finds no work the worker parks again at once: it has climbed the ladder
// already.
func (l *idleLadder) next(progress, spin bool) rung {
	if progress {
		*l = 0
		return rungPoll
	}
	if *l++; *l >= idleLadder(spinPolls+yieldPolls) {
		return rungPark
	}
	return l.wait(spin)
}

// wait returns the rung for a wait without a poll of the worker's own (a
// peer holds its tasks' lock, or the worker waits for that lock): spin or
// yield, never park.
func (l idleLadder) wait(spin bool) rung {
	if l < idleLadder(spinPolls) && spin {
		return rungSpin
	}
	return rungYield
}

// peerState is what a worker's thread publishes for its peers. The away
// rule reads it one item at a time, in the rule's order, so that looking
// at a peer whose tasks' lock is held, as under load, costs a single load.
// Times are on the clock the rule's now is on.
type peerState interface {
	held() bool              // its tasks' lock is held (by it or a peer)
	finished() bool          // its tasks are all done
	resting() bool           // it rests: worker 0 steps its tasks
	parked() bool            // it sleeps on its doorbell
	rung() bool              // its doorbell rang since it last looked
	wakeAt() time.Duration   // when its sleep ends at the latest
	lastSeen() time.Duration // when it last went round its loop
}

// awayVerdict is the away rule's verdict on a peer, with its reason.
type awayVerdict uint8

const (
	hereHeld    awayVerdict = iota // its lock is held: its tasks are being stepped
	hereDone                       // no task left to step
	hereResting                    // worker 0 steps its tasks
	hereAsleep                     // asleep before its deadline, nothing rang
	hereSeen                       // round its loop within stealAfter
	awayRung                       // asleep after its doorbell rang
	awayLate                       // asleep past its deadline
	awayIdle                       // not round its loop for stealAfter
)

var verdictNames = [...]string{
	hereHeld:    "here: held",
	hereDone:    "here: done",
	hereResting: "here: resting",
	hereAsleep:  "here: asleep",
	hereSeen:    "here: seen",
	awayRung:    "away: rung",
	awayLate:    "away: late",
	awayIdle:    "away: idle",
}

func (v awayVerdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("awayVerdict(%d)", uint8(v))
}

// away reports whether the verdict is that a peer may take over.
func (v awayVerdict) away() bool { return v >= awayRung }

// judgeAway is the away rule: a peer's thread is away from its tasks while
// they may have work — its lock free, tasks left, not resting — when it
// sleeps after its doorbell rang or past its deadline, or has not been
// round its loop for stealAfter.
func judgeAway(p peerState, now time.Duration) awayVerdict {
	switch {
	case p.held():
		return hereHeld
	case p.finished():
		return hereDone
	case p.resting():
		return hereResting
	case p.parked():
		switch {
		case p.rung():
			return awayRung
		case now >= p.wakeAt():
			return awayLate
		}
		return hereAsleep
	case now-p.lastSeen() >= stealAfter:
		return awayIdle
	}
	return hereSeen
}

// lookDue reports whether a worker that last looked at its peers since
// ago looks again.
func lookDue(since time.Duration) bool { return since >= stealCheck }
