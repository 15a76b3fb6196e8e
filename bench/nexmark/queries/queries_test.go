package queries

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
	"github.com/ringflow/ringflow/bench/nexmark/oracle"
	"github.com/ringflow/ringflow/internal/testseed"
)

var testEvents = flag.Uint64("nexmark.events", 100_000, "events per query test run")

// testConfig is a bounded stream slow enough in event time (2,000 events
// per second) that 100,000 events span 50 s: five q7/q8 windows, 25 q5
// windows, and sessions that end.
func testConfig() nexmark.Config {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = *testEvents
	cfg.EventsPerSecond = 2_000
	return cfg
}

// runQuery runs a query on ringflow and returns its rows.
func runQuery(t testing.TB, query string, cfg nexmark.Config, parallelism int) []string {
	t.Helper()
	var mu sync.Mutex
	var rows []string
	out := NewOutput(func(row []byte) error {
		mu.Lock()
		defer mu.Unlock()
		rows = append(rows, string(row))
		return nil
	})
	job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: parallelism})
	if err := Build(job, query, cfg, out); err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if got := out.Rows(); got != int64(len(rows)) {
		t.Fatalf("%s: Output.Rows() = %d, but %d rows were written", query, got, len(rows))
	}
	return rows
}

// Every query's rows equal the brute-force oracle's over the same events,
// with one and with two subtasks per operator.
func TestQueriesMatchOracle(t *testing.T) {
	cfg := testConfig()
	events, err := oracle.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range Names {
		want, err := oracle.Query(q, events)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatalf("%s: the oracle finds no rows in %d events; the test would prove nothing", q, cfg.NumEvents)
		}
		for _, p := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/p%d", q, p), func(t *testing.T) {
				got := runQuery(t, q, cfg, p)
				if d := oracle.Diff(got, want); d != "" {
					t.Fatalf("%s at parallelism %d differs from the oracle: %s", q, p, d)
				}
				t.Logf("%s p=%d: %d rows", q, p, len(got))
			})
		}
	}
}

var seeds = testseed.Flag("nexmark.seed", "")

// Each query matches the oracle on streams of random length and event-time
// rate (so windows hold from a few to thousands of events), at a random
// parallelism. Replay a failure with -nexmark.seed.
func TestRandomConfigs(t *testing.T) {
	seed := seeds.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, q := range Names {
		cfg := nexmark.DefaultConfig()
		cfg.NumEvents = 10_000 + rng.Uint64N(50_000)
		cfg.EventsPerSecond = 200 + rng.IntN(200_000)
		p := 1 + rng.IntN(4)
		events, err := oracle.Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := oracle.Query(q, events)
		got := runQuery(t, q, cfg, p)
		if d := oracle.Diff(got, want); d != "" {
			t.Fatalf("%s on %d events at %d/s, parallelism %d (seed %d): %s", q, cfg.NumEvents, cfg.EventsPerSecond, p, seed, d)
		}
	}
}

// Without a write function the rows are counted, and the count is the
// oracle's.
func TestCountOnly(t *testing.T) {
	cfg := testConfig()
	cfg.NumEvents = 20_000
	events, err := oracle.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"q2", "q5"} {
		want, _ := oracle.Query(q, events)
		out := NewOutput(nil)
		job := ringflow.NewJob(ringflow.Config{Workers: 2, Parallelism: 2})
		if err := Build(job, q, cfg, out); err != nil {
			t.Fatal(err)
		}
		if err := job.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out.Rows() != int64(len(want)) {
			t.Errorf("%s: counted %d rows, the oracle has %d", q, out.Rows(), len(want))
		}
	}
}

// A failing write fails the job with the write's error.
func TestWriteErrorFailsJob(t *testing.T) {
	cfg := testConfig()
	cfg.NumEvents = 5_000
	job := ringflow.NewJob(ringflow.Config{Workers: 2})
	out := NewOutput(func([]byte) error { return fmt.Errorf("disk full") })
	if err := Build(job, "q0", cfg, out); err != nil {
		t.Fatal(err)
	}
	err := job.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run = %v, want the write's error", err)
	}
}

func TestBuildErrors(t *testing.T) {
	cfg := testConfig()
	bad := cfg
	bad.EventsPerSecond = 0
	for _, c := range []struct {
		query string
		cfg   nexmark.Config
		out   *Output
		want  string
	}{
		{"q4", cfg, NewOutput(nil), `unknown query "q4"`},
		{"q0", bad, NewOutput(nil), "EventsPerSecond"},
		{"q0", cfg, nil, "nil Output"},
	} {
		job := ringflow.NewJob(ringflow.Config{})
		err := Build(job, c.query, c.cfg, c.out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%s) = %v, want an error containing %q", c.query, err, c.want)
		}
	}
}

// The q1 row formatter agrees with nexmark.AppendQ1Row, which converts the
// dollar price itself.
func TestQ1RowFormat(t *testing.T) {
	for _, price := range []int64{0, 1, 2, 999, 1000, 1001, 123456789, 100_000_000, -1, -1001, euroMilliMax, -euroMilliMax} {
		b := nexmark.Bid{Auction: 1000, Bidder: 1001, Price: price, DateTime: nexmark.BaseTime}
		want := string(nexmark.AppendQ1Row(nil, &b))
		got := string(appendQ1Row(nil, q1Bid{Auction: 1000, Bidder: 1001, EuroMilli: price * 908, DateTime: nexmark.BaseTime}))
		if got != want {
			t.Errorf("price %d: got %q, want %q", price, got, want)
		}
	}
}
