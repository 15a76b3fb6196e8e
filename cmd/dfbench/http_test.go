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

// TestRunServesMetrics: while `dfbench run --http ADDR` runs, ADDR/metrics
// serves the job's Prometheus metrics, with records counted on the keyed
// operator; a bad address fails before the run.
func TestRunServesMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		done <- dfbench([]string{"run", "--pipeline", "keyed-count", "--keys", "1000", "--duration", "3s",
			"--checkpoint-interval", "100ms", "--json", "--http", addr}, io.Discard, &stderr)
	}()
	counted := regexp.MustCompile(`ringflow_records_in_total\{operator="count",subtask="0"\} [1-9]`)
	var page string
	for {
		select {
		case code := <-done:
			t.Fatalf("the run ended (exit %d, %s) before /metrics showed records counted on count:\n%s",
				code, stderr.String(), page)
		default:
		}
		time.Sleep(20 * time.Millisecond) // NB: a poll, not a bound: the run takes the cores
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // not listening yet
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		if counted.MatchString(page) && strings.Contains(page, "ringflow_checkpoint_duration_seconds_bucket") &&
			strings.Contains(page, `ringflow_channel_queued_bytes{from="source#0",to="count#1"}`) {
			break
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}

	stderr.Reset()
	if code := dfbench([]string{"run", "--pipeline", "keyed-count", "--records", "1000", "--http", "nowhere:-1"},
		io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "--http") {
		t.Errorf("a bad --http address: exit %d, %q; want a failure naming --http", code, stderr.String())
	}
}
