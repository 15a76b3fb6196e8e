package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/ringflow/ringflow/bench/ringbench"
)

func runRing(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dfbench ring", flag.ContinueOnError)
	size := fs.Int("record-bytes", 16, "record size in bytes: 8, 16, 32, 64, 128 or 256")
	batch := fs.Int("batch", 256, "records per ring frame and per channel batch")
	records := fs.Uint64("records", 100_000_000, "records to move through each transport")
	capacity := fs.Int("capacity", 1<<20, "ring capacity in bytes (a power of two)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	cfg := ringbench.Config{RecordBytes: *size, Batch: *batch, Records: *records, Capacity: *capacity}
	res, err := ringbench.Run(cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Bench       string             `json:"bench"`
			RecordBytes int                `json:"record_bytes"`
			Batch       int                `json:"batch"`
			Records     uint64             `json:"records"`
			Results     []ringbench.Result `json:"results"`
		}{"ring", *size, *batch, *records, res})
	}
	fmt.Fprintf(stdout, "ring benchmark: %d records of %d bytes, batch %d\n\n", *records, *size, *batch)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "transport\trecords/s\tMB/s\tallocs/record\tseconds\tring ÷ this\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%.1fM\t%.0f\t%.4f\t%.2f\t%.2f×\t\n", r.Name, r.RecordsPerSec/1e6,
			r.BytesPerSec/1e6, r.AllocsPerRecord, r.Seconds, res[0].RecordsPerSec/r.RecordsPerSec)
	}
	return tw.Flush()
}
