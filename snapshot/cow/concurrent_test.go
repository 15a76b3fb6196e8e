package cow

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ringflow/ringflow/keygroups"
)

type frozenJob struct {
	snap *Snapshot[uint64, int64]
	want map[uint64]int64
}

// serialiseAndCheck plays the background writer: it writes every key group
// of each snapshot out while the owner keeps updating, decodes the bytes,
// compares them with the values at the freeze, and releases the snapshot.
func serialiseAndCheck(jobs <-chan frozenJob, cfg Config[uint64, int64], errs chan<- error) {
	defer close(errs)
	var buf []byte
	acc, _ := New(cfg) // every snapshot's deltas applied in order
	for j := range jobs {
		for kg := j.snap.KeyGroups().Start; kg < j.snap.KeyGroups().End; kg++ {
			var err error
			if buf, err = j.snap.AppendKeyGroupDelta(buf[:0], kg); err == nil {
				_, err = acc.ApplyKeyGroupDelta(buf)
			}
			if err != nil {
				errs <- fmt.Errorf("snapshot v%d kg %d delta: %w", j.snap.Version(), kg, err)
				return
			}
		}
		got := make(map[uint64]int64, len(j.want))
		for kg := j.snap.KeyGroups().Start; kg < j.snap.KeyGroups().End; kg++ {
			var err error
			if buf, err = j.snap.AppendKeyGroup(buf[:0], kg); err != nil {
				errs <- err
				return
			}
			m, _ := New(cfg)
			if _, err := m.LoadKeyGroup(buf); err != nil {
				errs <- fmt.Errorf("snapshot v%d kg %d: %w", j.snap.Version(), kg, err)
				return
			}
			for k, v := range m.All(kg) {
				got[k] = v
			}
		}
		j.snap.Release()
		if acc.Len() != len(j.want) {
			errs <- fmt.Errorf("snapshot v%d: deltas applied give %d entries, want %d", j.snap.Version(), acc.Len(), len(j.want))
			return
		}
		for k, v := range j.want {
			if got, _ := acc.Get(k); got != v {
				errs <- fmt.Errorf("snapshot v%d: deltas applied give key %d = %d, want %d", j.snap.Version(), k, got, v)
				return
			}
		}
		if len(got) != len(j.want) {
			errs <- fmt.Errorf("snapshot v%d: %d entries written out, want %d", j.snap.Version(), len(got), len(j.want))
			return
		}
		for k, v := range j.want {
			if got[k] != v {
				errs <- fmt.Errorf("snapshot v%d: key %d written out as %d, value at freeze %d", j.snap.Version(), k, got[k], v)
				return
			}
		}
	}
}

// TestSnapshotWhileWriting: the owner keeps incrementing, inserting and
// deleting while a second goroutine serialises each snapshot; every
// snapshot must hold exactly the values at its freeze. Run it under -race:
// any write to a page a snapshot shares is a reported race.
func TestSnapshotWhileWriting(t *testing.T) {
	const nKeys, freezes, opsBetween = 40_000, 25, 30_000
	r := rand.New(rand.NewPCG(seeds.Seed(t), 7))
	cfg := counterConfig(128, keygroups.Range{})
	m := newCounters(t, 128, keygroups.Range{})
	model := make(map[uint64]int64)
	jobs := make(chan frozenJob, 2)
	errs := make(chan error, 1)
	go serialiseAndCheck(jobs, cfg, errs)
	for f := 0; f < freezes**longFlag; f++ {
		for range opsBetween {
			k := uint64(r.IntN(nKeys))
			switch r.IntN(20) {
			case 0:
				m.CopyAhead(4) // as a task with no records waiting does
				continue
			case 1, 2:
				m.Delete(k)
				delete(model, k)
				continue
			}
			p, err := m.Upsert(k)
			if err != nil {
				t.Fatal(err)
			}
			*p++
			model[k]++
		}
		select {
		case jobs <- frozenJob{snap: m.Freeze(), want: cloneMap(model)}:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	close(jobs)
	for err := range errs {
		t.Fatal(err)
	}
	diffMaps(t, "live map", mapContents(t, m), model)
	st := m.Stats()
	if st.PagesReused == 0 {
		t.Errorf("no page was ever reused after release: %+v", st)
	}
	t.Logf("stats %+v", st)
}
