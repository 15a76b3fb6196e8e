package sched

import "time"

// alarm is work for a worker's thread at a set time (Pool.At).
type alarm struct {
	at time.Time
	fn func(now time.Time) bool
}

// At has a worker call fn on its own thread, between steps, at the first
// round of any running worker at or after t, and again at later rounds
// until fn returns true; it replaces an alarm set earlier and not yet
// done. fn must be short and must not wait for long: it runs in place of
// the tasks' steps.
//
// The job triggers its checkpoints this way. From a goroutine of its own, a
// trigger first had a thread woken for it, and on a machine whose cores the
// workers keep, that thread ran in a worker's place: its tasks, the
// sources' barriers among them, waited 26–190µs at every trigger.
//
// If the pool stops first, or is not running, fn is never called.
func (p *Pool) At(t time.Time, fn func(now time.Time) bool) {
	p.alarm.Store(&alarm{at: t, fn: fn})
	for _, w := range p.workers {
		w.Wake() // to sleep no later than t, if parked
	}
}

// ringAlarm, on every running worker at every round, runs a due alarm:
// the worker that claims it first. (Not only worker 0: its tasks may all
// have ended, and it with them, while others still run.)
func (p *Pool) ringAlarm(now time.Time) {
	a := p.alarm.Load()
	if a == nil || now.Before(a.at) || !p.alarm.CompareAndSwap(a, nil) {
		return
	}
	if !a.fn(now) {
		p.alarm.CompareAndSwap(nil, a) // again later, unless At set another meanwhile
	}
}

// alarmAt returns when the pending alarm is due, or the zero time.
func (p *Pool) alarmAt() time.Time {
	if a := p.alarm.Load(); a != nil {
		return a.at
	}
	return time.Time{}
}
