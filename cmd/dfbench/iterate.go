package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ringflow/ringflow/bench/iterate"
)

// iterateFlags are dfbench iterate's settings.
type iterateFlags struct {
	cfg       iterate.Config
	vertices  uint64
	edges     uint64
	seed      uint64
	input     string
	output    string
	unaligned bool
	json      bool
	noCheck   bool
}

func parseIterateFlags(args []string, stderr io.Writer) (iterateFlags, error) {
	fs := flag.NewFlagSet("dfbench iterate", flag.ContinueOnError)
	var f iterateFlags
	c := &f.cfg
	fs.Uint64Var(&f.vertices, "vertices", 100_000, "vertices of the random graph")
	fs.Uint64Var(&f.edges, "edges", 100_000, "edges of the random graph, between vertices drawn uniformly")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the random graph")
	fs.StringVar(&f.input, "input", "", `read the graph from this file instead, one edge a line: "u v" (vertex ids)`)
	fs.StringVar(&f.output, "output", "", `write every vertex's component to this file, one "vertex component" line each, by vertex`)
	fs.IntVar(&c.Parallelism, "parallelism", min(runtime.GOMAXPROCS(0), 8), "instances of every operator")
	fs.IntVar(&c.Workers, "workers", 0, "ringflow worker threads (0: all CPUs)")
	fs.DurationVar(&c.Checkpoint.Interval, "checkpoint-interval", 100*time.Millisecond, "ringflow checkpoint interval; a loop needs checkpoints")
	fs.StringVar(&c.Checkpoint.StateDir, "state-dir", "", "checkpoint store directory (default: a fresh temporary directory, removed at exit)")
	fs.BoolVar(&f.unaligned, "unaligned", false, "unaligned checkpoints")
	fs.DurationVar(&c.Checkpoint.AlignmentTimeout, "alignment-timeout", 0, "switch a checkpoint to unaligned after aligning this long (0: never)")
	fs.Uint64Var(&c.FailAfter, "fail-after", 0, "fail the loop's step once, after this many messages, and recover in place")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of a table")
	fs.BoolVar(&f.noCheck, "no-check", false, "do not compare the components with a union-find's")
	if err := parseFlags(fs, args, stderr); err != nil {
		return f, err
	}
	bad := func(format string, args ...any) (iterateFlags, error) {
		fmt.Fprintf(stderr, "dfbench iterate: "+format+"\n", args...)
		return f, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case f.input != "" && (set["vertices"] || set["edges"] || set["seed"]):
		return bad("--input %s: the graph is read from the file; drop --vertices, --edges and --seed", f.input)
	case f.input == "" && f.vertices == 0:
		return bad("--vertices 0: the graph needs at least one vertex")
	case c.Parallelism < 1:
		return bad("--parallelism %d: must be at least 1", c.Parallelism)
	case c.Checkpoint.Interval <= 0:
		return bad("--checkpoint-interval %v: must be positive: a loop's checkpoints log its back edge and detect its end", c.Checkpoint.Interval)
	case c.Checkpoint.AlignmentTimeout < 0:
		return bad("--alignment-timeout %v: must not be negative", c.Checkpoint.AlignmentTimeout)
	case f.unaligned && set["alignment-timeout"]:
		return bad("--alignment-timeout %v: --unaligned checkpoints do not align at all", c.Checkpoint.AlignmentTimeout)
	}
	c.Checkpoint.Unaligned = f.unaligned
	return f, nil
}

func runIterate(args []string, stdout, stderr io.Writer) error {
	f, err := parseIterateFlags(args, stderr)
	if err != nil {
		return err
	}
	c := f.cfg
	if f.input != "" {
		file, err := os.Open(f.input)
		if err != nil {
			return err
		}
		c.Edges, err = iterate.ReadEdges(file, f.input)
		file.Close()
		if err != nil {
			return err
		}
	} else {
		c.Edges = iterate.RandomGraph(f.vertices, f.edges, f.seed)
	}
	if c.Checkpoint.StateDir == "" {
		dir, err := os.MkdirTemp("", "dfbench-iterate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.Checkpoint.StateDir = dir
	}
	c.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := iterate.Run(context.Background(), c)
	if err != nil {
		return err
	}
	if !f.noCheck {
		if err := checkComponents(res.Labels, iterate.UnionFind(c.Edges)); err != nil {
			return err
		}
	}
	if f.output != "" {
		if err := writeComponents(f.output, res.Labels); err != nil {
			return err
		}
	}
	return printIterate(stdout, f, len(c.Edges), res)
}

// checkComponents compares the loop's components with want's.
func checkComponents(got, want map[uint64]uint64) error {
	wrong := 0
	var first string
	for v, c := range want {
		if got[v] != c {
			if wrong == 0 {
				first = fmt.Sprintf("vertex %d in component %d, want %d", v, got[v], c)
			}
			wrong++
		}
	}
	if wrong > 0 || len(got) != len(want) {
		return fmt.Errorf("%d of %d vertices in the wrong component (%s); %d labelled", wrong, len(want), first, len(got))
	}
	return nil
}

func writeComponents(path string, labels map[uint64]uint64) error {
	vs := make([]uint64, 0, len(labels))
	for v := range labels {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%d %d\n", v, labels[v])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// iterateJSON is dfbench iterate's --json output.
type iterateJSON struct {
	Vertices      int     `json:"vertices"`
	Edges         int     `json:"edges"`
	Components    int     `json:"components"`
	Seconds       float64 `json:"seconds"`
	Messages      uint64  `json:"messages"`
	MessagesPerS  float64 `json:"messages_per_sec"`
	Checkpoints   int     `json:"checkpoints"`
	FinalTriggers int     `json:"final_triggers"`
	LoopRecords   int     `json:"loop_records_logged"`
	Restarts      int     `json:"restarts"`
	Checked       bool    `json:"checked"`
}

func printIterate(w io.Writer, f iterateFlags, edges int, r iterate.Result) error {
	comps := map[uint64]bool{}
	for _, c := range r.Labels {
		comps[c] = true
	}
	j := iterateJSON{Vertices: len(r.Labels), Edges: edges, Components: len(comps), Seconds: r.Duration.Seconds(),
		Messages: r.Messages, MessagesPerS: float64(r.Messages) / r.Duration.Seconds(), Checkpoints: r.Checkpoints,
		FinalTriggers: r.FinalTriggers, LoopRecords: r.LoopRecords, Restarts: r.Restarts, Checked: !f.noCheck}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	t := newTable(w)
	fmt.Fprintln(t, "vertices\tedges\tcomponents\ttime\tmessages/s\tcheckpoints\tfinal triggers\tlogged\trestarts\t")
	fmt.Fprintf(t, "%d\t%d\t%d\t%v\t%.0f\t%d\t%d\t%d\t%d\t\n", j.Vertices, j.Edges, j.Components,
		r.Duration.Round(time.Millisecond), j.MessagesPerS, j.Checkpoints, j.FinalTriggers, j.LoopRecords, j.Restarts)
	return t.Flush()
}
