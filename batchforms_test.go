package ringflow_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/invariants"
)

// TestBatchForms runs windows over a source whose watermark strategy has
// only the batch form of Timestamp, keyed by KeyByBatch, and checks the
// results against a brute-force computation, and that the batch forms,
// not the per-record ones, extracted the keys on the data path.
func TestBatchForms(t *testing.T) {
	seed := seeds.Seed(t)
	evs := makeEvents(seed, 20_000, 50, 20)
	w := ringflow.TumblingWindows(100 * time.Millisecond)
	want := bruteWindows(evs, w)
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		var perRecord, batched atomic.Int64
		key := func(e event) uint64 { perRecord.Add(1); return e.Key }
		keys := func(recs []event, out []uint64) {
			batched.Add(int64(len(recs)))
			for i := range recs {
				out[i] = recs[i].Key
			}
		}
		ws := ringflow.WatermarkStrategy[event]{
			Timestamps: func(recs []event, ts []int64) {
				for i := range recs {
					ts[i] = recs[i].TS
				}
			},
			OutOfOrderness: 50 * time.Millisecond,
		}
		job := ringflow.NewJob(cfg)
		s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice(evs), ws)
		win := ringflow.Window(ringflow.KeyByBatch(s, key, keys), "win", w, valueSum{})
		var c collect
		ringflow.Sink(win, "sink", sinkTo(&c, func(r ringflow.WindowResult[uint64, int64]) string {
			return fmt.Sprintf("%d [%d,%d) %d", r.Key, r.Start, r.End, r.Value)
		}))
		run(t, job)
		diffRows(t, c.sorted(), want)
		// Each record's key is extracted on both sides of the keyed edge.
		if n := batched.Load(); n < 2*int64(len(evs)) {
			t.Errorf("the batch form extracted %d keys for %d records", n, len(evs))
		}
		// (An invariants build checks every batched key against key.)
		if n := perRecord.Load(); n > 0 && !invariants.Enabled {
			t.Errorf("the per-record key function was called %d times", n)
		}
	})
}

// TestKeyByBatchStrings: KeyByBatch with keys that are not 8-byte
// integers (the hash is then per record) brings each key's records to one
// state: the highest running count of a key is its number of records.
func TestKeyByBatchStrings(t *testing.T) {
	seed := seeds.Seed(t)
	evs := makeEvents(seed, 20_000, 300, 0)
	want := map[string]int64{}
	for _, e := range evs {
		want[strconv.FormatUint(e.Key, 36)]++
	}
	forShapes(t, func(t *testing.T, cfg ringflow.Config) {
		job := ringflow.NewJob(cfg)
		s := ringflow.Source(job, "src", ringflow.FromSlice(evs))
		name := func(e event) string { return strconv.FormatUint(e.Key, 36) }
		names := func(recs []event, out []string) {
			for i := range recs {
				out[i] = name(recs[i])
			}
		}
		type total struct {
			key string
			n   int64
		}
		counts := ringflow.MapWithState(ringflow.KeyByBatch(s, name, names), "count", func(acc *int64, e event) total {
			*acc++
			return total{name(e), *acc}
		})
		var c collect
		ringflow.Sink(counts, "sink", sinkTo(&c, func(r total) string { return fmt.Sprintf("%s %d", r.key, r.n) }))
		run(t, job)
		last := map[string]int64{}
		for _, row := range c.sorted() {
			var k string
			var v int64
			if _, err := fmt.Sscanf(row, "%s %d", &k, &v); err != nil {
				t.Fatal(err)
			}
			last[k] = max(last[k], v)
		}
		if len(last) != len(want) {
			t.Fatalf("%d keys, want %d", len(last), len(want))
		}
		for k, v := range want {
			if last[k] != v {
				t.Errorf("key %s: count %d, want %d", k, last[k], v)
			}
		}
	})
}
