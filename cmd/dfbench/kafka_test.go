package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestKafka runs keyed-count from a kfake topic to a transactional Kafka
// sink: every record comes out counted once, the final checkpoint
// commits the last transactions, and the CPU shares cover the profile.
func TestKafka(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"kafka", "--records", "30000", "--keys", "100", "--partitions", "4",
		"--checkpoint-interval", "50ms", "--json"}
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("dfbench %v: exit %d\n%s", args, code, stderr.String())
	}
	var r kafkaResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	t.Logf("%+v", r)
	if r.Output != 30000 || !r.ExactlyOnce || r.RecordsPerS <= 0 {
		t.Errorf("got %d records out, exactly once %v, %.0f records/s: want 30000, true and a rate",
			r.Output, r.ExactlyOnce, r.RecordsPerS)
	}
	if c := r.Checkpoints; c == nil || c.Completed < 1 || !c.Final || c.Failed > 0 {
		t.Errorf("checkpoints %+v: want the final one completed and none failed", c)
	}
	if c := r.CPU; c == nil {
		t.Error("no CPU shares")
	} else if sum := c.Broker + c.Client + c.Connector + c.GC + c.Engine; c.Samples > 0 && math.Abs(sum-1) > 1e-9 {
		t.Errorf("CPU shares %+v sum to %v, want 1", c, sum)
	}
}

func TestKafkaFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--records", "0"}, "--records 0"},
		{[]string{"--keys", "0"}, "--keys 0"},
		{[]string{"--partitions", "0"}, "--partitions 0"},
		{[]string{"--parallelism", "0"}, "--parallelism 0"},
		{[]string{"--checkpoint-interval", "0s"}, "--checkpoint-interval 0s"},
		{[]string{"--no-profile", "--cpuprofile", "x"}, "--cpuprofile needs the profile"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"kafka"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("kafka %v: exit %d, stderr %q, stdout %q; want exit 2 and %q",
				tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// TestClassifyStack checks which part of the program a stack counts for:
// the broker before the client it shares packages with, the client
// before the connector that calls it.
func TestClassifyStack(t *testing.T) {
	stack := func(names ...string) []*profile.Location {
		var locs []*profile.Location
		for _, n := range names {
			locs = append(locs, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: n}}}})
		}
		return locs
	}
	for _, tc := range []struct {
		stack []string
		want  string
	}{
		{[]string{"github.com/twmb/franz-go/pkg/kmsg.(*FetchResponse).AppendTo", "github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"}, "broker"},
		{[]string{"runtime.memmove", "github.com/twmb/franz-go/pkg/kgo.(*Client).Produce", "github.com/ringflow/ringflow/kafka.(*sink[...]).Write"}, "client"},
		{[]string{"main.encodeCountRec", "github.com/ringflow/ringflow/kafka.(*sink[...]).Write", "github.com/ringflow/ringflow/internal/operator.(*Task).step"}, "connector"},
		{[]string{"runtime.scanObject", "runtime.gcBgMarkWorker"}, "gc"},
		{[]string{"runtime.scanObject", "runtime.gcAssistAlloc", "github.com/ringflow/ringflow/internal/operator.(*Task).step"}, "engine"},
	} {
		if got := classifyStack(stack(tc.stack...)); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.stack, got, tc.want)
		}
	}
}
