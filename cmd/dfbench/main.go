// Command dfbench measures ringflow: the ring transport against Go channels,
// and (in later subcommands) whole pipelines.
//
//	dfbench ring [--record-bytes 16] [--batch 256] [--records 100000000] [--json]
//	dfbench run [--pipeline keyed-count] [--records N | --duration D] [--parallelism P]
//	            [--workers W] [--keys K] [--rate R] [--baseline chan] [--json] [--cpuprofile FILE]
//	            [--checkpoint-interval D] [--samples-out FILE]
//	dfbench phases --samples FILE (--run FILE | --every D) [--over 30us,150us] [--json]
//	dfbench soak [--pipeline keyed-count] [--duration D] [--rate R] [--keys K] [--checkpoint-interval D]
//	            [--fail-every D] [--kill-every D] [--csv FILE] [--json] [--max-rss-growth P]
//	            [--max-failed-checkpoints N] [--sink-keep N] [--plot FILE.svg|FILE.png]
//	            [--plot-duration-bound D]
//	dfbench soak --replot CSV --plot FILE.svg|FILE.png [--warmup D] [--max-rss-growth P]
//	            [--plot-duration-bound D]
//	dfbench nexmark [--query q0|q1|q2|q3|q5|q7|q8|q11|all] [--events N] [--rate R] [--parallelism P]
//	            [--workers W] [--checkpoint-interval D] [--output FILE] [--dump FILE]
//	            [--baseline chan] [--json] [--cpuprofile FILE]
//	dfbench iterate [--vertices N --edges M --seed S | --input FILE] [--output FILE] [--parallelism P]
//	            [--workers W] [--checkpoint-interval D] [--state-dir DIR] [--unaligned | --alignment-timeout D]
//	            [--fail-after N] [--no-check] [--json]
//	dfbench cluster [--processes N] [--parallelism P] [--partitions P] [--records N] [--keys K] [--rate R]
//	            [--checkpoint-interval D] [--timeout D] [--json]
//	dfbench cluster --query q0|q1|q2|q3|q5|q7|q8|q11 [--events N] [--rate R] [--processes N] [--parallelism P]
//	            [--partitions P] [--checkpoint-interval D] [--timeout D] [--json]
//	dfbench hiccups [--duration 5s] [--threshold 20us] [--json]
//	dfbench kafka [--records N] [--keys K] [--partitions P] [--parallelism P] [--checkpoint-interval D]
//	            [--no-profile | --cpuprofile FILE] [--json]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// command is one dfbench subcommand.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"ring":    {"move records through a ring and through Go channels", runRing},
	"nexmark": {"run Nexmark queries on ringflow: throughput, cores, output", runNexmark},
	"compare": {"aligned vs unaligned vs timeout checkpoints under backpressure, with stall profiles", runCompare},
	"run":     {"run a pipeline on ringflow (and a channel baseline): throughput, latency", runRun},
	"phases":  {"count a run's slow samples by time since the last checkpoint trigger", runPhases},
	"soak":    {"run a pipeline for long, with failures and kills: memory, disk, checkpoints over time", runSoak},
	"iterate": {"connected components by label propagation in a loop: checkpoints of a cyclic job", runIterate},
	"cluster": {"keyed-count or a Nexmark query as a job of several processes joined by Kafka (kfake): throughput per process, latency, output against one process", runCluster},
	"hiccups": {"how often the machine takes a CPU from a thread that only wants to run: the floor under latency figures", runHiccups},
	"kafka":   {"keyed-count from a Kafka topic to a transactional Kafka sink (kfake): throughput, checkpoints, CPU by part", runKafka},
}

// errUsage marks errors for which the usage text has already been printed.
var errUsage = errors.New("usage")

func main() {
	os.Exit(dfbench(os.Args[1:], os.Stdout, os.Stderr))
}

func dfbench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "dfbench: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "dfbench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: dfbench <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'dfbench <command> -h' for the command's flags.")
}

// parseFlags parses args into fs, turning a bad flag or a stray argument into
// errUsage (the flag package has already said what was wrong).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	return nil
}

// tableFlags are the flags of every table dfbench prints; a test adds
// tabwriter.Debug to see where each cell ends.
var tableFlags uint = tabwriter.AlignRight

// newTable returns the writer of a table: cells end with a tab, rows with
// a newline, and every row has as many cells as the header.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', tableFlags) }
