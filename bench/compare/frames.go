package compare

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Frames sums up a mode's fgprof profile: where the engine's goroutines
// spent their wall-clock time when they were not idle.
type Frames struct {
	// Top are the heaviest frames, heaviest first.
	Top []Frame `json:"top"`
	// Seconds is the wall-clock time of the engine's goroutines that
	// Top's shares are of; Idle the time they waited for work (see
	// idleWaits), left out.
	Seconds float64 `json:"seconds"`
	Idle    float64 `json:"idle_seconds"`
}

// Frame is where the engine's goroutines spent wall-clock time: the
// innermost function outside the Go runtime and the system call layer, and
// the function it was in when sampled (Leaf: a runtime wait such as
// runtime.gopark, a system call, or Function itself when it was running).
type Frame struct {
	Function string  `json:"function"`
	Leaf     string  `json:"leaf"`
	Seconds  float64 `json:"seconds"`
	Share    float64 `json:"share"` // of Frames.Seconds
}

// idleWaits are the places where the engine's goroutines wait for work,
// by design: a parked worker or helper thread, and the coordinator's and
// the pool's loops between jobs. Time there is idleness, not a stall. A
// wait anywhere below them (a commit's fsync, a write queue) is not in
// this list and counts.
var idleWaits = map[string]bool{
	"github.com/ringflow/ringflow/internal/futex.Wait":        true,
	"github.com/ringflow/ringflow.(*coordinator).triggerLoop": true,
	"github.com/ringflow/ringflow.(*coordinator).writeLoop":   true,
	"github.com/ringflow/ringflow/sched.(*offloader).run":     true,
}

// engine says whether fn is the engine's: only goroutines with such a
// frame on their stack count (not the profiler's, nor the harness's own).
func engine(fn string) bool {
	rest, ok := strings.CutPrefix(fn, "github.com/ringflow/ringflow")
	return ok && !strings.HasPrefix(rest, "/bench/") && !strings.HasPrefix(rest, "/cmd/")
}

// jobRun is the frame of the goroutine that waits in Job.Run for the job to
// end: it is left out too (its wait is the run's whole length).
const jobRun = "github.com/ringflow/ringflow.(*Job).Run"

// TopFrames reads the fgprof profile at path and sums up its n heaviest
// frames. The engine's goroutines include the user functions its workers
// call; the caller's goroutine, waiting in Job.Run, is left out.
func TopFrames(path string, n int) (Frames, error) {
	f, err := os.Open(path)
	if err != nil {
		return Frames{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return Frames{}, fmt.Errorf("%s: %w", path, err)
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return Frames{}, fmt.Errorf("%s: no sample type in nanoseconds: not an fgprof profile", path)
	}
	type key struct{ fn, leaf string }
	sum := map[key]int64{}
	var total, idle int64
	for _, s := range p.Sample {
		fns := functions(s)
		if !slices.ContainsFunc(fns, engine) || slices.Contains(fns, jobRun) {
			continue
		}
		v := s.Value[vi]
		k := key{fn: fns[0], leaf: fns[0]}
		for _, fn := range fns {
			if !lowLevel(fn) {
				k.fn = fn
				break
			}
		}
		if idleWaits[k.fn] {
			idle += v
			continue
		}
		total += v
		sum[k] += v
	}
	fr := Frames{Seconds: float64(total) / 1e9, Idle: float64(idle) / 1e9}
	for k, v := range sum {
		fr.Top = append(fr.Top, Frame{Function: k.fn, Leaf: k.leaf, Seconds: float64(v) / 1e9,
			Share: float64(v) / float64(total)})
	}
	slices.SortFunc(fr.Top, func(a, b Frame) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Function, b.Function), cmp.Compare(a.Leaf, b.Leaf))
	})
	fr.Top = fr.Top[:min(n, len(fr.Top))]
	return fr, nil
}

// functions lists the function names of sample s's stack, innermost first
// (inlined calls included).
func functions(s *profile.Sample) []string {
	var fns []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				fns = append(fns, l.Function.Name)
			}
		}
	}
	if len(fns) == 0 {
		fns = append(fns, "?")
	}
	return fns
}

// lowLevel says whether fn belongs to the layers below the code that
// waits: the Go runtime, the standard library's internals, system calls.
func lowLevel(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "syscall.", "golang.org/x/sys/", "sync.", "sync/atomic."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
