package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRunFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline", "nope"}, `unknown pipeline "nope"`},
		{[]string{"--records", "10", "--duration", "1s"}, "set exactly one"},
		{[]string{"--parallelism", "0"}, "--parallelism 0"},
		{[]string{"--parallelism", "200"}, "parallelism 200"},
		{[]string{"--keys", "0"}, "--keys 0"},
		{[]string{"--rate", "-1"}, "rate -1"},
		{[]string{"--baseline", "rust"}, `--baseline "rust"`},
		{[]string{"--duration", "-1s"}, "--duration -1s"},
		{[]string{"--records", "x"}, `invalid value "x" for flag -records`},
		{[]string{"--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--checkpoint-interval", "-1s"}, "--checkpoint-interval -1s"},
		{[]string{"--sink-dir", "out"}, "--sink-dir out: the transactional file sink commits on checkpoints"},
		{[]string{"--fail-after", "5"}, "--fail-after 5: recovery needs checkpoints"},
		{[]string{"--state-dir", "st"}, "--state-dir st: without --checkpoint-interval"},
		{[]string{"--mode", "twice"}, `--mode "twice"`},
		{[]string{"--keys", "10", "--hot-keys", "11"}, "--hot-keys 11"},
		{[]string{"--sample-every", "100"}, "--sample-every 100: must be a power of two"},
		{[]string{"--sample-every", "0"}, "--sample-every 0: must be a power of two"},
		{[]string{"--checkpoint-windows", "-1s"}, "--checkpoint-windows -1s: must not be negative"},
		{[]string{"--checkpoint-windows", "10s"}, "--checkpoint-windows 10s: alternates checkpoints on and off; set --checkpoint-interval"},
		{[]string{"--checkpoint-windows", "1s", "--checkpoint-interval", "1s"}, "--checkpoint-windows 1s: must be at least two --checkpoint-interval (2s)"},
	} {
		var stdout, stderr bytes.Buffer
		code := dfbench(append([]string{"run"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("run %v: exit %d, stderr %q, stdout %q; want exit 2 and %q",
				tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// TestRunJSON checks the --json object's shape: exactly the keys issue 3
// lists, with the baseline only when asked for, and the ones added since
// (checkpoints, cpu_seconds, workers).
func TestRunJSON(t *testing.T) {
	top := []string{"checkpoints", "cpu_seconds", "latency_us", "pipeline", "records", "records_per_sec", "seconds", "stalls", "workers"}
	for _, base := range []bool{false, true} {
		args := []string{"run", "--pipeline", "window", "--records", "5000", "--keys", "50", "--json"}
		want := top
		if base {
			args = append(args, "--baseline", "chan")
			want = append(slices.Clone(top), "baseline")
			slices.Sort(want)
		}
		var stdout, stderr bytes.Buffer
		if code := dfbench(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		var obj map[string]any
		dec := json.NewDecoder(&stdout)
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("%v: %v in %q", args, err, stdout.String())
		}
		if dec.More() {
			t.Errorf("%v: more than one JSON value", args)
		}
		if got := sortedKeys(obj); !reflect.DeepEqual(got, want) {
			t.Errorf("%v: keys %v, want %v", args, got, want)
		}
		if obj["pipeline"] != "window" || obj["records"] != 5000.0 || obj["records_per_sec"].(float64) <= 0 || obj["checkpoints"] != nil {
			t.Errorf("%v: %v", args, obj)
		}
		lat := obj["latency_us"].(map[string]any)
		if got := sortedKeys(lat); !reflect.DeepEqual(got, []string{"p50", "p99", "p999"}) {
			t.Errorf("latency_us keys %v", got)
		}
		if base {
			b := obj["baseline"].(map[string]any)
			if got := sortedKeys(b); !reflect.DeepEqual(got, []string{"latency_us", "records_per_sec"}) {
				t.Errorf("baseline keys %v", got)
			}
		}
	}
}

func TestRunTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--pipeline", "join", "--records", "4000", "--keys", "100", "--parallelism", "2", "--baseline", "chan"}
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"ringflow", "chan", "ringflow ÷ chan", "outputs: identical", "checkpoints: off"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestRunSamplesOut checks that --samples-out writes a CSV of the run's
// latency samples in generation order, and that a path it cannot create
// fails the command naming the flag, before the run.
func TestRunSamplesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "samples.csv")
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--pipeline", "keyed-count", "--records", "100000", "--keys", "100", "--samples-out", path}
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != "gen_unix_ns,latency_ns" || len(lines) < 2 {
		t.Fatalf("samples file starts %q and has %d lines", lines[0], len(lines))
	}
	var prev int64
	for i, l := range lines[1:] {
		var gen, lat int64
		if n, err := fmt.Sscanf(l, "%d,%d", &gen, &lat); n != 2 || err != nil || gen < prev || lat < 0 {
			t.Fatalf("line %d %q: %d fields (%v), or out of order or negative", i+2, l, n, err)
		}
		prev = gen
	}

	stdout.Reset()
	stderr.Reset()
	bad := filepath.Join(t.TempDir(), "no-such-dir", "samples.csv")
	args = []string{"run", "--pipeline", "keyed-count", "--records", "100000", "--samples-out", bad}
	if code := dfbench(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "--samples-out") {
		t.Errorf("%v: exit %d, stderr %q; want a failure naming --samples-out", args, code, stderr.String())
	}
}
