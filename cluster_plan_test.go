package ringflow_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/keygroups"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected plans in testdata/cluster/*.txt")

type planClick struct {
	User, Page int64
	TsMs       int64
}

type planCount struct{}

func (planCount) Create() int64                  { return 0 }
func (planCount) Add(a int64, _ planClick) int64 { return a + 1 }
func (planCount) Result(a int64) int64           { return a }
func (planCount) Merge(a, b int64) int64         { return a + b }

type planSum struct{}

func (planSum) Create() int64                                            { return 0 }
func (planSum) Add(a int64, r ringflow.WindowResult[int64, int64]) int64 { return a + r.Value }
func (planSum) Result(a int64) int64                                     { return a }
func (planSum) Merge(a, b int64) int64                                   { return a + b }

// clusterJob is a job with two keyed exchanges, an operator chained
// before the first and a side branch after the source.
func clusterJob(c *ringflow.Cluster) *ringflow.Job { return clusterJobFrom(c, "") }

// clusterJobFrom is clusterJob with Config.RestoreFrom.
func clusterJobFrom(c *ringflow.Cluster, restoreFrom string) *ringflow.Job {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Cluster: c, RestoreFrom: restoreFrom,
		Checkpoint: ringflow.CheckpointConfig{Interval: time.Second, StateDir: "/nonexistent"}})
	src := ringflow.SourceWithEventTime(job, "clicks", ringflow.FromSlice([]planClick{{1, 2, 3}}),
		ringflow.WatermarkStrategy[planClick]{Timestamp: func(c planClick) int64 { return c.TsMs }})
	valid := ringflow.Filter(src, "valid", func(c planClick) bool { return c.User > 0 })
	perUser := ringflow.Window(ringflow.KeyBy(valid, func(c planClick) int64 { return c.User }), "per-user",
		ringflow.TumblingWindows(time.Minute), planCount{})
	perBucket := ringflow.Window(ringflow.KeyBy(perUser, func(r ringflow.WindowResult[int64, int64]) int64 { return r.Key % 10 }),
		"per-bucket", ringflow.TumblingWindows(time.Minute), planSum{})
	ringflow.Sink(perBucket, "out", func(context.Context, ringflow.WindowResult[int64, int64]) error { return nil })
	ringflow.Sink(src, "audit", func(context.Context, planClick) error { return nil })
	return job
}

// TestClusterPlan compares the plans of clusterJob at a few sizes with
// testdata/cluster/*.txt, and checks what every plan must hold: each key
// group in exactly one partition, each partition owned by exactly one
// process.
func TestClusterPlan(t *testing.T) {
	var b strings.Builder
	for _, size := range []struct{ processes, partitions int }{{3, 12}, {2, 0}, {4, 12}, {3, 3}} {
		c := &ringflow.Cluster{JobID: "clicks", Processes: size.processes, Partitions: size.partitions}
		p, err := clusterJob(c).ClusterPlan()
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, p)
		fmt.Fprintf(&b, "# %d processes, Partitions %d\n%s\n", size.processes, size.partitions, p)
	}
	golden(t, filepath.Join("testdata", "cluster", "plan.txt"), b.String())
}

func checkPlan(t *testing.T, p *ringflow.ClusterPlan) {
	t.Helper()
	owner := make([]int, p.Partitions)
	for i := range owner {
		owner[i] = -1
	}
	for proc := range p.Processes {
		r := p.Owned(proc)
		for q := r.Start; q < r.End; q++ {
			if owner[q] != -1 {
				t.Fatalf("partition %d owned by processes %d and %d", q, owner[q], proc)
			}
			owner[q] = proc
		}
	}
	for q, o := range owner {
		if o == -1 {
			t.Fatalf("partition %d has no owner", q)
		}
	}
	for kg := range p.MaxParallelism {
		q := p.PartitionOf(kg)
		if !p.KeyGroups(q).Contains(kg) {
			t.Fatalf("key group %d: partition %d, whose key groups are %v", kg, q, p.KeyGroups(q))
		}
		if want := keygroups.SubtaskOf(kg, p.Partitions, p.MaxParallelism); q != want {
			t.Fatalf("key group %d in partition %d, want %d", kg, q, want)
		}
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (run with -rewrite to update it); got:\n%s", path, got)
	}
}

// TestClusterConfigErrors checks that Run names what is wrong with a
// Cluster before it starts anything.
func TestClusterConfigErrors(t *testing.T) {
	err := clusterJob(&ringflow.Cluster{Process: 3, Processes: 3, Partitions: 1000}).Run(t.Context())
	if !errors.Is(err, ringflow.ErrCluster) {
		t.Fatalf("got %v, want an ErrCluster", err)
	}
	for _, field := range []string{"Cluster.JobID", "Cluster.Process", "Cluster.Partitions", "Cluster.Exchange"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
	// A rescaled start names every old process's savepoint, and only in
	// Cluster.RestoreFrom.
	err = clusterJobFrom(&ringflow.Cluster{JobID: "j", Processes: 2, RestoreFrom: []string{"a", ""}}, "b").Run(t.Context())
	for _, want := range []string{"Cluster.RestoreFrom: entry 1 is empty", "Cluster.RestoreFrom: set together with Config.RestoreFrom"} {
		if !errors.Is(err, ringflow.ErrCluster) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an ErrCluster saying %q", err, want)
		}
	}
	if _, err := ringflow.NewJob(ringflow.Config{}).ClusterPlan(); !errors.Is(err, ringflow.ErrCluster) {
		t.Fatalf("ClusterPlan without a Cluster: got %v, want an ErrCluster", err)
	}
}
