package snapshot

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var modelSteps = flag.Int("snapshot.model-steps", 150, "steps of TestAgainstModel")

// modelCheckpoint is what the oracle expects a checkpoint to hold.
type modelCheckpoint struct {
	id      uint64
	entries map[entryKey][]byte
}

// TestAgainstModel runs random sequences of checkpoints (full, incremental
// with reuse from any retained checkpoint, aborted, subsumed) and reopens
// against a naive oracle: a list of the retained checkpoints' contents.
// After every step the store must list exactly the oracle's checkpoints,
// read each back byte for byte, and hold exactly the blobs they reference.
func TestAgainstModel(t *testing.T) {
	seed := seeds.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	retained := 1 + rng.IntN(3)
	mem := vfs.NewMem()
	s, _ := openTest(t, mem, retained)
	defer func() { s.Close() }()
	var model []modelCheckpoint
	next := uint64(1)
	for step := 0; step < *modelSteps; step++ {
		switch r := rng.IntN(20); {
		case r == 0:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, _ = openTest(t, mem, retained)
		case r == 1:
			// Two concurrent checkpoints completing out of order: the older
			// one is subsumed.
			older := s.mustBegin(t, next)
			mc := modelCommit(t, rng, s, model, next+1)
			model = retain(append(model, mc), retained)
			if err := older.Commit(testMeta()); !errors.Is(err, ErrSubsumed) {
				t.Fatalf("step %d: older Commit(%d) = %v, want ErrSubsumed", step, next, err)
			}
			next += 2
		case r <= 3:
			p := s.mustBegin(t, next)
			fillRandom(t, rng, p, model)
			p.Abort()
			next++
		default:
			model = retain(append(model, modelCommit(t, rng, s, model, next)), retained)
			next++
		}
		checkModel(t, step, s, model)
	}
}

func retain(model []modelCheckpoint, n int) []modelCheckpoint {
	return model[max(0, len(model)-n):]
}

// modelCommit commits checkpoint id with random content and returns what
// it should hold.
func modelCommit(t *testing.T, rng *rand.Rand, s *Store, model []modelCheckpoint, id uint64) modelCheckpoint {
	t.Helper()
	p := s.mustBegin(t, id)
	mc := fillRandom(t, rng, p, model)
	mc.id = id
	if err := p.Commit(testMeta()); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
	return mc
}

// fillRandom puts or reuses a random subset of 8 key groups and a source
// position, returning the expected entries.
func fillRandom(t *testing.T, rng *rand.Rand, p *Pending, model []modelCheckpoint) modelCheckpoint {
	t.Helper()
	mc := modelCheckpoint{entries: make(map[entryKey][]byte)}
	for kg := 0; kg < 8; kg++ {
		k := entryKey{kind: KindKeyGroup, op: "count", a: uint32(kg)}
		var from []modelCheckpoint
		for _, m := range model {
			if _, ok := m.entries[k]; ok {
				from = append(from, m)
			}
		}
		switch r := rng.IntN(4); {
		case r == 0:
			continue // omitted
		case r == 1 || len(from) == 0:
			data := randomBytes(rng, 300)
			if err := p.PutKeyGroup("count", kg, data); err != nil {
				t.Fatal(err)
			}
			mc.entries[k] = data
		default:
			src := from[rng.IntN(len(from))]
			if err := p.ReuseKeyGroup("count", kg, src.id); err != nil {
				t.Fatalf("reuse key group %d from %d: %v", kg, src.id, err)
			}
			for dk, v := range src.entries {
				if dk.kind == k.kind && dk.op == k.op && dk.a == k.a {
					mc.entries[dk] = v
				}
			}
		}
		// Sometimes extend the chain with a delta.
		if rng.IntN(3) == 0 {
			n, ok := p.KeyGroupDeltas("count", kg)
			if !ok {
				t.Fatalf("key group %d has no base after put or reuse", kg)
			}
			data := randomBytes(rng, 50)
			if err := p.AppendKeyGroupDelta("count", kg, data); err != nil {
				t.Fatal(err)
			}
			dk := k
			dk.b = uint32(n + 1)
			mc.entries[dk] = data
		}
	}
	pos := []byte(fmt.Sprint(rng.Uint64()))
	if err := p.PutSourcePosition("src", rng.IntN(2), pos); err != nil {
		t.Fatal(err)
	}
	return mc
}

func checkModel(t *testing.T, step int, s *Store, model []modelCheckpoint) {
	t.Helper()
	var ids []uint64
	referenced := make(map[string]bool)
	for _, m := range model {
		ids = append(ids, m.id)
	}
	if got := s.Checkpoints(); !slices.Equal(got, ids) {
		t.Fatalf("step %d: Checkpoints = %v, model %v", step, got, ids)
	}
	for _, m := range model {
		c, err := s.Checkpoint(m.id)
		if err != nil {
			t.Fatalf("step %d: Checkpoint(%d): %v", step, m.id, err)
		}
		for kg := 0; kg < 8; kg++ {
			k := entryKey{kind: KindKeyGroup, op: "count", a: uint32(kg)}
			got, ok := c.KeyGroup("count", kg)
			want, wantOK := m.entries[k]
			if ok != wantOK || !bytes.Equal(got, want) {
				t.Fatalf("step %d: checkpoint %d key group %d: got %d bytes (%v), want %d (%v)",
					step, m.id, kg, len(got), ok, len(want), wantOK)
			}
			deltas := c.KeyGroupDeltas("count", kg)
			for i := 0; ; i++ {
				dk := k
				dk.b = uint32(i + 1)
				want, ok := m.entries[dk]
				if !ok {
					if len(deltas) != i {
						t.Fatalf("step %d: checkpoint %d key group %d: %d deltas, want %d", step, m.id, kg, len(deltas), i)
					}
					break
				}
				if i >= len(deltas) || !bytes.Equal(deltas[i], want) {
					t.Fatalf("step %d: checkpoint %d key group %d: delta %d wrong or missing", step, m.id, kg, i+1)
				}
			}
		}
		for _, e := range c.entries {
			referenced[string(e.blobKey())] = true
		}
	}
	var blobs []string
	err := s.scanPrefix(prefixBlob, func(key, _ []byte) { blobs = append(blobs, string(key)) })
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, len(referenced))
	for k := range referenced {
		want = append(want, k)
	}
	sort.Strings(want)
	if !slices.Equal(blobs, want) {
		t.Fatalf("step %d: %d blobs in Pebble, %d referenced by retained checkpoints", step, len(blobs), len(want))
	}
}

func randomBytes(rng *rand.Rand, maxLen int) []byte {
	data := make([]byte, rng.IntN(maxLen))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}
