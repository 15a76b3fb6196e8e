package queries

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ringflow/ringflow/bench/nexmark/oracle"
)

// The plain-Go baseline computes the same rows as the oracle.
func TestChanBaselineMatchesOracle(t *testing.T) {
	cfg := testConfig()
	events, err := oracle.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Names {
		if !HasChanBaseline(q) {
			continue
		}
		want, _ := oracle.Query(q, events)
		for _, p := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/p%d", q, p), func(t *testing.T) {
				var mu sync.Mutex
				var got []string
				out := NewOutput(func(row []byte) error {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, string(row))
					return nil
				})
				if err := RunChan(q, cfg, p, out); err != nil {
					t.Fatal(err)
				}
				if d := oracle.Diff(got, want); d != "" {
					t.Fatalf("baseline %s at parallelism %d differs from the oracle: %s", q, p, d)
				}
				if out.Rows() != int64(len(want)) {
					t.Fatalf("baseline %s counted %d rows, want %d", q, out.Rows(), len(want))
				}
			})
		}
	}
	if err := RunChan("q3", cfg, 1, NewOutput(nil)); err == nil {
		t.Fatal("RunChan(q3) succeeded; there is no q3 baseline")
	}
}
