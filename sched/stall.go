package sched

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

// A stall is a task step that took longer than the pool's stall bound
// (Options.StallBound). The worker that ran it records where the time went:
// it compares what its thread and the Go runtime had counted shortly
// before the step began (Counters, read every StallBound/stallReads of its rounds)
// with what they count when the step ends, and classifies the difference
// (classifyStall, a pure rule with golden scenarios in testdata/stall). The
// counters cost ~1µs per half bound; the step's end one monotonic clock
// read.

// Counters are what a thread, and the Go runtime for the whole process, had
// counted at one instant.
type Counters struct {
	At time.Time
	// The thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which brings a
	// running thread's count up to date: schedstat's and getrusage's lag
	// it by up to a scheduler tick, 4ms at HZ=250, which read as time off
	// its core), the time it was runnable but waiting for a core
	// (schedstat; without it RunDelay is unknown, -1), and its page
	// faults and context switches (getrusage RUSAGE_THREAD).
	CPU, RunDelay            time.Duration
	MinorFaults, MajorFaults int64
	Voluntary, Involuntary   int64
	// The process's garbage collections: cycles begun, CPU time in
	// stop-the-world pauses (the pause's wall time on every P), CPU time
	// mutators spent assisting the marking, and time goroutines waited on
	// sync.Mutex and RWMutex and threads on the runtime's own locks. The
	// runtime samples that wait: it times one wait in eight and counts it
	// eight times, so a single wait shows as eight times its length or
	// not at all.
	GCCycles  uint64
	GCPause   time.Duration
	GCAssist  time.Duration
	MutexWait time.Duration
}

// counterSamples are the runtime metrics Counters reads, in its order.
var counterSamples = [...]string{
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/pause:cpu-seconds",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/sync/mutex/wait/total:seconds",
}

// counterReader reads Counters on one thread; its buffer is its own, and
// so is the thread's schedstat file, opened at its first read.
type counterReader struct {
	samples   []metrics.Sample
	schedstat *os.File
	opened    bool
	buf       [128]byte
}

func newCounterReader() *counterReader {
	r := &counterReader{samples: make([]metrics.Sample, len(counterSamples))}
	for i, name := range counterSamples {
		r.samples[i].Name = name
	}
	return r
}

// read fills c with the calling thread's counters now.
func (r *counterReader) read(c *Counters, now time.Time) {
	u := affinity.ThreadUsage()
	c.At, c.CPU, c.RunDelay = now, affinity.ThreadCPU(), -1
	if delay, ok := r.readRunDelay(); ok {
		c.RunDelay = delay
	}
	c.MinorFaults, c.MajorFaults, c.Voluntary, c.Involuntary = u.MinorFaults, u.MajorFaults, u.Voluntary, u.Involuntary
	metrics.Read(r.samples)
	c.GCCycles = uint64Of(r.samples[0])
	c.GCPause = secondsOf(r.samples[1])
	c.GCAssist = secondsOf(r.samples[2])
	c.MutexWait = secondsOf(r.samples[3])
}

// readRunDelay reads the calling thread's time waiting for a core, the
// second field of /proc/thread-self/schedstat (in nanoseconds; ~1µs with
// the file kept open; its first, the time on a core, lags a running
// thread: see Counters). The file is opened on the thread the reader is
// used on: a worker's, which it is locked to.
func (r *counterReader) readRunDelay() (time.Duration, bool) {
	if !r.opened {
		r.opened = true
		r.schedstat, _ = os.Open("/proc/thread-self/schedstat")
	}
	if r.schedstat == nil {
		return 0, false
	}
	n, err := r.schedstat.ReadAt(r.buf[:], 0)
	if err != nil && n == 0 {
		return 0, false
	}
	_, rest, ok1 := parseField(r.buf[:n])
	wait, _, ok2 := parseField(rest)
	if !ok1 || !ok2 {
		return 0, false
	}
	return time.Duration(wait), true
}

// parseField parses the decimal number at the start of b (after spaces)
// and returns it with the rest of b.
func parseField(b []byte) (int64, []byte, bool) {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	return v, b[i:], i > 0
}

// close releases the reader's file.
func (r *counterReader) close() {
	if r.schedstat != nil {
		r.schedstat.Close()
	}
}

func uint64Of(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}

func secondsOf(s metrics.Sample) time.Duration {
	if s.Value.Kind() == metrics.KindFloat64 {
		return time.Duration(s.Value.Float64() * float64(time.Second))
	}
	return 0
}

// Stall describes one step that took longer than the stall bound, and what
// the thread and the runtime counted around it.
type Stall struct {
	At       time.Time     // when the step ended
	Duration time.Duration // the step's wall time
	Worker   int
	// Task names the task the step was of, and Note what it did that a
	// reader wants to know (a checkpoint's synchronous part), if it says.
	Task, Note string
	// Cause is the likeliest place the time went: "preempted" (the
	// thread was runnable but off its core), "blocked" (it slept: a
	// system call, a page fault read from disk, a futex), "page faults",
	// "gc pause", "gc assist", "lock", "stolen" (off its core with no
	// switch in the kernel it runs on: its virtual CPU was taken by the
	// host), or "running" (the step's own work on the CPU).
	Cause string
	// Part names the stretch of the step that was timed, when that was
	// not the whole step ("synchronous part of checkpoint 12"); "" for a
	// step.
	Part string
	// The window the counters cover: from shortly before the step began
	// until it ended; and what was counted in it.
	Window time.Duration
	// OffCPU is Window less the thread's CPU time; Waiting the part of it
	// the thread was runnable, waiting for a core (-1: unknown).
	OffCPU, Waiting          time.Duration
	MinorFaults, MajorFaults int64
	Voluntary, Involuntary   int64
	GCCycles                 uint64
	GCPause, GCAssist        time.Duration
	MutexWait                time.Duration
}

func (s Stall) String() string {
	var b strings.Builder
	what := "step"
	if s.Part != "" {
		what = s.Part
	}
	fmt.Fprintf(&b, "%v %s of %s", s.Duration.Round(time.Microsecond), what, s.Task)
	if s.Worker >= 0 {
		fmt.Fprintf(&b, " on worker %d", s.Worker)
	}
	fmt.Fprintf(&b, ": %s", s.Cause)
	if s.Note != "" {
		b.WriteString(" (" + s.Note + ")")
	}
	waiting := "unknown"
	if s.Waiting >= 0 {
		waiting = s.Waiting.Round(time.Microsecond).String()
	}
	fmt.Fprintf(&b, "; in %v: off cpu %v (waiting for a core %s), faults %d minor %d major, switches %d involuntary %d voluntary",
		s.Window.Round(time.Microsecond), s.OffCPU.Round(time.Microsecond), waiting, s.MinorFaults, s.MajorFaults,
		s.Involuntary, s.Voluntary)
	if s.GCCycles > 0 || s.GCPause > 0 || s.GCAssist > 0 {
		fmt.Fprintf(&b, ", gc %d cycles pause %v assist %v", s.GCCycles, s.GCPause.Round(time.Microsecond),
			s.GCAssist.Round(time.Microsecond))
	}
	if s.MutexWait > 0 {
		fmt.Fprintf(&b, ", mutex wait %v", s.MutexWait.Round(time.Microsecond))
	}
	return b.String()
}

// classifyStall describes a step of duration d from the counters read
// before it began and after it ended, on its thread. procs is GOMAXPROCS:
// a stop-the-world pause counts its wall time once per P.
//
// A cause must explain at least half of d. The process's own events come
// first, the largest of them, each charged to the step only up to what
// its thread could have spent in it:
//   - a GC pause: its wall time, which stops every thread;
//   - GC assist: up to the thread's CPU time, where assist runs;
//   - a wait on a lock: only when the process's lock waits cover all of
//     the thread's sleep within the step (a step that waited on a lock
//     slept for it). They are summed over every goroutine and thread and
//     sampled (see Counters), so less than that is other goroutines'
//     waits, or this step's plus a sleep of another kind.
//
// Then the thread's time off its core, named by the larger of its parts:
// waiting, runnable, for a core is preemption; the rest of it a sleep
// (with a major page fault, the fault's read) — unless the thread never
// left its core in its kernel's eyes (no switch of either kind): a thread
// that neither slept nor was preempted, yet was not on its core, lost the
// time beneath its kernel, its virtual CPU taken by the host (a kernel
// that accounts steal time keeps it out of the thread's CPU time; one
// that does not counts it as running). Without the wait's measure
// (no schedstat), an involuntary switch with no voluntary one names
// preemption, a voluntary one a sleep. Otherwise the step was running its
// own work, and what else was counted is listed with it.
func classifyStall(d time.Duration, before, after Counters, procs int) Stall {
	s := Stall{Duration: d, At: after.At, Window: after.At.Sub(before.At),
		MinorFaults: after.MinorFaults - before.MinorFaults, MajorFaults: after.MajorFaults - before.MajorFaults,
		Voluntary: after.Voluntary - before.Voluntary, Involuntary: after.Involuntary - before.Involuntary,
		GCCycles: after.GCCycles - before.GCCycles, GCPause: after.GCPause - before.GCPause,
		GCAssist: after.GCAssist - before.GCAssist, MutexWait: after.MutexWait - before.MutexWait, Waiting: -1}
	cpu := max(after.CPU-before.CPU, 0)
	s.OffCPU = max(s.Window-cpu, 0)
	if before.RunDelay >= 0 && after.RunDelay >= 0 {
		s.Waiting = min(after.RunDelay-before.RunDelay, s.OffCPU)
	}
	sleep := s.OffCPU - max(s.Waiting, 0)
	// NB: the window begins up to a reading's interval before the step;
	// the thread may have slept there, outside the step.
	sleptInStep := max(sleep-(s.Window-d), 0)
	lock := s.MutexWait
	if lock < sleptInStep {
		lock = 0
	}
	explains := func(t time.Duration) bool { return 2*min(t, d) >= d }
	s.Cause = "running"
	var best time.Duration
	for _, c := range []struct {
		cause string
		t     time.Duration
	}{
		{"gc pause", s.GCPause / time.Duration(max(procs, 1))},
		{"gc assist", min(s.GCAssist, cpu)},
		{"lock", min(lock, sleptInStep)},
	} {
		if explains(c.t) && min(c.t, d) > best {
			s.Cause, best = c.cause, min(c.t, d)
		}
	}
	if best > 0 {
		return s
	}
	if !explains(s.OffCPU) {
		return s
	}
	switch {
	case s.Waiting >= 0 && s.Voluntary == 0 && s.Involuntary == 0:
		s.Cause = "stolen"
	case s.Waiting >= 0 && s.Waiting >= sleep:
		s.Cause = "preempted"
	case s.Waiting >= 0:
		s.Cause = "blocked"
		if s.MajorFaults > 0 {
			s.Cause = "page faults"
		}
	case s.MajorFaults > 0:
		s.Cause = "page faults"
	case s.Voluntary > 0:
		s.Cause = "blocked"
	case s.Involuntary > 0:
		s.Cause = "preempted"
	}
	return s
}

// A Probe reads the calling thread's Counters, for a stretch of work
// within a step that is timed on its own (a checkpoint's synchronous
// part). It keeps the thread's schedstat file open and opens it again
// when it finds itself on another thread (a task stolen by another
// worker), so one Probe serves a task wherever it runs. It is not safe
// for concurrent use.
type Probe struct {
	r   *counterReader
	tid int
}

// NewProbe returns a Probe; Close releases it.
func NewProbe() *Probe { return &Probe{r: newCounterReader()} }

// Read fills c with the calling thread's counters now (~2µs).
func (p *Probe) Read(c *Counters) {
	if tid := affinity.Tid(); tid != p.tid {
		p.r.close()
		p.r.schedstat, p.r.opened, p.tid = nil, false, tid
	}
	p.r.read(c, time.Now())
}

// Close releases the probe's file.
func (p *Probe) Close() {
	p.r.close()
	p.r.schedstat, p.r.opened = nil, false
}

// Explain describes a stretch of work of duration d, from a Probe's
// readings on its thread just before it began and when it ended, as a
// Stall (by classifyStall's rule; Worker -1: unknown).
func Explain(d time.Duration, before, after Counters) Stall {
	s := classifyStall(d, before, after, runtime.GOMAXPROCS(0))
	s.Worker = -1
	return s
}

// StallBound returns the pool's stall bound (Options.StallBound with its
// default applied; 0: none is recorded).
func (p *Pool) StallBound() time.Duration {
	if len(p.workers) == 0 {
		return 0
	}
	return p.workers[0].stallBound
}

// RecordStall adds s to the pool's stalls (Pool.Stalls): a stretch of a
// step that a task timed on its own and found over its bound.
func (p *Pool) RecordStall(s Stall) { p.stalls.add(s) }

// DefaultStallBound is Options.StallBound's default: a step bounded to
// about a millisecond (see the task's step bound) that takes five has lost
// most of that time to something other than its work.
const DefaultStallBound = 5 * time.Millisecond

// stallReads is how many times per stall bound a working thread reads its
// counters: a stall's window starts at most half a bound before it. A
// reading costs ~1us alone, several under load (two system calls and a
// procfs read): four per bound cost passthrough 0.7% of its CPU time.
const stallReads = 2

func stallBoundOf(b time.Duration) time.Duration {
	switch {
	case b == 0:
		return DefaultStallBound
	case b < 0:
		return 0
	}
	return b
}

// TaskNamer is implemented by a task that has a name for stall records;
// others are named by their type.
type TaskNamer interface {
	TaskName() string
}

// StallNoter is implemented by a task that can say what its last step did
// that matters in a stall's description (a checkpoint's synchronous part).
type StallNoter interface {
	StallNote() string
}

// recordStall records that task t's step, which ended at end, took d, with
// the counters of the running thread since w.stallBase.
func (w *Worker) recordStall(t Task, d time.Duration, end time.Time) {
	var after Counters
	w.stallCounters.read(&after, end)
	s := classifyStall(d, w.stallBase, after, runtime.GOMAXPROCS(0))
	w.stallBase = after
	s.Worker, s.Task = w.id, fmt.Sprintf("%T", t)
	if n, ok := t.(TaskNamer); ok {
		s.Task = n.TaskName()
	}
	if n, ok := t.(StallNoter); ok {
		s.Note = n.StallNote()
	}
	// NB: recorded, not logged: on a busy host stalls come by the
	// hundred, and Job.Stalls and the metrics sum them up.
	w.pool.stalls.add(s)
}

// stallLog keeps the pool's latest stalls and counts all of them by cause.
type stallLog struct {
	mu      sync.Mutex
	latest  []Stall // a ring of the last keptStalls
	next    int
	byCause map[string]int64
}

// keptStalls is how many of the latest stalls a pool keeps.
const keptStalls = 256

func (l *stallLog) add(s Stall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byCause == nil {
		l.byCause = map[string]int64{}
	}
	l.byCause[s.Cause]++
	if len(l.latest) < keptStalls {
		l.latest = append(l.latest, s)
		return
	}
	l.latest[l.next] = s
	l.next = (l.next + 1) % keptStalls
}

// Stalls returns the pool's latest stalls, oldest first (at most
// keptStalls), and the count of all of them by cause.
func (p *Pool) Stalls() ([]Stall, map[string]int64) {
	l := &p.stalls
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append(append([]Stall(nil), l.latest[l.next:]...), l.latest[:l.next]...)
	return out, maps.Clone(l.byCause)
}

// StallCounts returns the count of the pool's stalls by cause, without
// copying the latest ones.
func (p *Pool) StallCounts() map[string]int64 {
	l := &p.stalls
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byCause)
}
