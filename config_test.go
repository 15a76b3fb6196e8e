package ringflow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/operator"
)

// TestConfigMistakes checks that Run refuses each configuration that cannot
// mean what was written, before it starts anything, with a *ConfigError
// naming the field.
func TestConfigMistakes(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	cases := []struct {
		name  string
		cfg   ringflow.Config
		field string
		want  string
	}{
		{"state dir without interval", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{StateDir: stateDir}},
			"Checkpoint.StateDir", "without an Interval"},
		{"bad mode", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{Interval: time.Second, StateDir: stateDir, Mode: 7}},
			"Checkpoint.Mode", "7: want ExactlyOnce or AtLeastOnce"},
		{"unaligned with alignment timeout", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{Interval: time.Second,
			StateDir: stateDir, Unaligned: true, AlignmentTimeout: time.Millisecond}},
			"Checkpoint.AlignmentTimeout", "with Unaligned"},
		{"interval without state dir", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{Interval: time.Second}},
			"Checkpoint.StateDir", "need a state directory"},
		{"at-least-once unaligned", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{Interval: time.Second,
			StateDir: stateDir, Mode: ringflow.AtLeastOnce, Unaligned: true}},
			"Checkpoint.Mode", "at-least-once with unaligned"},
		{"alignment timeout past the timeout", ringflow.Config{Checkpoint: ringflow.CheckpointConfig{Interval: time.Second,
			StateDir: stateDir, AlignmentTimeout: time.Minute, Timeout: time.Second}},
			"Checkpoint.AlignmentTimeout", "not below Timeout"},
		{"restarts without checkpoints", ringflow.Config{Restart: ringflow.RestartStrategy{Attempts: 2}},
			"Restart.Attempts", "without checkpoints"},
		{"ring capacity", ringflow.Config{RingCapacity: 3000}, "RingCapacity", "power of two"},
		{"negative parallelism", ringflow.Config{Parallelism: -1}, "Parallelism", "-1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var seen atomic.Int64
			job := ringflow.NewJob(c.cfg)
			ringflow.Sink(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1, 2, 3})), "sink",
				func(context.Context, int64) error { seen.Add(1); return nil })
			err := job.Run(context.Background())
			errs := ringflow.ConfigErrors(err)
			if !errors.Is(err, ringflow.ErrConfig) || len(errs) != 1 || errs[0].Field != c.field ||
				!strings.Contains(errs[0].Problem, c.want) {
				t.Fatalf("Run returned %v; want one ConfigError for %s saying %q", err, c.field, c.want)
			}
			if n := seen.Load(); n != 0 {
				t.Errorf("the sink saw %d records: the job started", n)
			}
			if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state dir: %v; want it not created", err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestConfigMistakesAllAtOnce checks that Run reports every problem of the
// configuration and of the graph in one error, each testable on its own.
func TestConfigMistakesAllAtOnce(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{BatchSize: -1, Checkpoint: ringflow.CheckpointConfig{
		StateDir: t.TempDir(), Mode: 7, Unaligned: true, AlignmentTimeout: time.Second}})
	s := ringflow.Source(job, "src", ringflow.FromSlice([]int64{1}), ringflow.Parallelism(0))
	ringflow.Sink(s, "sink", func(context.Context, int64) error { return nil })
	err := job.Run(context.Background())
	var fields []string
	for _, e := range ringflow.ConfigErrors(err) {
		fields = append(fields, e.Field)
	}
	want := []string{"BatchSize", "Checkpoint.Mode", "Checkpoint.AlignmentTimeout", "Checkpoint.StateDir"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("config errors for %v, want %v", fields, want)
	}
	if !errors.Is(err, ringflow.ErrGraph) || !strings.Contains(err.Error(), `operator "src": parallelism 0`) {
		t.Errorf("Run returned %v; want the graph error for Parallelism(0) as well", err)
	}
	t.Logf("%v", err)
}

// TestParallelismZero checks that an explicit Parallelism(0) is refused,
// naming the operator, rather than taken as the default.
func TestParallelismZero(t *testing.T) {
	job := ringflow.NewJob(ringflow.Config{Workers: 1, Parallelism: 2})
	s := ringflow.Map(ringflow.Source(job, "src", ringflow.FromSlice([]int64{1})), "double",
		func(v int64) int64 { return 2 * v }, ringflow.Parallelism(0))
	ringflow.Sink(s, "sink", func(context.Context, int64) error { return nil })
	err := job.Run(context.Background())
	if !errors.Is(err, ringflow.ErrGraph) || !strings.Contains(err.Error(), `operator "double": parallelism 0`) {
		t.Fatalf("Run returned %v; want ErrGraph naming double's parallelism 0", err)
	}
}

// TestWindowOnlyOptions checks that the options only windows have are not
// Options, so giving one to FlatMap (or any other operator) does not
// compile, and that LateRecords of the wrong type is refused at Run, naming
// the window.
func TestWindowOnlyOptions(t *testing.T) {
	for name, opt := range map[string]ringflow.WindowOption{
		"AllowedLateness": ringflow.AllowedLateness(time.Second),
		"LateRecords":     ringflow.LateRecords(func(event) {}),
		"LateOutput":      ringflow.LateOutput(ringflow.NewOutputTag[event]("late")),
	} {
		if _, ok := opt.(ringflow.Option); ok {
			t.Errorf("%s is an Option: FlatMap and the other operators would take it and ignore it", name)
		}
	}
	if _, ok := any(ringflow.Parallelism(2)).(ringflow.WindowOption); !ok {
		t.Errorf("Parallelism is not a WindowOption: Window cannot take it")
	}

	job := ringflow.NewJob(ringflow.Config{Workers: 1})
	s := ringflow.SourceWithEventTime(job, "src", ringflow.FromSlice([]event{{}}), eventTime())
	w := ringflow.Window(ringflow.KeyBy(s, func(e event) uint64 { return e.Key }), "win",
		ringflow.TumblingWindows(time.Second), valueSum{}, ringflow.Parallelism(1),
		ringflow.LateRecords(func(string) {}))
	ringflow.Sink(w, "sink", func(context.Context, ringflow.WindowResult[uint64, int64]) error { return nil })
	err := job.Run(context.Background())
	errs := ringflow.ConfigErrors(err)
	if len(errs) != 1 || errs[0].Operator != "win" || errs[0].Field != "LateRecords" {
		t.Fatalf("Run returned %v; want a ConfigError for win's LateRecords", err)
	}
	if !errors.Is(err, ringflow.ErrTypeMismatch) || !errors.Is(err, ringflow.ErrConfig) {
		t.Errorf("Run returned %v; want it to be ErrConfig and ErrTypeMismatch", err)
	}
}

// TestCrossJobStreams checks that combining streams of two jobs fails both
// jobs' Run at once with a graph error naming the operators of both, where
// it used to make Run wait forever for input that never came.
func TestCrossJobStreams(t *testing.T) {
	build := func(combine func(a, b ringflow.Stream[event], ja *ringflow.Job)) (*ringflow.Job, *ringflow.Job) {
		ja := ringflow.NewJob(ringflow.Config{Workers: 1})
		jb := ringflow.NewJob(ringflow.Config{Workers: 1})
		a := ringflow.SourceWithEventTime(ja, "src-a", ringflow.FromSlice([]event{{Key: 1}}), eventTime())
		b := ringflow.SourceWithEventTime(jb, "src-b", ringflow.FromSlice([]event{{Key: 2}}), eventTime())
		ringflow.Sink(b, "sink-b", func(context.Context, event) error { return nil })
		combine(a, b, ja)
		return ja, jb
	}
	key := func(e event) uint64 { return e.Key }
	for _, c := range []struct {
		name    string
		combine func(a, b ringflow.Stream[event], ja *ringflow.Job)
		want    string
	}{
		{"union", func(a, b ringflow.Stream[event], ja *ringflow.Job) {
			ringflow.Sink(ringflow.Union(a, b), "sink-a", func(context.Context, event) error { return nil })
		}, `Union: the stream of "src-a" and the stream of "src-b" belong to different jobs`},
		{"window join", func(a, b ringflow.Stream[event], ja *ringflow.Job) {
			j := ringflow.WindowJoin(ringflow.KeyBy(a, key), ringflow.KeyBy(b, key), "join",
				ringflow.TumblingWindows(time.Second), func(l, r event) event { return l })
			ringflow.Sink(j, "sink-a", func(context.Context, event) error { return nil })
		}, `window join "join": the stream of "src-a" and the stream of "src-b" belong to different jobs`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ja, jb := build(c.combine)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, j := range []*ringflow.Job{ja, jb} {
				err := j.Run(ctx)
				if !errors.Is(err, ringflow.ErrForeignStream) || !strings.Contains(err.Error(), c.want) ||
					!strings.Contains(err.Error(), `the job of "src-a"`) || !strings.Contains(err.Error(), `the job of "src-b"`) {
					t.Fatalf("Run returned %v; want ErrForeignStream saying %s and naming both jobs", err, c.want)
				}
			}
		})
	}
}

// TestSinkOptions checks that WithCodec, which sets how an operator's
// output is encoded, is not a SinkOption, so giving it to a sink (which has
// no output) does not compile, while Parallelism fits sinks and every other
// operator.
func TestSinkOptions(t *testing.T) {
	codec, err := operator.CodecFor[int64]()
	if err != nil {
		t.Fatal(err)
	}
	withCodec := any(ringflow.WithCodec(codec))
	if _, ok := withCodec.(ringflow.SinkOption); ok {
		t.Errorf("WithCodec is a SinkOption: Sink would take it and have no output to use it on")
	}
	if _, ok := withCodec.(ringflow.Option); !ok {
		t.Errorf("WithCodec is not an Option: Map and the sources cannot take it")
	}
	if _, ok := withCodec.(ringflow.WindowOption); !ok {
		t.Errorf("WithCodec is not a WindowOption: Window cannot take it")
	}
	par := any(ringflow.Parallelism(2))
	for name, ok := range map[string]bool{
		"Option":       is[ringflow.Option](par),
		"WindowOption": is[ringflow.WindowOption](par),
		"SinkOption":   is[ringflow.SinkOption](par),
	} {
		if !ok {
			t.Errorf("Parallelism is not a %s", name)
		}
	}
}

// is reports whether v implements I.
func is[I any](v any) bool {
	_, ok := v.(I)
	return ok
}
