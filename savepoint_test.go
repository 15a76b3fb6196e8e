package ringflow_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/snapshot"
)

// The savepoint tests run a keyed job (a rolling count per key into a
// transactional file sink), stop it with a savepoint, and start it again
// from the savepoint: at other parallelisms, from a copy, changed, and
// from damaged savepoints.

// spJob is the savepoint tests' job.
type spJob struct {
	evs         []event
	par         int     // of the count, its formatting and the sink
	rate        float64 // of the source, records per second; 0: unpaced
	out         string  // the file sink's directory
	state       string  // the state directory
	savepoints  string  // CheckpointConfig.SavepointDir
	restoreFrom string
	unaligned   bool
	withMax     bool // a keyed "max" branch into a plain sink
	withTotal   bool // a keyed "total" branch into a plain sink
	allow       bool // AllowNonRestoredState
	cancelStop  bool // StopOnCancel
	events      *ringflow.EventListener
}

func (c spJob) build() *ringflow.Job {
	ck := ringflow.CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: c.state, SavepointDir: c.savepoints,
		Unaligned: c.unaligned}
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2, BatchSize: 50, Checkpoint: ck,
		RestoreFrom: c.restoreFrom, AllowNonRestoredState: c.allow, StopOnCancel: c.cancelStop,
		Logger: newLogRecorder().logger(), Events: c.events})
	evs := c.evs
	s := ringflow.Source(job, "src", ringflow.Generate(func(i uint64) event { return evs[i] },
		ringflow.GenOptions{Count: uint64(len(evs)), Rate: c.rate}))
	key := func(e event) uint64 { return e.Key }
	counts := ringflow.MapWithState(ringflow.KeyBy(s, key), "count", func(n *uint64, e event) [2]uint64 {
		*n++
		return [2]uint64{e.Key, *n}
	}, ringflow.Parallelism(c.par))
	lines := ringflow.Map(counts, "fmt", func(kc [2]uint64) string { return fmt.Sprintf("%d:%d", kc[0], kc[1]) },
		ringflow.Parallelism(c.par))
	ringflow.TxnSink(lines, "out", ringflow.FileSink(c.out), ringflow.Parallelism(c.par))
	larger := func(a, b event) event {
		if b.Value > a.Value {
			return b
		}
		return a
	}
	if c.withMax {
		ringflow.Sink(ringflow.Reduce(ringflow.KeyBy(s, key), "max", larger), "max-sink", func(_ context.Context, _ event) error { return nil })
	}
	if c.withTotal {
		sum := func(a, b event) event { a.Value += b.Value; return a }
		ringflow.Sink(ringflow.Reduce(ringflow.KeyBy(s, key), "total", sum), "total-sink", func(_ context.Context, _ event) error { return nil })
	}
	return job
}

// newSPJob returns the first job of a savepoint test, in dir: paced, so
// that it can be stopped part-way.
func newSPJob(t *testing.T, dir string) spJob {
	return spJob{evs: makeEvents(seeds.Seed(t), 60_000, 300, 0), par: 2, rate: 20_000,
		out: filepath.Join(dir, "out"), state: filepath.Join(dir, "state"), savepoints: filepath.Join(dir, "savepoints")}
}

// resumed returns c as a job restoring from (a savepoint or state
// directory) in a directory of its own, unpaced, writing into a copy of
// c's output.
func (c spJob) resumed(t *testing.T, from string, par int) spJob {
	t.Helper()
	dir := t.TempDir()
	r := c
	r.par, r.rate, r.restoreFrom = par, 0, from
	r.out, r.state, r.savepoints = filepath.Join(dir, "out"), filepath.Join(dir, "state"), filepath.Join(dir, "savepoints")
	if err := os.CopyFS(r.out, os.DirFS(c.out)); err != nil {
		t.Fatal(err)
	}
	return r
}

// started runs job on a goroutine of its own, returning what Run returns
// on the channel, once it has completed n checkpoints.
func started(t *testing.T, ctx context.Context, job *ringflow.Job, n int) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	for completed(job) < n {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before %d checkpoints", err, n)
		case <-time.After(time.Millisecond):
		}
	}
	return done
}

// stopped checks a job that stopped: its last checkpoint completed and
// stopped it, and its sink left nothing pending.
func stopped(t *testing.T, job *ringflow.Job, c spJob, savepoint bool) ringflow.CheckpointStats {
	t.Helper()
	cps := job.Checkpoints()
	last := cps[len(cps)-1]
	if last.Status != "completed" || !last.Stop || last.Final || last.Savepoint != savepoint || last.Unaligned() {
		t.Fatalf("last checkpoint %d: %s, stop %v, final %v, savepoint %v, unaligned %v; want a completed aligned stop",
			last.ID, last.Status, last.Stop, last.Final, last.Savepoint, last.Unaligned())
	}
	pending, err := os.ReadDir(filepath.Join(c.out, ".pending"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > 0 {
		t.Fatalf("the stopped job left %d pending transactions (%s, ...)", len(pending), pending[0].Name())
	}
	if lines := readParts(t, c.out); len(lines) == 0 || len(lines) >= len(c.evs) {
		t.Fatalf("the stopped job committed %d lines of %d: want it stopped part-way", len(lines), len(c.evs))
	}
	return last
}

// stopWithSavepoint runs c's job until two checkpoints completed, then
// stops it with a savepoint, and returns the savepoint's directory.
func stopWithSavepoint(t *testing.T, c spJob) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := c.build()
	done := started(t, ctx, job, 2)
	path, err := job.StopWithSavepoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after StopWithSavepoint: %v", err)
	}
	last := stopped(t, job, c, true)
	if want := filepath.Join(c.savepoints, "savepoint-"); !strings.HasPrefix(path, want) ||
		!strings.HasSuffix(path, "-"+strconv.FormatUint(last.ID, 10)) {
		t.Fatalf("savepoint %s: want it under %s, named after checkpoint %d", path, want, last.ID)
	}
	if _, err := job.Savepoint(ctx); !errors.Is(err, ringflow.ErrNotRunning) {
		t.Fatalf("Savepoint after Run: %v, want ErrNotRunning", err)
	}
	return path
}

// finishedFrom runs c (restoring from) to its end and checks the output is
// that of an uninterrupted run.
func finishedFrom(t *testing.T, c spJob, from string) *ringflow.Job {
	t.Helper()
	job := c.build()
	run(t, job)
	if r := job.LastRestore(); r.From != from || r.Checkpoint == 0 {
		t.Fatalf("restore report %+v: want a restore from %s", r, from)
	}
	diffRows(t, readParts(t, c.out), rollingCounts(c.evs))
	return job
}

// TestSavepointRescale stops a job at parallelism 2 with a savepoint and
// restores it at 1 and at 3, with checkpoints aligned and unaligned: the
// committed output is that of an uninterrupted run.
func TestSavepointRescale(t *testing.T) {
	for _, unaligned := range []bool{false, true} {
		t.Run(fmt.Sprintf("unaligned=%v", unaligned), func(t *testing.T) {
			c := newSPJob(t, t.TempDir())
			c.unaligned = unaligned
			sp := stopWithSavepoint(t, c)
			for _, par := range []int{1, 3} {
				t.Run(strconv.Itoa(par), func(t *testing.T) {
					job := finishedFrom(t, c.resumed(t, sp, par), sp)
					if cps := job.Checkpoints(); cps[0].ID <= job.RestoredFrom() {
						t.Fatalf("first checkpoint %d after restoring checkpoint %d: ids must go on", cps[0].ID, job.RestoredFrom())
					}
				})
			}
		})
	}
}

// TestSavepointCopied restores a savepoint copied elsewhere, the original
// and the first job's state directory deleted: it holds all it needs.
func TestSavepointCopied(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	sp := stopWithSavepoint(t, c)
	copied := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.CopyFS(copied, os.DirFS(sp)); err != nil {
		t.Fatal(err)
	}
	r := c.resumed(t, copied, 2)
	for _, dir := range []string{sp, c.state} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	finishedFrom(t, r, copied)
}

// TestSavepointUpgrade restores a savepoint into a changed job: one keyed
// operator removed (which needs AllowNonRestoredState) and one added
// (which starts empty).
func TestSavepointUpgrade(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	c.withMax = true
	sp := stopWithSavepoint(t, c)
	upgraded := c.resumed(t, sp, 2)
	upgraded.withMax, upgraded.withTotal = false, true
	m := mismatch(t, upgraded.build())
	if !slices.Equal(m.Dropped, refs("max/reduce")) || !slices.Equal(m.Added, refs("total/reduce")) {
		t.Fatalf("dropped %v, added %v; want max's state dropped and total's added", m.Dropped, m.Added)
	}
	upgraded.allow = true
	job := finishedFrom(t, upgraded, sp)
	if r := job.LastRestore(); !slices.Equal(r.Dropped, refs("max/reduce")) || !slices.Equal(r.Added, refs("total/reduce")) {
		t.Fatalf("restore report %+v: want max's state dropped and total's added", r)
	}
}

// TestSavepointDamaged restores savepoints that are damaged, truncated or
// missing: Run fails at once, without restarting, saying what is wrong.
func TestSavepointDamaged(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	sp := stopWithSavepoint(t, c)
	good, err := os.ReadFile(filepath.Join(sp, snapshot.SavepointFile))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		edit    func([]byte) []byte // nil: no savepoint file at all
		corrupt bool
		want    string
	}{
		{"flipped", func(b []byte) []byte { b[len(b)-5] ^= 1; return b }, true, "checksum"},
		{"header", func(b []byte) []byte { b[50] ^= 1; return b }, true, "header checksum"},
		{"truncated", func(b []byte) []byte { return b[:len(b)*2/3] }, true, "truncated"},
		{"empty", func([]byte) []byte { return nil }, true, "truncated"},
		{"missing", nil, false, "neither a savepoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.resumed(t, filepath.Join(t.TempDir(), "sp"), 2)
			if err := os.Mkdir(r.restoreFrom, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				if err := os.WriteFile(filepath.Join(r.restoreFrom, snapshot.SavepointFile), tc.edit(slices.Clone(good)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			job := r.build()
			err := job.Run(context.Background())
			if !errors.Is(err, ringflow.ErrRestoreFrom) || errors.Is(err, snapshot.ErrCorrupt) != tc.corrupt ||
				!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), r.restoreFrom) {
				t.Fatalf("Run: %v; want ErrRestoreFrom naming %s, saying %q (corrupt: %v)", err, r.restoreFrom, tc.want, tc.corrupt)
			}
			t.Log(err)
			if job.Restarts() != 0 || len(job.Checkpoints()) != 0 {
				t.Fatalf("%d restarts, %d checkpoints: want none", job.Restarts(), len(job.Checkpoints()))
			}
		})
	}
}

// TestSavepointWhileRunning takes a savepoint of a running job, which goes
// on to its end, with unaligned checkpoints: the savepoint is aligned, and
// a job restored from it counts on from where it was.
func TestSavepointWhileRunning(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	c.unaligned = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := c.build()
	done := started(t, ctx, job, 1)
	sp, err := job.Savepoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	diffRows(t, readParts(t, c.out), rollingCounts(c.evs))
	var taken *ringflow.CheckpointStats
	for _, cp := range job.Checkpoints() {
		if cp.Savepoint {
			taken = &cp
		}
	}
	if taken == nil || taken.Stop || taken.Final || taken.Unaligned() || !strings.HasSuffix(sp, "-"+strconv.FormatUint(taken.ID, 10)) {
		t.Fatalf("savepoint %s, its checkpoint %+v: want an aligned checkpoint, neither stop nor final", sp, taken)
	}
	// Restored into a sink directory of its own, the job emits each key's
	// counts from the savepoint's on.
	r := c
	r.rate, r.restoreFrom, r.out, r.state = 0, sp, filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "state")
	resumed := r.build()
	run(t, resumed)
	if resumed.RestoredFrom() != taken.ID {
		t.Fatalf("restored checkpoint %d, want %d", resumed.RestoredFrom(), taken.ID)
	}
	countsFrom(t, c.evs, readParts(t, r.out))

	// So does a job without checkpoints.
	job = ringflow.NewJob(ringflow.Config{Parallelism: 3, Workers: 2, RestoreFrom: sp, AllowNonRestoredState: true})
	src := ringflow.Source(job, "src", ringflow.FromSlice(c.evs), ringflow.Parallelism(2))
	counts := ringflow.MapWithState(ringflow.KeyBy(src, func(e event) uint64 { return e.Key }), "count",
		func(n *uint64, e event) string { *n++; return fmt.Sprintf("%d:%d", e.Key, *n) })
	var got collect
	ringflow.Sink(counts, "out", sinkTo(&got, func(s string) string { return s }))
	run(t, job)
	countsFrom(t, c.evs, got.sorted())
}

// TestSavepointInStats checks that the statistics of a checkpoint taken
// for a savepoint, in Events.CheckpointCompleted and in Job.Checkpoints,
// name the savepoint's directory, and those of other checkpoints none;
// and that a savepoint that cannot be written loses its directory in
// Job.Checkpoints.
func TestSavepointInStats(t *testing.T) {
	for _, writable := range []bool{true, false} {
		t.Run(fmt.Sprintf("writable=%v", writable), func(t *testing.T) {
			c := newSPJob(t, t.TempDir())
			if !writable {
				// A file where the directory of savepoints should be.
				if err := os.WriteFile(c.savepoints, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			completed := map[uint64]ringflow.CheckpointStats{}
			c.events = &ringflow.EventListener{CheckpointCompleted: func(s ringflow.CheckpointStats) {
				mu.Lock()
				defer mu.Unlock()
				completed[s.ID] = s
			}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			job := c.build()
			done := started(t, ctx, job, 2)
			var paths []string
			sp, err := job.Savepoint(ctx)
			if writable != (err == nil) {
				t.Fatalf("Savepoint: %q, %v; want an error only if the directory is not writable", sp, err)
			}
			paths = append(paths, sp)
			sp, err = job.StopWithSavepoint(ctx)
			if writable != (err == nil) {
				t.Fatalf("StopWithSavepoint: %q, %v; want an error only if the directory is not writable", sp, err)
			}
			paths = append(paths, sp)
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			var listed []string
			for _, cp := range job.Checkpoints() {
				mu.Lock()
				ev, ok := completed[cp.ID]
				mu.Unlock()
				if cp.Status != "completed" {
					continue
				}
				if !ok {
					t.Fatalf("checkpoint %d completed without an event", cp.ID)
				}
				switch {
				case !cp.Savepoint && (cp.SavepointPath != "" || ev.SavepointPath != ""):
					t.Fatalf("checkpoint %d, not for a savepoint, names %q (event %q)", cp.ID, cp.SavepointPath, ev.SavepointPath)
				case cp.Savepoint && ev.SavepointPath == "":
					t.Fatalf("the event of savepoint checkpoint %d names no directory", cp.ID)
				case cp.Savepoint && writable && cp.SavepointPath != ev.SavepointPath:
					t.Fatalf("savepoint checkpoint %d names %q, its event %q", cp.ID, cp.SavepointPath, ev.SavepointPath)
				case cp.Savepoint && !writable && cp.SavepointPath != "":
					t.Fatalf("savepoint checkpoint %d names %q, which could not be written", cp.ID, cp.SavepointPath)
				case cp.Savepoint && writable:
					listed = append(listed, cp.SavepointPath)
				case cp.Savepoint:
					listed = append(listed, "")
				}
			}
			if !slices.Equal(listed, paths) {
				t.Fatalf("savepoint checkpoints name %q; Savepoint and StopWithSavepoint returned %q", listed, paths)
			}
		})
	}
}

// countsFrom checks the lines of a rolling count restored from a
// savepoint: each key's counts are a run that ends at the key's total.
func countsFrom(t *testing.T, evs []event, lines []string) {
	t.Helper()
	total := map[uint64]uint64{}
	for _, e := range evs {
		total[e.Key]++
	}
	counts := map[uint64][]uint64{}
	for _, l := range lines {
		var k, n uint64
		fmt.Sscanf(l, "%d:%d", &k, &n)
		counts[k] = append(counts[k], n)
	}
	if len(counts) == 0 {
		t.Fatal("the restored job emitted nothing")
	}
	for k, ns := range counts {
		slices.Sort(ns)
		if ns[len(ns)-1] != total[k] || ns[len(ns)-1]-ns[0] != uint64(len(ns)-1) {
			t.Fatalf("key %d: counts %d..%d (%d of them), want a run ending at %d", k, ns[0], ns[len(ns)-1], len(ns), total[k])
		}
	}
}

// TestStopWithoutCheckpoints stops a job without checkpoints at once, and
// a job stopped before its Run stops as soon as it has started, with its
// first checkpoint.
func TestStopWithoutCheckpoints(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	ringflow.Sink(ringflow.Source(job, "src", ringflow.Generate(func(i uint64) uint64 { return i },
		ringflow.GenOptions{Rate: 1000})), "sink", func(context.Context, uint64) error { return nil })
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	if err := job.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	c := newSPJob(t, t.TempDir())
	job = c.build()
	stopErr := make(chan error, 1)
	go func() { stopErr <- job.Stop(context.Background()) }()
	time.Sleep(10 * time.Millisecond) // Stop waits for Run
	run(t, job)
	if err := <-stopErr; err != nil {
		t.Fatal(err)
	}
	if cps := job.Checkpoints(); len(cps) != 1 || !cps[0].Stop || cps[0].Status != "completed" {
		t.Fatalf("checkpoints %+v: want one, the stop checkpoint", cps)
	}
	if n := len(readParts(t, c.out)); n >= len(c.evs) {
		t.Fatalf("%d lines committed by a job stopped before it started: all of them", n)
	}
}

// TestStop stops a job with Job.Stop, and with a cancelled context and
// StopOnCancel: Run returns (nil, ctx.Err()), the last checkpoint stopped
// the job with every transaction committed, and a run on the state
// directory resumes from it to the exact output.
func TestStop(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancelled), func(t *testing.T) {
			c := newSPJob(t, t.TempDir())
			c.savepoints, c.cancelStop = "", cancelled
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job := c.build()
			done := started(t, ctx, job, 2)
			if cancelled {
				cancel()
				if err := <-done; err != context.Canceled {
					t.Fatalf("Run: %v, want context.Canceled", err)
				}
			} else {
				if err := job.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
			}
			last := stopped(t, job, c, false)
			r := c
			r.rate = 0
			again := r.build()
			run(t, again)
			if again.RestoredFrom() != last.ID {
				t.Fatalf("restored checkpoint %d, want the stop checkpoint %d", again.RestoredFrom(), last.ID)
			}
			diffRows(t, readParts(t, c.out), rollingCounts(c.evs))
			if err := job.Stop(context.Background()); !errors.Is(err, ringflow.ErrNotRunning) {
				t.Fatalf("Stop after Run: %v, want ErrNotRunning", err)
			}
		})
	}
}

// TestRestoreFromStateDir restores the latest checkpoint of another job's
// state directory, which stays as it was.
func TestRestoreFromStateDir(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	c.savepoints = ""
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := c.build()
	done := started(t, ctx, job, 2)
	if err := job.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	last := stopped(t, job, c, false)
	restored := finishedFrom(t, c.resumed(t, c.state, 3), c.state)
	if restored.RestoredFrom() != last.ID {
		t.Fatalf("restored checkpoint %d, want %d", restored.RestoredFrom(), last.ID)
	}
	// The first job's directory is untouched: it resumes from it too.
	c.rate = 0
	finishes := c.build()
	run(t, finishes)
	if finishes.RestoredFrom() != last.ID {
		t.Fatalf("the first job resumed from %d, want %d", finishes.RestoredFrom(), last.ID)
	}
	diffRows(t, readParts(t, c.out), rollingCounts(c.evs))
}

// TestRestoreFromAgain runs a job restored from a savepoint, interrupts
// it, and runs it again as it was: it resumes from its own checkpoint,
// not from the savepoint. A state directory with checkpoints of another
// start refuses RestoreFrom.
func TestRestoreFromAgain(t *testing.T) {
	c := newSPJob(t, t.TempDir())
	sp := stopWithSavepoint(t, c)
	r := c.resumed(t, sp, 2)
	r.rate = 20_000
	interrupt(t, r.build())
	r.rate = 0
	job := r.build()
	run(t, job)
	info, err := snapshot.ReadSavepointInfo(sp)
	if err != nil {
		t.Fatal(err)
	}
	if rep := job.LastRestore(); rep.From != "" || rep.Checkpoint <= info.Checkpoint {
		t.Fatalf("restore report %+v: want a restore from the state directory, after savepoint %d", rep, info.Checkpoint)
	}
	diffRows(t, readParts(t, r.out), rollingCounts(c.evs))

	// c's own state directory holds checkpoints from scratch.
	other := c
	other.restoreFrom = sp
	err = other.build().Run(context.Background())
	if !errors.Is(err, ringflow.ErrRestoreFrom) || !strings.Contains(err.Error(), "started from scratch") {
		t.Fatalf("Run: %v; want ErrRestoreFrom: the state directory holds checkpoints from scratch", err)
	}
	t.Log(err)
}

// TestSavepointErrors: the calls fail clearly where they cannot work.
func TestSavepointErrors(t *testing.T) {
	dir := t.TempDir()
	c := newSPJob(t, dir)
	c.savepoints = ""
	job := c.build()
	var ce *ringflow.ConfigError
	if _, err := job.Savepoint(context.Background()); !errors.As(err, &ce) || ce.Field != "Checkpoint.SavepointDir" {
		t.Fatalf("Savepoint without a SavepointDir: %v", err)
	}
	job = ringflow.NewJob(ringflow.Config{StopOnCancel: true, RestoreFrom: dir,
		Checkpoint: ringflow.CheckpointConfig{SavepointDir: dir}})
	ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice([]int{1})), "sink", func(_ context.Context, _ int) error { return nil })
	fields := map[string]bool{}
	for _, e := range ringflow.ConfigErrors(job.Run(context.Background())) {
		fields[e.Field] = true
	}
	if !fields["StopOnCancel"] || !fields["Checkpoint.SavepointDir"] {
		t.Fatalf("config errors %v: want StopOnCancel and Checkpoint.SavepointDir", fields)
	}
	c = newSPJob(t, dir)
	c.restoreFrom = c.state
	if err := c.build().Run(context.Background()); !errors.As(err, &ce) || ce.Field != "RestoreFrom" {
		t.Fatalf("RestoreFrom of the job's own state directory: %v", err)
	}
	c.restoreFrom = filepath.Join(dir, "nothing")
	if err := c.build().Run(context.Background()); !errors.Is(err, ringflow.ErrRestoreFrom) {
		t.Fatalf("RestoreFrom of a missing directory: %v", err)
	}
}

// splitSource reads evs in splits: split s holds evs[s], evs[s+splits],
// ... Subtask j of p starts with the splits s with s % p == j; its position
// lists the splits it reads, each with the offset of its next record. It
// shares its splits out anew when restored at another parallelism
// (SplitSource), and paces itself to rate records per second.
type splitSource struct {
	evs    []event
	splits int
	rate   float64
	mine   [][2]int // split, offset of its next record
	next   int      // the split to read from next, in mine
	start  time.Time
	read   int
}

func (s *splitSource) Open(subtask, parallelism int, pos []byte) error {
	s.start = time.Now()
	if pos == nil {
		for sp := subtask; sp < s.splits; sp += parallelism {
			s.mine = append(s.mine, [2]int{sp, 0})
		}
		return nil
	}
	mine, err := decodeSplits(pos)
	s.mine = mine
	return err
}

func decodeSplits(pos []byte) ([][2]int, error) {
	var out [][2]int
	for len(pos) > 0 {
		if len(pos) < 16 {
			return nil, fmt.Errorf("split position of %d bytes", len(pos))
		}
		out = append(out, [2]int{int(binary.LittleEndian.Uint64(pos)), int(binary.LittleEndian.Uint64(pos[8:]))})
		pos = pos[16:]
	}
	return out, nil
}

func (s *splitSource) Position() []byte {
	b := []byte{} // NB: not nil: a subtask without splits has a position too
	for _, m := range s.mine {
		b = binary.LittleEndian.AppendUint64(b, uint64(m[0]))
		b = binary.LittleEndian.AppendUint64(b, uint64(m[1]))
	}
	return b
}

func (s *splitSource) RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, error) {
	var all [][2]int
	for _, p := range old {
		splits, err := decodeSplits(p)
		if err != nil {
			return nil, err
		}
		all = append(all, splits...)
	}
	slices.SortFunc(all, func(a, b [2]int) int { return a[0] - b[0] })
	s.mine = nil
	for i, m := range all {
		if i%parallelism == subtask {
			s.mine = append(s.mine, m)
		}
	}
	return s.Position(), nil
}

func (s *splitSource) Read(buf []event) (int, error) {
	if due := int(time.Since(s.start).Seconds() * s.rate); s.rate > 0 && due <= s.read {
		return 0, nil
	} else if s.rate > 0 {
		buf = buf[:min(len(buf), due-s.read)]
	}
	n := 0
	for n < len(buf) {
		live := false
		for range s.mine {
			m := &s.mine[s.next]
			s.next = (s.next + 1) % len(s.mine)
			if i := m[0] + m[1]*s.splits; i < len(s.evs) {
				buf[n], m[1], live = s.evs[i], m[1]+1, true
				n++
				break
			}
		}
		if !live {
			break
		}
	}
	s.read += n
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (s *splitSource) NextReady() time.Time {
	if s.rate <= 0 {
		return time.Time{}
	}
	return s.start.Add(time.Duration(float64(s.read+1) / s.rate * float64(time.Second)))
}

func (s *splitSource) Close() error { return nil }

// TestSavepointRescaleSource stops a job whose source has splits at
// parallelism 2 with a savepoint, and restores all of it, source included,
// at 1 and at 3: the source's splits are shared out anew. A source without
// splits refuses to change its parallelism.
func TestSavepointRescaleSource(t *testing.T) {
	evs := makeEvents(seeds.Seed(t), 60_000, 300, 0)
	dir := t.TempDir()
	build := func(par int, rate float64, out, state, from string) *ringflow.Job {
		job := ringflow.NewJob(ringflow.Config{Parallelism: par, Workers: 2, BatchSize: 50, RestoreFrom: from,
			Checkpoint: ringflow.CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: state,
				SavepointDir: filepath.Join(dir, "savepoints")}})
		s := ringflow.Source(job, "src", func() ringflow.SourceFunc[event] {
			return &splitSource{evs: evs, splits: 6, rate: rate / float64(par)}
		})
		counts := ringflow.MapWithState(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "count",
			func(n *uint64, e event) string { *n++; return fmt.Sprintf("%d:%d", e.Key, *n) })
		ringflow.TxnSink(counts, "out", ringflow.FileSink(out))
		return job
	}
	out := filepath.Join(dir, "out")
	first := build(2, 20_000, out, filepath.Join(dir, "state"), "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := started(t, ctx, first, 2)
	sp, err := first.StopWithSavepoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(readParts(t, out)); n == 0 || n == len(evs) {
		t.Fatalf("%d of %d lines before the savepoint: want it part-way", n, len(evs))
	}
	for _, par := range []int{1, 3} {
		t.Run(strconv.Itoa(par), func(t *testing.T) {
			into := t.TempDir()
			resumedOut := filepath.Join(into, "out")
			if err := os.CopyFS(resumedOut, os.DirFS(out)); err != nil {
				t.Fatal(err)
			}
			run(t, build(par, 0, resumedOut, filepath.Join(into, "state"), sp))
			diffRows(t, readParts(t, resumedOut), rollingCounts(evs))
		})
	}
	// Generate has no splits: it keeps its parallelism.
	c := newSPJob(t, t.TempDir())
	sp = stopWithSavepoint(t, c)
	r := c.resumed(t, sp, 2)
	job := ringflow.NewJob(ringflow.Config{Parallelism: 3, RestoreFrom: sp,
		Checkpoint: ringflow.CheckpointConfig{Interval: time.Millisecond, StateDir: r.state}})
	ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice(r.evs)), "sink", func(_ context.Context, _ event) error { return nil })
	if err := job.Run(ctx); err == nil || !strings.Contains(err.Error(), "must keep its parallelism") {
		t.Fatalf("Run: %v; want the source to refuse a new parallelism", err)
	}
}
