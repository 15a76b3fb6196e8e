package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
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

// scrapeWhile runs dfbench with args (which serve at addr) and fetches
// each path of want from addr until its page matches every one of its
// patterns, failing t if the command ends first or fails.
func scrapeWhile(t *testing.T, addr string, args []string, want map[string][]string) {
	t.Helper()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { done <- dfbench(args, io.Discard, &stderr) }()
	pages := map[string]string{}
	for pending := slices.Sorted(maps.Keys(want)); len(pending) > 0; {
		select {
		case code := <-done:
			t.Fatalf("%s ended (exit %d, %s) before %s matched %q:\n%s", args[0], code, stderr.String(), pending[0],
				want[pending[0]], pages[pending[0]])
		default:
		}
		time.Sleep(20 * time.Millisecond) // NB: a poll, not a bound: the run takes the cores
		path := pending[0]
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			continue // not listening yet, or the server is gone
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pages[path] = string(b)
		matched := true
		for _, p := range want[path] {
			matched = matched && regexp.MustCompile(p).MatchString(pages[path])
		}
		if matched {
			pending = pending[1:]
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("%s: exit %d: %s", args[0], code, stderr.String())
	}
}

// TestServesStatus: while `dfbench run|compare|nexmark --http ADDR` runs
// (and --http-linger after), ADDR serves the job's status pages and
// ADDR/metrics its Prometheus metrics and the Go runtime's; a bad address
// fails before the run.
func TestServesStatus(t *testing.T) {
	addr := freeAddr(t)
	// NB: two subtasks whatever GOMAXPROCS is, for the channel to count#1.
	scrapeWhile(t, addr, []string{"run", "--pipeline", "keyed-count", "--keys", "1000", "--duration", "3s",
		"--parallelism", "2", "--checkpoint-interval", "100ms", "--json", "--http", addr}, map[string][]string{
		"/metrics": {
			`ringflow_records_in_total\{operator="count",subtask="0"\} [1-9]`,
			`ringflow_checkpoint_duration_seconds_bucket`,
			`ringflow_channel_queued_bytes\{from="source#0",to="count#1"\}`,
			`ringflow_channel_limit_bytes\{from="source#0",to="count#1"\} [1-9]`,
			`ringflow_busy_seconds_total\{operator="count",subtask="1"\} `,
			`go_goroutines`},
		"/":                {`<svg id="graph"`, `<g class="op source" data-operator="source"`, `data-from="source" data-to="count"`},
		"/checkpoints":     {`<tr class="checkpoint completed" data-id="1">`},
		"/checkpoints/1":   {`<svg id="timeline"`, `<g class="row source`, `<g class="row channel`, `<tr class="subtask`},
		"/api/overview":    {`"name": "count"`},
		"/api/checkpoints": {`"result": "completed"`},
	})

	addr = freeAddr(t)
	scrapeWhile(t, addr, []string{"nexmark", "--query", "q1", "--events", "200000", "--http", addr, "--http-linger", "2s"},
		map[string][]string{"/metrics": {`ringflow_records_out_total\{operator="[^"]+",subtask="0"\} [1-9]`}})

	addr = freeAddr(t)
	scrapeWhile(t, addr, []string{"compare", "--pipeline", "keyed-count", "--modes", "unaligned", "--duration", "500ms",
		"--checkpoint-interval", "50ms", "--json", "--http", addr, "--http-linger", "2s"},
		map[string][]string{
			"/metrics":     {`ringflow_checkpoints_total\{result="completed"\} [1-9]`},
			"/checkpoints": {`<tr class="checkpoint completed" data-id="\d+"><td class="num"><a href="./checkpoints/\d+">\d+</a></td><td>unaligned`},
		})

	var stderr bytes.Buffer
	if code := dfbench([]string{"run", "--pipeline", "keyed-count", "--records", "1000", "--http", "nowhere:-1"},
		io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "--http") {
		t.Errorf("a bad --http address: exit %d, %q; want a failure naming --http", code, stderr.String())
	}
}

// TestStatusServerJobs: before any job the server has the Go runtime's
// metrics and says there is no job; then it serves the status pages of the
// job it was last given.
func TestStatusServerJobs(t *testing.T) {
	s, err := httpFlags{addr: "127.0.0.1:0"}.serve()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") ||
		strings.Contains(body, "ringflow_") {
		t.Errorf("before a job, /metrics: %d\n%.500s", code, body)
	}
	if code, body := get("/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no ringflow job") {
		t.Errorf("before a job, /: %d %q", code, body)
	}
	for _, name := range []string{"first", "second"} {
		job := ringflow.NewJob(ringflow.Config{})
		ringflow.Sink(ringflow.Source(job, name, ringflow.FromSlice([]int{1})), name+"-sink", func(context.Context, int) error { return nil })
		s.job(job)
		if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, `data-operator="`+name+`"`) {
			t.Errorf("after job %s, /: %d, no box for operator %s", name, code, name)
		}
		if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			t.Errorf("after job %s, /metrics: %d\n%.500s", name, code, body)
		}
	}
}
