package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeWhile runs dfbench with args (which serve metrics at addr) and
// scrapes addr/metrics until every pattern matches, failing t if the
// command ends first or fails.
func scrapeWhile(t *testing.T, addr string, args []string, patterns ...string) {
	t.Helper()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { done <- dfbench(args, io.Discard, &stderr) }()
	var page string
	for matched := false; !matched; {
		select {
		case code := <-done:
			t.Fatalf("%s ended (exit %d, %s) before /metrics matched %q:\n%s", args[0], code, stderr.String(), patterns, page)
		default:
		}
		time.Sleep(20 * time.Millisecond) // NB: a poll, not a bound: the run takes the cores
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // not listening yet, or the server is gone
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		matched = true
		for _, p := range patterns {
			matched = matched && regexp.MustCompile(p).MatchString(page)
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("%s: exit %d: %s", args[0], code, stderr.String())
	}
}

// TestServesMetrics: while `dfbench run|compare|nexmark --http ADDR` runs
// (and --http-linger after), ADDR/metrics serves the job's Prometheus
// metrics; a bad address fails before the run.
func TestServesMetrics(t *testing.T) {
	addr := freeAddr(t)
	scrapeWhile(t, addr, []string{"run", "--pipeline", "keyed-count", "--keys", "1000", "--duration", "3s",
		"--checkpoint-interval", "100ms", "--json", "--http", addr},
		`ringflow_records_in_total\{operator="count",subtask="0"\} [1-9]`,
		`ringflow_checkpoint_duration_seconds_bucket`,
		`ringflow_channel_queued_bytes\{from="source#0",to="count#1"\}`,
		`ringflow_busy_seconds_total\{operator="count",subtask="1"\} `)

	addr = freeAddr(t)
	scrapeWhile(t, addr, []string{"nexmark", "--query", "q1", "--events", "200000", "--http", addr, "--http-linger", "2s"},
		`ringflow_records_out_total\{operator="[^"]+",subtask="0"\} [1-9]`)

	addr = freeAddr(t)
	scrapeWhile(t, addr, []string{"compare", "--pipeline", "keyed-count", "--modes", "unaligned", "--duration", "500ms",
		"--checkpoint-interval", "50ms", "--json", "--http", addr, "--http-linger", "2s"},
		`ringflow_checkpoints_total\{result="completed"\} [1-9]`)

	var stderr bytes.Buffer
	if code := dfbench([]string{"run", "--pipeline", "keyed-count", "--records", "1000", "--http", "nowhere:-1"},
		io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "--http") {
		t.Errorf("a bad --http address: exit %d, %q; want a failure naming --http", code, stderr.String())
	}
}
