package cow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

// frozenModel is what a snapshot must show: the model at the freeze and the
// version of each key group's last write.
type frozenModel struct {
	snap    *Snapshot[uint64, int64]
	want    map[uint64]int64
	base    map[uint64]int64 // the model at the previous snapshot (the delta base)
	written map[int]uint64
}

// differential drives a Map and a Go map with the same random operations,
// freezing and releasing snapshots at random points, and checks every
// snapshot against the model copy taken at its freeze.
type differential struct {
	t       *testing.T
	r       *rand.Rand
	cfg     Config[uint64, int64]
	m       *Map[uint64, int64]
	model   map[uint64]int64
	written map[int]uint64 // kg → version of last write
	keys    []uint64       // key space (all owned by the map)
	snaps   []frozenModel
	older   []uint64         // versions of all snapshots taken so far
	last    map[uint64]int64 // the model at the last snapshot
	noDelta int              // deltas refused with ErrNoDelta
}

func (d *differential) kgOf(k uint64) int { return d.m.KeyGroupOf(d.cfg.Hash(k)) }

func (d *differential) step() {
	k := d.keys[d.r.IntN(len(d.keys))]
	switch op := d.r.IntN(1000); {
	case op < 450: // increment, the keyed-count path
		p, err := d.m.Upsert(k)
		if err != nil {
			d.t.Fatal(err)
		}
		*p++
		d.model[k]++
		d.written[d.kgOf(k)] = d.m.Version()
	case op < 600:
		v := d.r.Int64()
		if err := d.m.Put(k, v); err != nil {
			d.t.Fatal(err)
		}
		d.model[k] = v
		d.written[d.kgOf(k)] = d.m.Version()
	case op < 800:
		_, want := d.model[k]
		if got := d.m.Delete(k); got != want {
			d.t.Fatalf("Delete(%d) = %v, want %v", k, got, want)
		}
		if want {
			delete(d.model, k)
			d.written[d.kgOf(k)] = d.m.Version()
		}
	case op < 980:
		got, ok := d.m.Get(k)
		if want, wok := d.model[k]; ok != wok || got != want {
			d.t.Fatalf("Get(%d) = %d,%v, want %d,%v", k, got, ok, want, wok)
		}
	case op < 990:
		d.m.CopyAhead(1 + d.r.IntN(16))
	case op < 993:
		d.freeze()
	case op < 996:
		d.release()
	case op < 998:
		d.deleteFunc()
	default:
		d.checkSnapshot()
	}
}

func (d *differential) freeze() {
	s := d.m.Freeze()
	w := make(map[int]uint64, len(d.written))
	for kg, v := range d.written {
		w[kg] = v
	}
	want := cloneMap(d.model)
	if d.last == nil {
		d.last = map[uint64]int64{}
	}
	d.snaps = append(d.snaps, frozenModel{snap: s, want: want, base: d.last, written: w})
	d.older = append(d.older, s.Version())
	d.last = want
}

func (d *differential) release() {
	if len(d.snaps) == 0 {
		return
	}
	i := d.r.IntN(len(d.snaps))
	d.checkFrozen(d.snaps[i])
	d.snaps[i].snap.Release()
	d.snaps = append(d.snaps[:i], d.snaps[i+1:]...)
}

func (d *differential) deleteFunc() {
	kg := d.kgOf(d.keys[d.r.IntN(len(d.keys))])
	mod := int64(2 + d.r.IntN(3))
	pred := func(k uint64, v int64) bool { return v%mod == 0 }
	want := 0
	for k, v := range d.model {
		if d.kgOf(k) == kg && pred(k, v) {
			delete(d.model, k)
			want++
		}
	}
	if got := d.m.DeleteFunc(kg, pred); got != want {
		d.t.Fatalf("DeleteFunc(kg %d) removed %d, want %d", kg, got, want)
	}
	if want > 0 {
		d.written[kg] = d.m.Version()
	}
}

func (d *differential) checkSnapshot() {
	if len(d.snaps) > 0 {
		d.checkFrozen(d.snaps[d.r.IntN(len(d.snaps))])
	}
}

// checkFrozen compares a snapshot with its model: contents, point reads,
// changed-since for every earlier version, and a serialise/restore trip.
func (d *differential) checkFrozen(f frozenModel) {
	s := f.snap
	what := fmt.Sprintf("snapshot v%d", s.Version())
	diffMaps(d.t, what, snapshotContents(d.t, s), f.want)
	for range 20 {
		k := d.keys[d.r.IntN(len(d.keys))]
		got, ok := s.Get(k)
		if want, wok := f.want[k]; ok != wok || got != want {
			d.t.Fatalf("%s: Get(%d) = %d,%v, want %d,%v", what, k, got, ok, want, wok)
		}
	}
	for kg := s.KeyGroups().Start; kg < s.KeyGroups().End; kg++ {
		for _, v := range append([]uint64{0}, d.older...) {
			if v >= s.Version() {
				break
			}
			if got, want := s.ChangedSince(kg, v), f.written[kg] > v; got != want {
				d.t.Fatalf("%s: ChangedSince(kg %d, v%d) = %v, want %v (last write v%d)",
					what, kg, v, got, want, f.written[kg])
			}
		}
	}
	diffMaps(d.t, what+" restored", mapContents(d.t, roundTrip(d.t, s, d.cfg)), f.want)
	d.checkDelta(f)
}

// checkDelta applies the snapshot's deltas to its base state and expects
// the snapshot's state.
func (d *differential) checkDelta(f frozenModel) {
	m, err := New(d.cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	for k, v := range f.base {
		if err := m.Put(k, v); err != nil {
			d.t.Fatal(err)
		}
	}
	s := f.snap
	for kg := s.KeyGroups().Start; kg < s.KeyGroups().End; kg++ {
		b, err := s.AppendKeyGroupDelta(nil, kg)
		if errors.Is(err, ErrNoDelta) {
			d.noDelta++
			m.DeleteFunc(kg, func(uint64, int64) bool { return true })
			if b, err = s.AppendKeyGroup(nil, kg); err == nil {
				_, err = m.LoadKeyGroup(b)
			}
		} else if err == nil {
			_, err = m.ApplyKeyGroupDelta(b)
		}
		if err != nil {
			d.t.Fatalf("snapshot v%d kg %d delta: %v", s.Version(), kg, err)
		}
	}
	diffMaps(d.t, fmt.Sprintf("snapshot v%d: base v%d + deltas", s.Version(), s.DeltaBase()), mapContents(d.t, m), f.want)
}

func (d *differential) checkLive() {
	diffMaps(d.t, "live map", mapContents(d.t, d.m), d.model)
}

func TestDifferentialAgainstGoMap(t *testing.T) {
	poorHash := func(k uint64) uint64 { return k & 0x3f } // 64 hashes: long probe runs
	cases := []struct {
		name  string
		cfg   Config[uint64, int64]
		nKeys int
		steps int
	}{
		{"maxP=4", counterConfig(4, keygroups.Range{}), 6000, 150_000},
		{"maxP=3,range=[1,3)", counterConfig(3, keygroups.Range{Start: 1, End: 3}), 4000, 100_000},
		{"maxP=128,range=[40,90)", counterConfig(128, keygroups.Range{Start: 40, End: 90}), 3000, 60_000},
		{"maxP=1,poor-hash", func() Config[uint64, int64] {
			c := counterConfig(1, keygroups.Range{})
			c.Hash = poorHash
			return c
		}(), 400, 30_000},
	}
	seed := seeds.Seed(t)
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			d := &differential{
				t: t, r: rand.New(rand.NewPCG(seed, uint64(ci))), cfg: c.cfg, m: m,
				model: map[uint64]int64{}, written: map[int]uint64{},
			}
			for k := uint64(0); len(d.keys) < c.nKeys; k++ {
				if m.KeyGroups().Contains(d.kgOf(k)) {
					d.keys = append(d.keys, k)
				}
			}
			for i := range c.steps * *longFlag {
				d.step()
				if i%20_000 == 0 {
					d.checkLive()
				}
			}
			d.checkLive()
			for len(d.snaps) > 0 {
				d.release()
			}
			d.freeze() // lets reclaim see the releases
			d.release()
			t.Logf("stats %+v; %d deltas refused", m.Stats(), d.noDelta)
		})
	}
}
