package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompareFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"--pipeline", "passthrough"}, `pipeline "passthrough"`},
		{[]string{"--skew", "1.5"}, "skew 1.5"},
		{[]string{"--skew", "x"}, "invalid value"},
		{[]string{"--slow-sink", "-1us"}, "slow sink"},
		{[]string{"--checkpoint-interval", "0s"}, "checkpoint interval 0s"},
		{[]string{"--alignment-timeout", "0s"}, "alignment timeout 0s"},
		{[]string{"--duration", "0s"}, "duration 0s"},
		{[]string{"--modes", "aligned,fast"}, `mode "fast"`},
		{[]string{"--ring-capacity", "1000"}, "ring capacity 1000"},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		var out, errb bytes.Buffer
		code := dfbench(append([]string{"compare"}, c.args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestCompareJSON checks the --json shape, and the --report page, on tiny
// runs.
func TestCompareJSON(t *testing.T) {
	var out, errb bytes.Buffer
	report := filepath.Join(t.TempDir(), "report.html")
	code := dfbench([]string{"compare", "--pipeline", "keyed-count", "--skew", "0.5", "--slow-sink", "1us",
		"--checkpoint-interval", "20ms", "--duration", "500ms", "--keys", "100", "--json", "--report", report}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Pipeline string                       `json:"pipeline"`
		Modes    []map[string]json.RawMessage `json:"modes"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Pipeline != "keyed-count" || len(r.Modes) != 3 {
		t.Fatalf("pipeline %q, %d modes; want keyed-count, 3: %s", r.Pipeline, len(r.Modes), out.String())
	}
	// NB: on a loaded machine a mode's half second may complete no
	// checkpoint but the final one; its report then says so instead of
	// showing a slowest checkpoint.
	modes := []string{"aligned", "unaligned", "timeout"}
	noSlowest := map[string]bool{}
	for i, name := range modes {
		m := r.Modes[i]
		var mode string
		if err := json.Unmarshal(m["mode"], &mode); err != nil || mode != name {
			t.Errorf("mode %d: %s, want %q", i, m["mode"], name)
		}
		var completed int
		if err := json.Unmarshal(m["checkpoints_completed"], &completed); err != nil {
			t.Errorf("%s: checkpoints_completed = %s: %v", name, m["checkpoints_completed"], err)
		}
		if completed <= 1 {
			t.Logf("%s: %d checkpoints completed", name, completed)
			noSlowest[name] = true
		}
		for _, k := range []string{"records_per_sec", "inflight_bytes", "checkpoint_bytes", "restore_ms"} {
			var v float64
			if err := json.Unmarshal(m[k], &v); err != nil {
				t.Errorf("%s: %s = %s: %v", name, k, m[k], err)
			}
		}
		for _, k := range []string{"checkpoint_ms", "alignment_ms"} {
			var q map[string]float64
			if err := json.Unmarshal(m[k], &q); err != nil || len(q) != 3 {
				t.Errorf("%s: %s = %s, want {p50, p99, max}", name, k, m[k])
			}
			for _, p := range []string{"p50", "p99", "max"} {
				if _, ok := q[p]; !ok {
					t.Errorf("%s: %s lacks %s", name, k, p)
				}
			}
		}
	}
	checkReport(t, report, modes, noSlowest)
}

// checkReport checks the HTML report at path: both duration charts, a
// timeline (or, for the modes in noSlowest, the note that no checkpoint
// completed) and a profile table for each mode, and nothing that would
// make a browser fetch or run anything.
func checkReport(t *testing.T, path string, modes []string, noSlowest map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	want := []string{`<svg id="durations-cdf"`, `<svg id="durations-time"`}
	for _, m := range modes {
		want = append(want, `<h2 id="mode-`+m+`">`)
		if !noSlowest[m] {
			want = append(want, `<svg id="timeline-`+m+`"`)
		} else if _, section, _ := strings.Cut(page, `<h2 id="mode-`+m+`">`); !strings.Contains(
			strings.SplitN(section, "<h2", 2)[0], "No checkpoint completed.") {
			t.Errorf("the report of %s, which completed no checkpoint but the final one, does not say so", m)
		}
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the report lacks %s", w)
		}
	}
	if n := strings.Count(page, `<table class="frames">`); n != len(modes) {
		t.Errorf("%d profile tables, want one per mode (%d)", n, len(modes))
	}
	for _, bad := range []string{"<script", "<link", " src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the report has %q: it must be self-contained", bad)
		}
	}
}
