package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ringflow/ringflow/bench/hiccups"
)

func runHiccups(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dfbench hiccups", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "how long each CPU's thread measures")
	threshold := fs.Duration("threshold", 20*time.Microsecond, "the shortest gap counted")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *duration <= 0 || *threshold <= 0 {
		fmt.Fprintf(stderr, "--duration and --threshold must be positive (got %v, %v)\n", *duration, *threshold)
		return errUsage
	}
	res, err := hiccups.Run(hiccups.Config{Duration: *duration, Threshold: *threshold})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "dfbench hiccups: a pinned thread per CPU reads its clocks for %v; gaps of %v or more\n\n", *duration, *threshold)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "cpu\tkind\tgaps/s\tover 100µs/s\tshare of time\tlongest\t")
	for _, c := range res.CPUs {
		secs := c.Elapsed.Seconds()
		for _, k := range []struct {
			name string
			g    hiccups.Gaps
		}{{"off cpu", c.Off}, {"on cpu", c.On}} {
			fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.2f%%\t%v\t\n", c.CPU, k.name, float64(k.g.Count)/secs,
				float64(k.g.Over100us)/secs, 100*k.g.Total.Seconds()/secs, k.g.Max.Round(time.Microsecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	steal := "unknown"
	if res.Steal >= 0 {
		steal = res.Steal.String()
	}
	fmt.Fprintf(stdout, "\nsteal counted by the kernel on all CPUs: %s\n", steal)
	fmt.Fprintln(stdout, "off cpu: the kernel (or the host, where it counts steal) ran something else; on cpu: the thread's clock counted the gap, but it did not run (interrupts, or the host's own work on a virtual CPU)")
	return nil
}
