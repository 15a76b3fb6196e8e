package pipelines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
)

// TestLiveHistogramCountsEachOnce records values from several goroutines
// while another drains: every value lands in exactly one drain, in its
// bucket, as a Histogram filled serially has it.
func TestLiveHistogramCountsEachOnce(t *testing.T) {
	seed := seeds.Seed(t)
	const writers, perWriter = 4, 50_000
	var live LiveHistogram
	var want Histogram
	values := make([][]int64, writers)
	for w := range values {
		rnd := rand.New(rand.NewPCG(seed, uint64(w)))
		for range perWriter {
			v := int64(rnd.ExpFloat64() * 1e5)
			values[w] = append(values[w], v)
			want.Record(v)
		}
	}
	var got Histogram
	var done atomic.Bool
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for !done.Load() {
			live.Drain(&got)
		}
		live.Drain(&got)
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for _, v := range values[w] {
				live.Record(v)
			}
		})
	}
	wg.Wait()
	done.Store(true)
	<-drained
	if got.Count() != want.Count() || got.Max() != want.Max() || got.counts != want.counts {
		t.Fatalf("drained %d values, max %d; recorded %d, max %d (or a bucket differs)",
			got.Count(), got.Max(), want.Count(), want.Max())
	}
	var after Histogram
	if live.Drain(&after); after.Count() != 0 || after.Max() != 0 {
		t.Errorf("a drain after the last found %d values, max %d", after.Count(), after.Max())
	}
}

// TestControlFailAndStop runs keyed-count until its Control stops it, with
// one failure asked for on the way: the job restarts once, and the
// committed output is each generated record's count exactly once.
func TestControlFailAndStop(t *testing.T) {
	dir := t.TempDir()
	ctl := &Control{}
	live := &LiveHistogram{}
	c := Config{Pipeline: "keyed-count", Records: UntilStopped, Parallelism: 2, Workers: 2, Keys: 1000,
		Rate: 300_000, SampleEvery: 64, Control: ctl, LiveLatency: live,
		Checkpoint: ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: filepath.Join(dir, "state")},
		Restart:    ringflow.RestartStrategy{Attempts: 3}, SinkDir: filepath.Join(dir, "out")}
	asked := false
	c.Progress = func(p Progress) {
		switch {
		case !asked && p.Produced > 50_000:
			ctl.Fail()
			asked = true
		case ctl.Failures() == 1 && p.Produced > 150_000:
			ctl.Stop()
		}
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 || ctl.Failures() != 1 {
		t.Errorf("%d restarts, %d failures injected; want 1 of each", res.Restarts, ctl.Failures())
	}
	ends := ctl.Ends(c.Parallelism)
	check, err := CheckKeyedCount(c, c.SinkDir, ends)
	if err != nil {
		t.Fatal(err)
	}
	// NB: Produced counts the records replayed after the restore again,
	// so the records generated once may be fewer than 150000.
	if check.Records != ends[0]+ends[1] || check.Records == 0 || check.Lines != check.Records {
		t.Errorf("check %+v of ends %v: want the ends' records, some, a line each", check, ends)
	}
	var lat Histogram
	if live.Drain(&lat); lat.Count() == 0 {
		t.Errorf("no latency sample reached the live histogram (the run's result has %d)", res.Latency.Samples)
	}
}

// TestCheckKeyedCountFindsDamage damages the committed output of a
// bounded keyed-count run in each way a broken exactly-once would: the
// check passes the output as committed and fails every damaged copy: with
// a sum per key, and with keys many enough to share buckets.
func TestCheckKeyedCountFindsDamage(t *testing.T) {
	t.Run("per key", func(t *testing.T) { checkFindsDamage(t, 100, 20_000) })
	t.Run("buckets", func(t *testing.T) { checkFindsDamage(t, 2*maxBuckets+5, 200_000) })
}

func checkFindsDamage(t *testing.T, keys, records uint64) {
	dir := t.TempDir()
	c := Config{Pipeline: "keyed-count", Records: records, Parallelism: 2, Workers: 2, Keys: keys,
		Checkpoint: ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: filepath.Join(dir, "state")},
		SinkDir:    filepath.Join(dir, "out")}
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// Subtask i of a bounded source generates the sequence numbers below
	// Records that are i mod P.
	ends := []uint64{(c.Records + 1) / 2, c.Records / 2}
	if _, err := CheckKeyedCount(c, c.SinkDir, ends); err != nil {
		t.Fatalf("the output as committed: %v", err)
	}
	files, err := PartFiles(c.SinkDir)
	if err != nil || len(files) == 0 {
		t.Fatalf("part files %v: %v", files, err)
	}
	// NB: a part file holds what one checkpoint committed, and how many
	// lines that is depends on when the checkpoints came; take the first
	// file with two lines of one key, lines at and other.
	var (
		file      string
		lines     []string
		key       string
		at, other int
	)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ls := strings.Split(string(bytes.TrimSuffix(b, []byte("\n"))), "\n")
		seen := map[string]int{}
		for i, l := range ls {
			k := strings.Fields(l)[0]
			if j, ok := seen[k]; ok {
				file, lines, key, at, other = f, ls, k, j, i
				break
			}
			seen[k] = i
		}
		if file != "" {
			break
		}
	}
	if file == "" {
		t.Fatalf("no part file of %v has two lines of one key; the test needs one", files)
	}
	for _, tc := range []struct {
		name   string
		damage func(lines []string) []string
	}{
		{"a line repeated", func(l []string) []string { return append(l, l[at]) }},
		{"a line lost", func(l []string) []string { return append(l[:at], l[at+1:]...) }},
		{"a count repeated in place of another", func(l []string) []string { l[at] = l[other]; return l }},
		{"a key out of range", func(l []string) []string { return append(l, fmt.Sprint(keys, " 1")) }},
		{"a count of 0", func(l []string) []string { return append(l, key+" 0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			damaged := filepath.Join(t.TempDir(), "out")
			copyDir(t, c.SinkDir, damaged)
			out := strings.Join(tc.damage(append([]string(nil), lines...)), "\n") + "\n"
			if err := os.WriteFile(filepath.Join(damaged, filepath.Base(file)), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := CheckKeyedCount(c, damaged, ends)
			if !errors.Is(err, ErrNotExactlyOnce) {
				t.Fatalf("check of the damaged output: %v, want %v", err, ErrNotExactlyOnce)
			}
			t.Log(err)
		})
	}
}

// copyDir copies the regular files of dir src into a new dir dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
