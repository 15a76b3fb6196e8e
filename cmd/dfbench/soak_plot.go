package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringflow/ringflow/bench/soak"
)

// plotOptions are the marks --plot draws: the warm-up's end and the
// soak's bounds.
func plotOptions(f soakFlags) soak.PlotOptions {
	return soak.PlotOptions{Warmup: f.warmup, RSSBoundPct: f.bounds.MaxRSSGrowthPct, DurationBound: f.plotBound}
}

// checkPlotFlags reports the plot's flags that make no sense, in the
// flags' words.
func checkPlotFlags(f *soakFlags) error {
	switch {
	case f.replot != "" && f.plot == "":
		return fmt.Errorf("--replot %s: needs --plot FILE to draw to", f.replot)
	case f.replot != "" && f.csv != "":
		return fmt.Errorf("--replot with --csv %s: a replot runs no soak, so it writes no CSV", f.csv)
	case f.replot != "" && f.warmup < 0:
		return fmt.Errorf("--warmup %v: must be at least 0", f.warmup)
	case f.plotBound != 0 && (f.plot == "" || f.plotBound < 0):
		return fmt.Errorf("--plot-duration-bound %v: must be positive, with --plot", f.plotBound)
	case f.plot == "":
		return nil
	}
	switch strings.ToLower(filepath.Ext(f.plot)) {
	case ".svg":
	case ".png":
		if _, err := exec.LookPath("rsvg-convert"); err != nil {
			return fmt.Errorf("--plot %s: a PNG is converted from the SVG by rsvg-convert, which is not on PATH; a .svg file needs nothing", f.plot)
		}
	default:
		return fmt.Errorf("--plot %s: want FILE.svg, or FILE.png (converted by rsvg-convert)", f.plot)
	}
	for _, in := range []struct{ flag, file string }{{"--csv", f.csv}, {"--replot", f.replot}} {
		if in.file != "" && samePath(f.plot, in.file) {
			return fmt.Errorf("--plot %s: the file of %s too", f.plot, in.flag)
		}
	}
	return nil
}

// samePath reports whether paths a and b name the same file.
func samePath(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// replot draws --plot from the samples of the --replot CSV, with the
// warm-up of a soak as long as they are unless --warmup says otherwise.
func replot(f soakFlags) error {
	in, err := os.Open(f.replot)
	if err != nil {
		return fmt.Errorf("--replot: %w", err)
	}
	defer in.Close()
	samples, err := soak.ReadCSV(in)
	if err != nil {
		return fmt.Errorf("--replot %s: %w", f.replot, err)
	}
	if f.warmup == 0 && len(samples) > 0 {
		f.warmup = defaultWarmup(samples[len(samples)-1].At).Round(time.Second)
	}
	return writePlot(f.plot, samples, "dfbench soak: the samples of "+filepath.Base(f.replot), plotOptions(f))
}

// writePlot draws samples to file: an SVG, or a PNG that rsvg-convert
// converts it to.
func writePlot(file string, samples []soak.Sample, title string, opts soak.PlotOptions) error {
	var svg bytes.Buffer
	if err := soak.PlotSVG(&svg, samples, title, opts); err != nil {
		return fmt.Errorf("--plot %s: %w", file, err)
	}
	if !strings.EqualFold(filepath.Ext(file), ".png") {
		if err := os.WriteFile(file, svg.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		return nil
	}
	cmd := exec.Command("rsvg-convert", "--output", file)
	cmd.Stdin = &svg
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("--plot %s: rsvg-convert: %v: %s", file, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
