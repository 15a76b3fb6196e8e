package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPhases counts hand-made samples against hand-made trigger times.
func TestPhases(t *testing.T) {
	dir := t.TempDir()
	samples := filepath.Join(dir, "samples.csv")
	run := filepath.Join(dir, "run.json")
	// Triggers at 1s and 2s (Unix); samples 0.5ms, 3ms and 600ms after the
	// first, 0.1ms after the second, and one before any trigger.
	csv := samplesHeader + "\n" +
		"500000000,999000\n" + // before the first trigger: left out
		"1000500000,40000\n" +
		"1003000000,10000\n" +
		"1600000000,200000\n" +
		"2000100000,31000\n"
	if err := os.WriteFile(samples, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run, []byte(`{"checkpoints":{"history":[{"trigger_unix_us":2000000},{"trigger_unix_us":1000000}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := dfbench([]string{"phases", "--samples", samples, "--run", run, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rows []phaseRow
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	got := map[float64][3]int{}
	for _, r := range rows {
		if r.Samples > 0 {
			got[r.FromMs] = [3]int{r.Samples, r.Over[0], r.Over[1]}
		}
	}
	want := map[float64][3]int{0: {2, 2, 0}, 1: {1, 0, 0}, 500: {1, 1, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("phases (from ms: samples, over 30µs, over 150µs) = %v, want %v", got, want)
	}

	// A run without checkpoints is cut on a grid from the first sample.
	stdout.Reset()
	if code := dfbench([]string{"phases", "--samples", samples, "--every", "1s", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--every: exit %d: %s", code, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil || rows[0].Samples != 1 {
		t.Errorf("--every 1s: %v, first phase %+v; want the first sample alone in 0–1 ms", err, rows[0])
	}
}

func TestPhasesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	notSamples := write("x.csv", "a,b\n1,2\n")
	badLine := write("bad.csv", samplesHeader+"\n1,2\nthree,4\n")
	noCkpt := write("run.json", `{"checkpoints":null}`)
	good := write("good.csv", samplesHeader+"\n1,2\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "--samples is required"},
		{[]string{"--samples", good}, 2, "give --run"},
		{[]string{"--samples", good, "--every", "1ns"}, 2, "--every 1ns: must be at least 1ms"},
		{[]string{"--samples", good, "--every", "-1s"}, 2, "--every -1s: must be at least 1ms"},
		{[]string{"--samples", good, "--every", "1s", "--over", "fast"}, 2, `--over "fast"`},
		{[]string{"--samples", notSamples, "--every", "1s"}, 1, "not a `dfbench run --samples-out` file"},
		{[]string{"--samples", badLine, "--every", "1s"}, 1, `bad.csv:3: "three,4" is not two integers`},
		{[]string{"--samples", good, "--run", noCkpt}, 1, "no checkpoint in its history"},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"phases"}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("phases %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
