package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow"
)

// oracle computes the count and checksum of c's pipeline's output directly,
// in one loop, from the records the generator defines.
func oracle(c Config) (count, sum uint64) {
	c = c.withDefaults()
	g := sourceGen(c, seedMain)
	add := func(d uint64) { count++; sum += d }
	switch c.Pipeline {
	case "passthrough", "map-filter":
		for seq := range c.Records {
			r := g.record(seq)
			if c.Pipeline == "map-filter" {
				if r = mapValue(r); !keepValue(r) {
					continue
				}
			}
			add(digestRecord(&r))
		}
	case "keyed-count":
		counts := map[uint64]int64{}
		for seq := range c.Records {
			r := g.record(seq)
			counts[r.Key]++
			r.Value = counts[r.Key]
			add(digestCount(&r))
		}
	case "window":
		type kw struct {
			key   uint64
			start int64
		}
		counts := map[kw]int64{}
		for seq := range c.Records {
			r := g.record(seq)
			counts[kw{r.Key, windowStart(timeMs(r.Seq, c.EventStride))}]++
		}
		for k, n := range counts {
			add(digestWindow(k.key, k.start, n))
		}
	case "join":
		type kw struct {
			key   uint64
			start int64
		}
		left := map[kw][]Record{}
		nl := specOf(c, seedMain).records
		for seq := range nl {
			r := g.record(seq)
			k := kw{r.Key, windowStart(timeMs(r.Seq, c.EventStride))}
			left[k] = append(left[k], r)
		}
		gr := sourceGen(c, seedRight)
		nr := specOf(c, seedRight).records
		for seq := range nr {
			r := gr.record(seq)
			for _, l := range left[kw{r.Key, windowStart(timeMs(r.Seq, c.EventStride))}] {
				j := joinPair(l, r)
				add(digestJoined(&j))
			}
		}
	}
	return count, sum
}

// smallConfig is a bounded run small enough for a test, with several
// windows and many records per key.
func smallConfig(pipeline string, p int) Config {
	c := Config{Pipeline: pipeline, Records: 30_000, Parallelism: p, Workers: 2, Keys: 500, EventStride: 3}
	if pipeline == "join" {
		c.Keys, c.EventStride = 300, 1
	}
	return c
}

// TestOutputsAgree runs every pipeline on ringflow and on the baseline,
// with parallelism 1 and 2, and checks both against the direct
// computation.
func TestOutputsAgree(t *testing.T) {
	for _, name := range Names {
		for _, p := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/p%d", name, p), func(t *testing.T) {
				c := smallConfig(name, p)
				wantCount, wantSum := oracle(c)
				if wantCount == 0 {
					t.Fatalf("oracle: no output; the test config exercises nothing")
				}
				for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
					res, err := run(context.Background(), c)
					if err != nil {
						t.Fatal(err)
					}
					if res.Records != c.Records {
						t.Errorf("%s: %d records produced, want %d", res.Engine, res.Records, c.Records)
					}
					if res.SinkRecords != wantCount || res.Checksum != wantSum {
						t.Errorf("%s: sink saw %d records, checksum %#x; want %d, %#x",
							res.Engine, res.SinkRecords, res.Checksum, wantCount, wantSum)
					}
					if res.Latency.Samples == 0 {
						t.Errorf("%s: no latency samples", res.Engine)
					}
					t.Logf("%s: %d records, %d out, %d samples", res.Engine, res.Records, res.SinkRecords, res.Latency.Samples)
				}
			})
		}
	}
}

// TestOracleSees checks that the oracle distinguishes pipelines and inputs:
// a checksum that ignored its input would make TestOutputsAgree vacuous.
func TestOracleSees(t *testing.T) {
	seen := map[uint64]string{}
	for _, name := range Names {
		for _, n := range []uint64{1000, 1100} {
			c := Config{Pipeline: name, Records: n, Keys: 50, EventStride: 1}
			_, sum := oracle(c)
			id := fmt.Sprintf("%s/%d", name, n)
			if prev, ok := seen[sum]; ok {
				t.Errorf("%s and %s have the same checksum %#x", prev, id, sum)
			}
			seen[sum] = id
		}
	}
}

// TestDuration runs paced, unbounded sources until the duration passes:
// the run ends by itself, and the sink saw no more than was produced.
func TestDuration(t *testing.T) {
	for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
		c := Config{Pipeline: "keyed-count", Duration: 200 * time.Millisecond, Parallelism: 2, Workers: 2,
			Keys: 1000, Rate: 200_000}
		var calls int
		var last Progress
		c.Progress = func(p Progress) {
			if p.Produced < last.Produced || p.Elapsed < last.Elapsed || last.Done {
				t.Errorf("progress %+v after %+v", p, last)
			}
			calls++
			last = p
		}
		res, err := run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Records == 0 || res.SinkRecords > res.Records {
			t.Errorf("%s: produced %d, sink saw %d", res.Engine, res.Records, res.SinkRecords)
		}
		if calls < 2 || !last.Done || last.Produced != res.Records {
			t.Errorf("%s: %d progress calls, the last %+v; want at least 2, the last Done with %d records",
				res.Engine, calls, last, res.Records)
		}
		t.Logf("%s: %d records in %.3fs, p99 %.1fµs", res.Engine, res.Records, res.Seconds, res.Latency.P99)
	}
}

// TestFewRecords runs every pipeline with fewer records than source
// instances: the instances without any end at once.
func TestFewRecords(t *testing.T) {
	for _, name := range Names {
		c := Config{Pipeline: name, Records: 2, Parallelism: 3, Workers: 2, Keys: 1}
		wantCount, wantSum := oracle(c)
		for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
			res, err := run(context.Background(), c)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if res.Records != 2 || res.SinkRecords != wantCount || res.Checksum != wantSum {
				t.Errorf("%s on %s: %+v; want %d records out, checksum %#x", name, res.Engine, res, wantCount, wantSum)
			}
		}
	}
}

// TestWarmup checks that a warm-up longer than a bounded run leaves no
// latency samples, while the output is still counted.
func TestWarmup(t *testing.T) {
	for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
		c := Config{Pipeline: "keyed-count", Records: 50_000, Parallelism: 2, Workers: 2, Warmup: time.Hour}
		res, err := run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Latency.Samples != 0 || res.SinkRecords != c.Records {
			t.Errorf("%s: %d samples, %d records out; want 0, %d", res.Engine, res.Latency.Samples, res.SinkRecords, c.Records)
		}
	}
}

// TestKeepSamples checks that a run keeping its samples returns each one
// the latency figures counted, in generation order and within the run,
// and that a run that does not keep them returns none.
func TestKeepSamples(t *testing.T) {
	for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
		c := Config{Pipeline: "keyed-count", Records: 200_000, Parallelism: 2, Workers: 2, KeepSamples: true}
		start := time.Now()
		res, err := run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Latency.Samples == 0 || uint64(len(res.Samples)) != res.Latency.Samples {
			t.Fatalf("%s: %d samples kept, %d counted", res.Engine, len(res.Samples), res.Latency.Samples)
		}
		end := time.Now()
		for i, s := range res.Samples {
			switch {
			case i > 0 && s.GenUnixNano < res.Samples[i-1].GenUnixNano:
				t.Fatalf("%s: sample %d generated before sample %d", res.Engine, i, i-1)
			case s.GenUnixNano < start.UnixNano() || s.GenUnixNano > end.UnixNano() || s.LatencyNanos < 0:
				t.Fatalf("%s: sample %d %+v outside the run [%d, %d]", res.Engine, i, s, start.UnixNano(), end.UnixNano())
			}
		}
		c.KeepSamples = false
		if res, err := run(context.Background(), c); err != nil || res.Samples != nil {
			t.Errorf("%s without KeepSamples: %d samples kept (%v)", res.Engine, len(res.Samples), err)
		}
	}
	if size := unsafe.Sizeof(lane{}); size != 128 {
		t.Errorf("a sink lane is %d bytes, want 128 (one per two cache lines)", size)
	}
}

// TestSampleEvery checks that a run samples exactly the records whose
// hash selects them, one in SampleEvery, on both engines: keyed-count
// emits one record per input, so every sample reaches a sink.
func TestSampleEvery(t *testing.T) {
	for _, every := range []uint64{0, 64, 1} {
		c := Config{Pipeline: "keyed-count", Records: 50_000, Parallelism: 2, Workers: 2, SampleEvery: every}
		g := sourceGen(c, seedMain)
		want := uint64(0)
		for seq := range c.Records {
			if g.record(seq).SrcNanos != 0 {
				want++
			}
		}
		n := every
		if n == 0 {
			n = DefaultSampleEvery
		}
		if lo, hi := c.Records/n/2, c.Records/n*2; want < lo || want > hi {
			t.Fatalf("every %d: the generator samples %d of %d records", every, want, c.Records)
		}
		for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
			res, err := run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Latency.Samples != want {
				t.Errorf("%s, every %d: %d samples, want %d", res.Engine, every, res.Latency.Samples, want)
			}
		}
	}
}

// TestCancel checks that cancelling the caller's context ends a run with
// the context's error.
func TestCancel(t *testing.T) {
	for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
		ctx, cancel := context.WithCancel(context.Background())
		c := Config{Pipeline: "map-filter", Duration: time.Hour, Parallelism: 2, Workers: 2,
			Progress: func(Progress) { cancel() }}
		if _, err := run(ctx, c); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Pipeline: "nope", Records: 10}, `unknown pipeline "nope"`},
		{Config{Pipeline: "window"}, "set exactly one"},
		{Config{Pipeline: "window", Records: 10, Duration: time.Second}, "set exactly one"},
		{Config{Pipeline: "join", Records: 10, Parallelism: 129}, "parallelism 129"},
		{Config{Pipeline: "join", Records: 10, Workers: -1}, "workers -1"},
		{Config{Pipeline: "join", Records: 10, Rate: -5}, "rate -5"},
		{Config{Pipeline: "join", Duration: time.Second, Warmup: time.Second}, "warmup 1s"},
		{Config{Pipeline: "join", Records: 10, Warmup: -time.Second}, "warmup -1s"},
		{Config{Pipeline: "join", Records: 1, Parallelism: 2}, "records 1"},
		{Config{Pipeline: "keyed-count", Records: 10, Keys: 5, HotKeys: 6}, "hot keys 6"},
		{Config{Pipeline: "keyed-count", Records: 10, SampleEvery: 48}, "sample every 48: must be a power of two"},
		{Config{Pipeline: "keyed-count", Records: 10, SampleEvery: 2 * MaxSampleEvery}, "sample every 2147483648"},
		{Config{Pipeline: "keyed-count", Records: 10, Checkpoint: ringflow.CheckpointConfig{Interval: -1}}, "checkpoint interval -1ns"},
		{Config{Pipeline: "keyed-count", Records: 10, SinkDir: "out"}, `sink directory "out"`},
		{Config{Pipeline: "keyed-count", Records: 10, FailAfter: 3}, "fail after 3 records: recovery needs checkpoints"},
		{Config{Pipeline: "keyed-count", Records: 10, FailAfter: 3,
			Checkpoint: ringflow.CheckpointConfig{Interval: time.Second}}, "at least 1 restart"},
		{Config{Pipeline: "keyed-count", Records: 10, CheckpointWindows: -time.Second}, "checkpoint windows -1s"},
		{Config{Pipeline: "keyed-count", Records: 10, CheckpointWindows: time.Second}, "set a checkpoint interval"},
		{Config{Pipeline: "keyed-count", Records: 10, CheckpointWindows: time.Second,
			Checkpoint: ringflow.CheckpointConfig{Interval: time.Second}}, "at least two checkpoint intervals (2s)"},
	} {
		err := tc.c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an ErrConfig saying %q", tc.c, err, tc.want)
		}
		if _, err := Run(context.Background(), tc.c); !errors.Is(err, ErrConfig) {
			t.Errorf("Run(%+v): got %v, want ErrConfig", tc.c, err)
		}
	}
}

// TestWindowsOf places samples in their checkpoint windows: paused in even
// windows, on in odd ones, neither while a window settles or before the
// first.
func TestWindowsOf(t *testing.T) {
	w := windows{start: 1000, length: 100, settle: 20}
	for _, tc := range []struct {
		gen  int64
		want int
	}{
		{999, windowNone}, {1000, windowNone}, {1019, windowNone}, {1020, windowWithout}, {1099, windowWithout},
		{1100, windowNone}, {1119, windowNone}, {1120, windowWith}, {1199, windowWith},
		{1200, windowNone}, {1250, windowWithout}, {1350, windowWith},
	} {
		if got := w.of(tc.gen); got != tc.want {
			t.Errorf("sample generated at %d: window kind %d, want %d", tc.gen, got, tc.want)
		}
	}
	if (windows{}).of(5) != windowNone {
		t.Error("a run without windows put a sample in one")
	}
}

// TestCheckpointWindows runs keyed-count with checkpoints paused and on in
// turn: both kinds of window get samples, every checkpoint is triggered in
// a window with checkpoints (or while a paused one settles, should a tick
// beat the switch), and checkpoints did complete.
func TestCheckpointWindows(t *testing.T) {
	const window, interval = 400 * time.Millisecond, 50 * time.Millisecond
	c := Config{Pipeline: "keyed-count", Duration: 5 * window / 2, Parallelism: 2, Workers: 2, Keys: 1000, Rate: 200_000,
		Checkpoint:        ringflow.CheckpointConfig{Interval: interval, StateDir: t.TempDir()},
		CheckpointWindows: window}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Windows
	if w == nil || w.With.Samples == 0 || w.Without.Samples == 0 {
		t.Fatalf("windows %+v: want samples in windows of both kinds", w)
	}
	if w.With.Samples+w.Without.Samples > res.Latency.Samples {
		t.Errorf("%d + %d samples in windows, %d in all", w.With.Samples, w.Without.Samples, res.Latency.Samples)
	}
	completed := 0
	for _, ck := range res.Checkpoints {
		if ck.Status == "completed" {
			completed++
		}
		d := ck.Trigger.Sub(w.Start)
		if k := int64(d / window); pausedIn(k) && d%window >= interval {
			t.Errorf("checkpoint %d triggered %v into paused window %d", ck.ID, d%window, k)
		}
	}
	if completed == 0 {
		t.Error("no checkpoint completed in the windows with checkpoints")
	}
	if r := w.P99Ratio(); r <= 0 {
		t.Errorf("p99 ratio %v", r)
	}
}
