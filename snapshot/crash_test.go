package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// crashRecorder takes a crash clone of a crashable MemFS before every
// filesystem operation while armed: each clone is a state the disk could be
// in if the process died at that moment. Unsynced data survives in a clone
// with a probability drawn per clone from {0, 50, 100}%.
type crashRecorder struct {
	mem *vfs.MemFS
	mu  struct {
		sync.Mutex
		armed  bool
		rng    *rand.Rand
		clones []crashPoint
	}
}

type crashPoint struct {
	fs     *vfs.MemFS
	before string // the operation about to run
	linked bool   // the checkpoint's sstable was already linked into Pebble
}

func (c *crashRecorder) String() string { return "crashRecorder" }

func (c *crashRecorder) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.armed {
		return nil
	}
	linked := len(c.mu.clones) > 0 && c.mu.clones[len(c.mu.clones)-1].linked
	pct := []int{0, 50, 100}[c.mu.rng.IntN(3)]
	c.mu.clones = append(c.mu.clones, crashPoint{
		fs:     c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.mu.rng}),
		before: fmt.Sprintf("%s %s (%d%% unsynced kept)", opName(op.Kind), op.Path, pct),
		linked: linked,
	})
	if op.Kind == errorfs.OpLink {
		c.mu.clones[len(c.mu.clones)-1].linked = true
	}
	return nil
}

func (c *crashRecorder) arm(on bool) []crashPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.armed = on
	clones := c.mu.clones
	c.mu.clones = nil
	return clones
}

// TestCrashDuringCommit crashes (by cloning the disk) before every
// filesystem operation of a commit, then of a commit that also collects
// garbage, and restores from each clone. A checkpoint exists in a clone
// only if the crash came after its sstable reached Pebble; it always exists
// once Commit returned; and whatever a clone holds verifies completely.
func TestCrashDuringCommit(t *testing.T) {
	seed := seeds.Seed(t)
	mem := vfs.NewCrashableMem()
	rec := &crashRecorder{mem: mem}
	rec.mu.rng = rand.New(rand.NewPCG(seed, 0))
	s, _ := openTest(t, errorfs.Wrap(mem, rec), 1)
	defer s.Close()
	commitFull(t, s, 1, 4, 1, 1000)

	for _, id := range []uint64{2, 3} {
		rec.arm(true)
		if err := commitVersion(s, id); err != nil {
			t.Fatal(err)
		}
		points := rec.arm(false)
		points = append(points, crashPoint{
			fs:     mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}),
			before: "nothing: Commit returned",
			linked: true,
		})
		t.Logf("commit %d: %d crash points", id, len(points))
		for i, cp := range points {
			got := restoreAfterCrash(t, cp.fs)
			switch {
			case got != id-1 && got != id:
				t.Fatalf("crash before %s: restored checkpoint %d, want %d or %d", cp.before, got, id-1, id)
			case got == id && !cp.linked:
				t.Fatalf("crash before %s: checkpoint %d exists before its sstable reached Pebble", cp.before, id)
			case i == len(points)-1 && got != id:
				t.Fatalf("crash after Commit(%d) returned: restored %d", id, got)
			}
		}
	}
}

// restoreAfterCrash opens a store on fs, checks Latest verifies with no
// checkpoint skipped, and returns its id.
func restoreAfterCrash(t *testing.T, fs vfs.FS) uint64 {
	t.Helper()
	s, lg := openTest(t, fs, 1)
	defer s.Close()
	c, err := s.Latest()
	if err != nil {
		t.Fatalf("Latest after crash: %v", err)
	}
	if len(c.Skipped) > 0 || len(lg.errorsContaining("")) > 0 {
		t.Fatalf("restore after crash reported problems: skipped %v", c.Skipped)
	}
	expectLatest(t, s, c.ID())
	if ids := s.Checkpoints(); !slices.Contains(ids, c.ID()) {
		t.Fatalf("Checkpoints %v lacks the latest %d", ids, c.ID())
	}
	return c.ID()
}

// TestUncommittedIsInvisible: a checkpoint that was written but never
// committed leaves nothing after a crash or a reopen.
func TestUncommittedIsInvisible(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, _ := openTest(t, mem, 3)
	commitFull(t, s, 1, 4, 1, 1000)
	p := s.mustBegin(t, 2)
	for kg := 0; kg < 4; kg++ {
		if err := p.PutKeyGroup("count", kg, blob(kg, 2, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
	s2, _ := openTest(t, crashed, 3)
	defer s2.Close()
	if ids := s2.Checkpoints(); !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("Checkpoints after crash = %v, want [1]", ids)
	}
	expectLatest(t, s2, 1)
	for _, k := range rawKeys(t, s2, prefixBlob) {
		if !strings.HasPrefix(k, "blob 1 ") {
			t.Fatalf("blob %s of the uncommitted checkpoint exists", k)
		}
	}
	p.Abort()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
