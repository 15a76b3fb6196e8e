package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ringflow/ringflow/keygroups"
)

// TestRoundTrip writes every kind of entry, from several goroutines at
// once, and reads each back through its accessor.
func TestRoundTrip(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 0)
	defer s.Close()
	p, err := s.Begin(1)
	if err != nil {
		t.Fatal(err)
	}
	const kgs, size = 128, 512
	writeAllKinds(t, p, 4 /* writers */, kgs, size)
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().BytesWritten; got < kgs*size {
		t.Fatalf("BytesWritten %d, want at least %d", got, kgs*size)
	}

	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() != 1 || len(c.Skipped) != 0 {
		t.Fatalf("Latest: id %d, skipped %v; want 1 and none", c.ID(), c.Skipped)
	}
	versions := make([]int, kgs)
	for i := range versions {
		versions[i] = 1
	}
	checkKeyGroups(t, c, versions, size)
	checkRange(t, c, 32, 63, size)
	checkRange(t, c, -5, 3, size)    // clamped below
	checkRange(t, c, 120, 999, size) // clamped above
	for subtask := 0; subtask < 2; subtask++ {
		expectBytes(t, "source position", c.SourcePosition, "src", subtask, fmt.Sprintf("pos-%d", subtask))
		expectBytes(t, "timers", c.Timers, "count", subtask, fmt.Sprintf("timers-%d", subtask))
		expectBytes(t, "sink txn", c.SinkTxn, "sink", subtask, fmt.Sprintf("txn-%d", subtask))
		chans := c.ChannelStates("count", subtask)
		if len(chans) != 2 || chans[0].Channel != 0 || chans[1].Channel != 3 ||
			string(chans[1].Data) != fmt.Sprintf("inflight-%d-3", subtask) {
			t.Fatalf("ChannelStates(count, %d) = %+v", subtask, chans)
		}
		if got, ok := c.ChannelState("count", subtask, 3); !ok || string(got) != fmt.Sprintf("inflight-%d-3", subtask) {
			t.Fatalf("ChannelState(count, %d, 3) = %q, %v", subtask, got, ok)
		}
	}
	if got := c.SourcePositions("src"); len(got) != 2 || got[1].Subtask != 1 || string(got[1].Data) != "pos-1" {
		t.Fatalf("SourcePositions = %+v", got)
	}
	if got := c.SinkTxns("sink"); len(got) != 2 || string(got[0].Data) != "txn-0" {
		t.Fatalf("SinkTxns = %+v", got)
	}
	if _, ok := c.KeyGroup("count", 128); ok {
		t.Fatal("KeyGroup(count, 128) found an entry that was never written")
	}
	if _, ok := c.Timers("src", 0); ok {
		t.Fatal("Timers(src, 0) found an entry that was never written")
	}
	if m := c.Meta(); m.MaxParallelism != 128 || m.Parallelism["sink"] != 2 || len(m.Parallelism) != 3 {
		t.Fatalf("Meta = %+v", m)
	}
	if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("Checkpoints = %v, want [1]", ids)
	}
}

// writeAllKinds fills p from several goroutines: key groups [0, kgs) of
// "count" at version 1, and for subtasks 0 and 1 a source position, timers,
// a sink transaction and the state of input channels 0 and 3.
func writeAllKinds(t *testing.T, p *Pending, writers, kgs, size int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for kg := w; kg < kgs; kg += writers {
				if err := p.PutKeyGroup("count", kg, blob(kg, 1, size)); err != nil {
					errs <- err
					return
				}
			}
			subtask := w % 2
			if w < 2 {
				errs <- errors.Join(
					p.PutSourcePosition("src", subtask, []byte(fmt.Sprintf("pos-%d", subtask))),
					p.PutTimers("count", subtask, []byte(fmt.Sprintf("timers-%d", subtask))),
					p.PutSinkTxn("sink", subtask, []byte(fmt.Sprintf("txn-%d", subtask))),
					p.PutChannelState("count", subtask, 0, []byte(fmt.Sprintf("inflight-%d-0", subtask))),
					p.PutChannelState("count", subtask, 3, []byte(fmt.Sprintf("inflight-%d-3", subtask))),
				)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkRange(t *testing.T, c *Checkpoint, first, last, size int) {
	t.Helper()
	got := c.KeyGroups("count", first, last)
	lo, hi := max(first, 0), min(last, 127)
	if len(got) != hi-lo+1 {
		t.Fatalf("KeyGroups(count, %d, %d): %d groups, want %d", first, last, len(got), hi-lo+1)
	}
	for i, kg := range got {
		if kg.KeyGroup != lo+i || !bytes.Equal(kg.Data, blob(lo+i, 1, size)) {
			t.Fatalf("KeyGroups(count, %d, %d)[%d] = key group %d, wrong or out of order", first, last, i, kg.KeyGroup)
		}
	}
}

func expectBytes(t *testing.T, what string, get func(string, int) ([]byte, bool), op string, subtask int, want string) {
	t.Helper()
	got, ok := get(op, subtask)
	if !ok || string(got) != want {
		t.Fatalf("%s(%s, %d) = %q, %v; want %q", what, op, subtask, got, ok, want)
	}
}

// TestIncrementalReuse: an unchanged key group costs no bytes written and
// still reads back; references survive the checkpoint they came from.
func TestIncrementalReuse(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	const kgs, size = 16, 4096
	commitFull(t, s, 1, kgs, 1, size)
	versions := make([]int, kgs)
	for i := range versions {
		versions[i] = 1
	}
	for id := uint64(2); id <= 5; id++ {
		changed := int(id) % kgs
		p, err := s.Begin(id)
		if err != nil {
			t.Fatal(err)
		}
		for kg := 0; kg < kgs; kg++ {
			if kg == changed {
				versions[kg] = int(id)
				err = p.PutKeyGroup("count", kg, blob(kg, int(id), size))
			} else {
				err = p.ReuseKeyGroup("count", kg, id-1)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if st.BytesWritten != size || st.BytesReused != (kgs-1)*size {
			t.Fatalf("checkpoint %d: written %d reused %d; want %d and %d", id, st.BytesWritten, st.BytesReused, size, (kgs-1)*size)
		}
		c, err := s.Latest()
		if err != nil {
			t.Fatal(err)
		}
		checkKeyGroups(t, c, versions, size)
	}
	// Checkpoint 1 is long gone (retained 2), but key groups 0, 1 and 6..15
	// still live in its blobs through references.
	if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{4, 5}) {
		t.Fatalf("Checkpoints = %v, want [4 5]", ids)
	}
	st := s.Stats()
	if st.BytesWritten != uint64(kgs*size+len("offset-1")+4*size) || st.BytesReused != 4*(kgs-1)*size {
		t.Fatalf("store stats %+v", st)
	}
	if err := s.mustBegin(t, 6).ReuseKeyGroup("count", 0, 1); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("reuse from dropped checkpoint 1: %v, want ErrNotRetained", err)
	}
}

func (s *Store) mustBegin(t testing.TB, id uint64) *Pending {
	t.Helper()
	p, err := s.Begin(id)
	if err != nil {
		t.Fatalf("Begin(%d): %v", id, err)
	}
	return p
}

// TestRetentionGC: after retention, the blobs only dropped checkpoints
// referenced are deleted from Pebble, referenced ones are kept, including a
// reference held by a checkpoint still pending.
func TestRetentionGC(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 1)
	defer s.Close()
	commitFull(t, s, 1, 3, 1, 64)

	// Checkpoint 2 reuses key group 0 and is still pending when 3 drops 1.
	p2 := s.mustBegin(t, 2)
	if err := p2.ReuseKeyGroup("count", 0, 1); err != nil {
		t.Fatal(err)
	}
	p3 := s.mustBegin(t, 3)
	if err := p3.ReuseKeyGroup("count", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := p3.PutKeyGroup("count", 2, blob(2, 3, 64)); err != nil {
		t.Fatal(err)
	}
	if err := p3.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`blob 1 keygroup op="count" kg=0`, // held by pending 2
		`blob 1 keygroup op="count" kg=1`, // referenced by 3
		`blob 3 keygroup op="count" kg=2`,
	}
	if got := rawKeys(t, s, prefixBlob); !slices.Equal(got, want) {
		t.Fatalf("blobs after checkpoint 3:\n got %q\nwant %q", got, want)
	}
	if got := rawKeys(t, s, prefixManifest); !slices.Equal(got, []string{"m 3"}) {
		t.Fatalf("manifests after checkpoint 3: %q, want [m 3]", got)
	}
	if err := p2.Commit(testMeta()); !errors.Is(err, ErrSubsumed) {
		t.Fatalf("Commit(2) after 3: %v, want ErrSubsumed", err)
	}
	// The next commit collects what the failed 2 released, and 4 replaces
	// every key group, so nothing of 1 or 3 survives.
	commitFull(t, s, 4, 3, 4, 64)
	want = []string{
		`blob 4 keygroup op="count" kg=0`,
		`blob 4 keygroup op="count" kg=1`,
		`blob 4 keygroup op="count" kg=2`,
		`blob 4 source-position op="src" subtask=0`,
	}
	if got := rawKeys(t, s, prefixBlob); !slices.Equal(got, want) {
		t.Fatalf("blobs after checkpoint 4:\n got %q\nwant %q", got, want)
	}
	if st := s.Stats(); st.Committed != 3 || st.Failed != 1 || st.GarbageKeysDeleted == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAbortReleases: an aborted checkpoint leaves nothing, and its reuse
// references stop protecting blobs.
func TestAbortReleases(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 1)
	defer s.Close()
	commitFull(t, s, 1, 2, 1, 64)
	p := s.mustBegin(t, 2)
	if err := p.ReuseKeyGroup("count", 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.PutKeyGroup("count", 1, []byte("never")); err != nil {
		t.Fatal(err)
	}
	p.Abort()
	p.Abort() // idempotent
	if err := p.PutKeyGroup("count", 0, []byte("late")); err == nil {
		t.Fatal("Put after Abort succeeded")
	}
	if err := p.Commit(testMeta()); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	commitFull(t, s, 3, 2, 3, 64)
	for _, k := range rawKeys(t, s, prefixBlob) {
		if !strings.HasPrefix(k, "blob 3 ") {
			t.Fatalf("blob %s survived, want only checkpoint 3's", k)
		}
	}
	if st := s.Stats(); st.Aborted != 1 || st.Committed != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestReopen: complete checkpoints survive Close and Open on a real
// directory (externalized checkpoints), and ids continue above them.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	lg := newTestLogger(t)
	s, err := Open(dir, Options{Logger: lg.slog()})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 4; id++ {
		commitFull(t, s, id, 8, int(id), 1000)
	}
	// A pending checkpoint at close is dropped.
	p := s.mustBegin(t, 5)
	if err := p.PutKeyGroup("count", 0, []byte("unfinished")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(testMeta()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
	s, err = Open(dir, Options{Logger: lg.slog()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{2, 3, 4}) {
		t.Fatalf("Checkpoints after reopen = %v, want [2 3 4]", ids)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	checkKeyGroups(t, c, []int{4, 4, 4, 4, 4, 4, 4, 4}, 1000)
	if pos, _ := c.SourcePosition("src", 0); string(pos) != "offset-4" {
		t.Fatalf("source position %q, want offset-4", pos)
	}
	if s.MaxID() != 4 {
		t.Fatalf("MaxID = %d, want 4", s.MaxID())
	}
	if _, err := s.Begin(4); err == nil {
		t.Fatal("Begin(4) succeeded after reopen; ids must increase")
	}
	p = s.mustBegin(t, 6)
	if err := p.ReuseKeyGroup("count", 0, 4); err != nil {
		t.Fatalf("reuse after reopen: %v", err)
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput: every misuse is an error naming what was wrong.
func TestBadInput(t *testing.T) {
	if _, err := Open(testDir, Options{FS: vfs.NewMem(), Retained: -1}); err == nil ||
		!strings.Contains(err.Error(), "Retained") {
		t.Fatalf("Open with Retained -1: %v", err)
	}
	s, _ := openTest(t, vfs.NewMem(), 0)
	defer s.Close()
	if _, err := s.Begin(0); err == nil {
		t.Fatal("Begin(0) succeeded")
	}
	p := s.mustBegin(t, 7)
	if _, err := s.Begin(7); err == nil || !strings.Contains(err.Error(), "7") {
		t.Fatalf("Begin(7) twice: %v", err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{p.PutKeyGroup("", 0, nil), "empty operator id"},
		{p.PutKeyGroup(strings.Repeat("x", 256), 0, nil), "longer than 255"},
		{p.PutKeyGroup("bad\xff", 0, nil), "UTF-8"},
		{p.PutKeyGroup("count", -1, nil), "key group -1"},
		{p.PutKeyGroup("count", MaxParallelismLimit, nil), "key group 32768"},
		{p.PutTimers("count", -2, nil), "subtask -2"},
		{p.PutChannelState("count", 0, -1, nil), "channel -1"},
		{p.ReuseKeyGroup("count", 0, 3), "not retained"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("got error %v, want one containing %q", tc.err, tc.want)
		}
	}
	if err := p.PutKeyGroup("count", 200, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := p.PutKeyGroup("count", 200, []byte("y")); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate put: %v", err)
	}
	err := p.Commit(testMeta())
	if err == nil || !strings.Contains(err.Error(), "kg=200") || !strings.Contains(err.Error(), "maxParallelism 128") ||
		errors.Is(err, ErrCorrupt) {
		t.Fatalf("Commit with key group 200 of 128: %v; want an input error (not ErrCorrupt)", err)
	}
	p = s.mustBegin(t, 8)
	if err := p.PutSourcePosition("unknown", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(testMeta()); err == nil || !strings.Contains(err.Error(), `"unknown"`) {
		t.Fatalf("Commit with an operator missing from the metadata: %v", err)
	}
	p = s.mustBegin(t, 9)
	if err := p.PutSourcePosition("src", 5, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(testMeta()); err == nil || !strings.Contains(err.Error(), "parallelism 2") {
		t.Fatalf("Commit with subtask 5 of parallelism 2: %v", err)
	}
	if err := s.mustBegin(t, 10).Commit(Meta{}); err == nil || !strings.Contains(err.Error(), "maxParallelism 0") {
		t.Fatalf("Commit with zero metadata: %v", err)
	}
	if ids := s.Checkpoints(); len(ids) != 0 {
		t.Fatalf("failed commits left checkpoints %v", ids)
	}
	if _, err := s.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest on an empty store: %v, want ErrNoCheckpoint", err)
	}
	// An empty checkpoint (no entries) is legal.
	if err := s.mustBegin(t, 11).Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentWriters fills two concurrent checkpoints from eight
// goroutines (writes and reuses interleaved) and checks that every entry
// arrived exactly once, in the right checkpoint.
func TestConcurrentWriters(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 3)
	defer s.Close()
	commitFull(t, s, 1, 128, 1, 64)
	pendings := []*Pending{s.mustBegin(t, 2), s.mustBegin(t, 3)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := pendings[w%2]
			for kg := w / 2; kg < 128; kg += 4 {
				var err error
				if kg%3 == 0 {
					err = p.ReuseKeyGroup("count", kg, 1)
				} else {
					err = p.PutKeyGroup("count", kg, blob(kg, int(p.ID()), 64))
				}
				if err == nil {
					err = p.PutChannelState("count", kg%2, kg, []byte(fmt.Sprint(p.ID(), kg)))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, p := range pendings {
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{2, 3} {
		c, err := s.Checkpoint(id)
		if err != nil {
			t.Fatal(err)
		}
		versions := make([]int, 128)
		for kg := range versions {
			versions[kg] = int(id)
			if kg%3 == 0 {
				versions[kg] = 1
			}
		}
		checkKeyGroups(t, c, versions, 64)
		n := 0
		for subtask := 0; subtask < 2; subtask++ {
			for _, cs := range c.ChannelStates("count", subtask) {
				if cs.Channel%2 != subtask || string(cs.Data) != fmt.Sprint(id, cs.Channel) {
					t.Fatalf("checkpoint %d: channel state %d of subtask %d = %q", id, cs.Channel, subtask, cs.Data)
				}
				n++
			}
		}
		if n != 128 {
			t.Fatalf("checkpoint %d holds %d channel states, want 128", id, n)
		}
	}
}

// TestKeyGroupDeltas: a key group can be a reused base plus a chain of
// deltas, so a checkpoint in which few keys of a key group changed writes
// only their delta; the chain reads back in order and survives retention.
func TestKeyGroupDeltas(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 2)
	defer s.Close()
	base := bytes.Repeat([]byte("B"), 1000)
	p := s.mustBegin(t, 1)
	if err := errors.Join(p.PutKeyGroup("count", 0, base), p.PutKeyGroup("count", 1, []byte("one"))); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendKeyGroupDelta("count", 2, []byte("x")); err == nil || !strings.Contains(err.Error(), "no base") {
		t.Fatalf("delta without a base: %v", err)
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{2, 3} {
		p := s.mustBegin(t, id)
		if err := p.ReuseKeyGroup("count", 0, id-1); err != nil {
			t.Fatal(err)
		}
		if n, ok := p.KeyGroupDeltas("count", 0); !ok || n != int(id)-2 {
			t.Fatalf("checkpoint %d: KeyGroupDeltas = %d, %v; want %d", id, n, ok, id-2)
		}
		if err := p.AppendKeyGroupDelta("count", 0, []byte(fmt.Sprint("d", id))); err != nil {
			t.Fatal(err)
		}
		if err := p.PutKeyGroup("count", 0, base); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("base over a reused chain: %v", err)
		}
		if err := p.PutKeyGroup("count", 1, []byte(fmt.Sprint("one", id))); err != nil {
			t.Fatal(err)
		}
		if err := p.ReuseKeyGroup("count", 1, id-1); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("reuse over a written base: %v", err)
		}
		if err := p.Commit(testMeta()); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if wantReused := uint64(len(base) + 2*(int(id)-2)); st.BytesWritten != 6 || st.BytesReused != wantReused {
			t.Fatalf("checkpoint %d: written %d reused %d; want 6 and %d", id, st.BytesWritten, st.BytesReused, wantReused)
		}
	}
	// Checkpoint 1 is dropped (retained 2), its base lives on.
	if ids := s.Checkpoints(); !slices.Equal(ids, []uint64{2, 3}) {
		t.Fatalf("Checkpoints = %v", ids)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	got := c.KeyGroups("count", 0, 1)
	if len(got) != 2 || !bytes.Equal(got[0].Data, base) || len(got[0].Deltas) != 2 ||
		string(got[0].Deltas[0]) != "d2" || string(got[0].Deltas[1]) != "d3" ||
		string(got[1].Data) != "one3" || len(got[1].Deltas) != 0 {
		t.Fatalf("KeyGroups = %+v", got)
	}
	if d := c.KeyGroupDeltas("count", 0); len(d) != 2 || string(d[1]) != "d3" {
		t.Fatalf("KeyGroupDeltas = %q", d)
	}
}

// TestClosed: every operation after Close fails with ErrClosed, including
// those of a checkpoint that was pending when the store closed.
func TestClosed(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 0)
	commitFull(t, s, 1, 1, 1, 10)
	p := s.mustBegin(t, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, errBegin := s.Begin(3)
	_, errLatest := s.Latest()
	_, errCheckpoint := s.Checkpoint(1)
	for name, err := range map[string]error{
		"Begin":       errBegin,
		"Latest":      errLatest,
		"Checkpoint":  errCheckpoint,
		"Close":       s.Close(),
		"PutKeyGroup": p.PutKeyGroup("count", 0, []byte("x")),
		"Reuse":       p.ReuseKeyGroup("count", 0, 1),
		"Commit":      p.Commit(testMeta()),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if st := s.Stats(); st.Aborted != 1 {
		t.Fatalf("Stats.Aborted = %d, want 1 (the pending checkpoint)", st.Aborted)
	}
}

// TestRescaleRanges: a checkpoint written by 2 subtasks (each its own key
// group range, as keygroups.RangeOf assigns them) is read back by 1, 3 and
// 4 subtasks through KeyGroups(op, first, last): every key group reaches
// exactly one new subtask, with its bytes.
func TestRescaleRanges(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 0)
	defer s.Close()
	const maxP = 128
	p := s.mustBegin(t, 1)
	for subtask := 0; subtask < 2; subtask++ {
		r, err := keygroups.RangeOf(subtask, 2, maxP)
		if err != nil {
			t.Fatal(err)
		}
		for kg := r.Start; kg < r.End; kg++ {
			if err := p.PutKeyGroup("count", kg, blob(kg, 1, 32)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	for _, parallelism := range []int{1, 3, 4} {
		seen := make([]int, maxP)
		for subtask := 0; subtask < parallelism; subtask++ {
			r, err := keygroups.RangeOf(subtask, parallelism, maxP)
			if err != nil {
				t.Fatal(err)
			}
			for _, kg := range c.KeyGroups("count", r.Start, r.End-1) {
				if !r.Contains(kg.KeyGroup) || !bytes.Equal(kg.Data, blob(kg.KeyGroup, 1, 32)) {
					t.Fatalf("p=%d subtask %d (%v) got key group %d, or wrong bytes", parallelism, subtask, r, kg.KeyGroup)
				}
				seen[kg.KeyGroup]++
			}
		}
		for kg, n := range seen {
			if n != 1 {
				t.Fatalf("p=%d: key group %d restored %d times, want once", parallelism, kg, n)
			}
		}
	}
}

// TestLatestDuringCommits: readers racing with commits that drop and
// garbage-collect the previous checkpoint never see a damaged checkpoint.
func TestLatestDuringCommits(t *testing.T) {
	s, lg := openTest(t, vfs.NewMem(), 1)
	defer s.Close()
	commitFull(t, s, 1, 4, 1, 100)
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-done:
				return
			default:
			}
			c, err := s.Latest()
			if err == nil && len(c.Skipped) > 0 {
				err = fmt.Errorf("checkpoint %d skipped %v", c.ID(), c.Skipped)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for id := uint64(2); id <= 30; id++ {
		commitFull(t, s, id, 4, int(id), 100)
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatalf("Latest during commits: %v", err)
	}
	if lines := lg.errorsContaining(""); len(lines) > 0 {
		t.Fatalf("errors logged: %q", lines)
	}
}

// TestSecondOpenFails: a second store on the same state dir is refused
// (Pebble's lock) without disturbing the first.
func TestSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: newTestLogger(t).slog()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := s.mustBegin(t, 1)
	if err := p.PutKeyGroup("count", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(dir, Options{Logger: newTestLogger(t).slog()}); err == nil {
		s2.Close()
		t.Fatal("second Open on the same dir succeeded")
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatalf("first store after the refused Open: %v", err)
	}
}

// TestBeginReusesMaps: a checkpoint's maps of entries and chains, emptied
// when it ends (committed or aborted), are the next Begin's, so a steady
// stream of checkpoints does not grow new ones each time; and what the next
// checkpoint stores is all it holds.
func TestBeginReusesMaps(t *testing.T) {
	s, _ := openTest(t, vfs.NewMem(), 0)
	defer s.Close()
	mapOf := func(m map[entryKey]*pendingEntry) uintptr { return reflect.ValueOf(m).Pointer() }
	p1, err := s.Begin(1)
	if err != nil {
		t.Fatal(err)
	}
	writeAllKinds(t, p1, 1, 16, 64)
	m1 := mapOf(p1.mu.entries)
	if err := p1.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	p2, err := s.Begin(2)
	if err != nil {
		t.Fatal(err)
	}
	if mapOf(p2.mu.entries) != m1 || len(p2.mu.entries) != 0 || len(p2.mu.chains) != 0 {
		t.Fatalf("Begin(2) got map %#x with %d entries, %d chains; want checkpoint 1's, emptied",
			mapOf(p2.mu.entries), len(p2.mu.entries), len(p2.mu.chains))
	}
	p2.Abort()
	p3, err := s.Begin(3)
	if err != nil {
		t.Fatal(err)
	}
	if mapOf(p3.mu.entries) != m1 {
		t.Fatal("the maps of an aborted checkpoint were not handed on")
	}
	writeAllKinds(t, p3, 1, 16, 64)
	if err := p3.Commit(testMeta()); err != nil {
		t.Fatal(err)
	}
	c, err := s.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() != 3 {
		t.Fatalf("Latest is %d, want 3", c.ID())
	}
	versions := make([]int, 16)
	for i := range versions {
		versions[i] = 1
	}
	checkKeyGroups(t, c, versions, 64)
}
