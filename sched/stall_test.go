package sched

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
	"github.com/ringflow/ringflow/internal/scenario"
)

// TestStallScenarios runs the narrated golden scenarios of the stall
// classification in testdata/stall/*.txt. One command:
//
//	stall d=D window=D cpu=D [wait=D|wait=unknown] [minor=N] [major=N]
//	      [vol=N] [invol=N] [gc=N] [pause=D] [assist=D] [mutex=D] [procs=N]
//	      a step of wall time d; the counters moved as given between the
//	      reading before it (window before its end) and the one after:
//	      the thread's CPU time and time waiting for a core (unknown: no
//	      schedstat), page faults, voluntary and involuntary switches, the
//	      process's GC cycles, GC pause CPU time, assist CPU time and mutex
//	      wait (procs: GOMAXPROCS, default 2)
//
// It prints the cause and the time off the CPU. With -rewrite the
// expected output is regenerated.
func TestStallScenarios(t *testing.T) {
	scenario.RunGlob(t, "testdata/stall/*.txt", *rewrite, func() scenario.Interpreter {
		return func(t *testing.T, c scenario.Command) []string {
			if c.Name != "stall" {
				t.Fatalf("%s: unknown command %q", c.Where, c.Name)
			}
			c.Allow(t, "d window cpu wait minor major vol invol gc pause assist mutex procs")
			base := time.Unix(1000, 0)
			before := Counters{At: base, CPU: time.Second, RunDelay: time.Second, MinorFaults: 10, MajorFaults: 1, Voluntary: 5, Involuntary: 7,
				GCCycles: 3, GCPause: time.Millisecond, GCAssist: time.Millisecond, MutexWait: time.Millisecond}
			after := before
			after.At = base.Add(c.Duration(t, "window", 0))
			after.CPU += c.Duration(t, "cpu", 0)
			if c.String("wait", "") == "unknown" {
				before.RunDelay, after.RunDelay = -1, -1
			} else {
				after.RunDelay += c.Duration(t, "wait", 0)
			}
			after.MinorFaults += int64(c.Int(t, "minor", 0))
			after.MajorFaults += int64(c.Int(t, "major", 0))
			after.Voluntary += int64(c.Int(t, "vol", 0))
			after.Involuntary += int64(c.Int(t, "invol", 0))
			after.GCCycles += uint64(c.Int(t, "gc", 0))
			after.GCPause += c.Duration(t, "pause", 0)
			after.GCAssist += c.Duration(t, "assist", 0)
			after.MutexWait += c.Duration(t, "mutex", 0)
			s := classifyStall(c.Duration(t, "d", 0), before, after, c.Int(t, "procs", 2))
			waiting := "unknown"
			if s.Waiting >= 0 {
				waiting = s.Waiting.String()
			}
			return []string{s.Cause + " off-cpu=" + s.OffCPU.String() + " waiting=" + waiting}
		}
	})
}

// sleeper is a task whose steps each sleep for one of naps, then is done;
// it is named for stall records and says what its step did.
type sleeper struct {
	naps []time.Duration
}

func (s *sleeper) Step(time.Time) (Status, error) {
	if len(s.naps) == 0 {
		return Done, nil
	}
	time.Sleep(s.naps[0])
	s.naps = s.naps[1:]
	return Progress, nil
}
func (s *sleeper) PrepareToPark() bool { return false }
func (s *sleeper) Unpark()             {}
func (s *sleeper) Deadline() time.Time { return time.Time{} }
func (s *sleeper) TaskName() string    { return "sleeper#0" }
func (s *sleeper) StallNote() string   { return "napping" }

// TestStallsRecorded: steps over the bound are recorded, named by their
// task and noted as it says, as sleeps (the thread blocked); steps under
// it are not; a negative bound records none.
func TestStallsRecorded(t *testing.T) {
	naps := []time.Duration{20 * time.Millisecond, 0, 15 * time.Millisecond, time.Microsecond}
	p, _ := New(Options{Workers: 1, StallBound: 5 * time.Millisecond})
	p.Workers()[0].Add(&sleeper{naps: naps})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	stalls, counts := p.Stalls()
	if len(stalls) != 2 || counts["blocked"] != 2 {
		t.Fatalf("stalls %v, counts %v; want the 2 long naps, blocked", stalls, counts)
	}
	for i, s := range stalls {
		if s.Task != "sleeper#0" || s.Note != "napping" || s.Cause != "blocked" || s.Duration < naps[2*i] ||
			s.OffCPU < naps[2*i]/2 || s.Voluntary == 0 {
			t.Errorf("stall %d: %+v; want sleeper#0 napping, blocked at least %v", i, s, naps[2*i])
		}
	}

	off, _ := New(Options{Workers: 1, StallBound: -1})
	off.Workers()[0].Add(&sleeper{naps: naps})
	if err := off.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if stalls, _ := off.Stalls(); len(stalls) != 0 {
		t.Fatalf("a pool with a negative bound recorded %v", stalls)
	}
}

// BenchmarkCounterRead measures one reading of a thread's counters, which
// a working thread takes every StallBound/stallReads.
func BenchmarkCounterRead(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := newCounterReader()
	defer r.close()
	var c Counters
	for b.Loop() {
		r.read(&c, time.Now())
	}
}

// TestProbeFollowsThread: a Probe read on one thread and then on another
// reads the second thread's schedstat, not the first's: it opens the file
// again on the thread it finds itself on.
func TestProbeFollowsThread(t *testing.T) {
	p := NewProbe()
	defer p.Close()
	var first, second Counters
	var tids [2]int
	read, release := make(chan struct{}), make(chan struct{})
	go func() {
		// NB: locked until the other reading is done, so that it is
		// taken on another thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p.Read(&first)
		tids[0] = affinity.Tid()
		close(read)
		<-release
	}()
	<-read
	opened := p.r.schedstat
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p.Read(&second)
		tids[1] = affinity.Tid()
	}()
	<-done
	close(release)
	if tids[0] == tids[1] || p.tid != tids[1] || p.r.schedstat == opened || second.RunDelay < 0 {
		t.Fatalf("threads %v, probe on %d, file reopened %v, run delay %v; want the second thread's own file read",
			tids, p.tid, p.r.schedstat != opened, second.RunDelay)
	}
}

// TestStallTimedFromPoll: a poll given its round's time, read long before
// (a peer's tasks polled after the thread's own), times its first step
// from the poll, not from that time.
func TestStallTimedFromPoll(t *testing.T) {
	p, _ := New(Options{Workers: 1, NoPin: true, StallBound: 5 * time.Millisecond})
	w := p.Workers()[0]
	w.live = []Task{&sleeper{naps: []time.Duration{0}}}
	w.stallCounters.read(&w.stallBase, time.Now())
	if _, _, err := w.poll(time.Now().Add(-time.Second), w); err != nil {
		t.Fatal(err)
	}
	if stalls, _ := p.Stalls(); len(stalls) != 0 {
		t.Fatalf("a step that did not sleep recorded as %v", stalls)
	}
}

// TestCountersCPUCurrent: a thread that runs throughout a window of 3ms
// reads about 3ms more CPU time: the count is brought up to date at the
// reading. (Linux's schedstat and getrusage move a running thread's count
// at scheduler ticks, 4ms apart at HZ=250, so over most such windows they
// read 0 or a whole tick, and the difference as time off its core.) Some
// windows on a busy host are preempted; most must not read off.
func TestCountersCPUCurrent(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := newCounterReader()
	defer r.close()
	const window, tries = 3 * time.Millisecond, 20
	near := 0
	var got []time.Duration
	for range tries {
		var before, after Counters
		r.read(&before, time.Now())
		for time.Since(before.At) < window {
		}
		r.read(&after, time.Now())
		w, cpu := after.At.Sub(before.At), after.CPU-before.CPU
		got = append(got, cpu)
		if cpu > w*9/10 && cpu <= w*11/10 {
			near++
		}
	}
	if near < tries/4 {
		t.Fatalf("CPU over %d windows of %v spinning: %v; want at least %d within 10%% of the window", tries, window, got, tries/4)
	}
}
