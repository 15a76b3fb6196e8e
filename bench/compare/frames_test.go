package compare

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// writeProfile writes an fgprof-shaped profile of the given stacks
// (innermost first) and their wall-clock nanoseconds.
func writeProfile(t *testing.T, stacks map[string]int64) string {
	t.Helper()
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}}}
	fns := map[string]*profile.Function{}
	for stack, ns := range stacks {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			fn := fns[name]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{ns / 1e7, ns}})
	}
	path := filepath.Join(t.TempDir(), "p.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTopFrames: time is charged to the innermost function above the
// runtime, with the runtime function it waited in; goroutines without an
// engine frame are left out.
func TestTopFrames(t *testing.T) {
	const s = 1e9
	path := writeProfile(t, map[string]int64{
		"runtime.futex;runtime.notesleep;github.com/ringflow/ringflow/sched.(*Worker).park;github.com/ringflow/ringflow/sched.(*Worker).run": 3 * s,
		"syscall.Syscall;os.(*File).Sync;github.com/ringflow/ringflow/snapshot.(*Pending).CommitDurable":                                     1 * s,
		"github.com/ringflow/ringflow/internal/operator.(*Task).Step;github.com/ringflow/ringflow/sched.(*Worker).run":                       4 * s,
		"runtime.gopark;net/http.(*Server).Serve": 10 * s, // not the engine's
		"runtime.gopark;github.com/ringflow/ringflow/sched.(*Pool).Run;github.com/ringflow/ringflow.(*Job).Run;main.main": 10 * s,
		"github.com/ringflow/ringflow/bench/compare.Compare;main.main":                                                    5 * s,
		"runtime.gopark;runtime.selectgo;github.com/ringflow/ringflow.(*coordinator).writeLoop":                           6 * s, // idle
	})
	fr, err := TopFrames(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Seconds != 8 || fr.Idle != 6 {
		t.Errorf("%v s counted, %v s idle; want 8 and 6", fr.Seconds, fr.Idle)
	}
	got := fr.Top
	want := []Frame{
		{Function: "github.com/ringflow/ringflow/internal/operator.(*Task).Step", Leaf: "github.com/ringflow/ringflow/internal/operator.(*Task).Step", Seconds: 4, Share: 0.5},
		{Function: "github.com/ringflow/ringflow/sched.(*Worker).park", Leaf: "runtime.futex", Seconds: 3, Share: 0.375},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if g.Function != want[i].Function || g.Leaf != want[i].Leaf || math.Abs(g.Seconds-want[i].Seconds) > 1e-9 ||
			math.Abs(g.Share-want[i].Share) > 1e-9 {
			t.Errorf("frame %d: %+v, want %+v", i, g, want[i])
		}
	}
	all, err := TopFrames(path, 10)
	if err != nil || len(all.Top) != 3 || all.Top[2].Function != "os.(*File).Sync" || all.Top[2].Leaf != "syscall.Syscall" {
		t.Errorf("all frames %+v, %v; want 3, the last os.(*File).Sync in syscall.Syscall", all, err)
	}
}

// TestTopFramesBadFile: a file that is not a profile is an error naming it.
func TestTopFramesBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stalls.txt")
	if err := os.WriteFile(path, []byte("not a profile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := TopFrames(path, 5); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want an error naming %s", err, path)
	}
}
