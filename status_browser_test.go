package ringflow_test

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ringflow/ringflow"
)

var screenshots = flag.String("screenshots", "", "directory to save the status page's screenshots in (docs/ for the README's)")

// chromium returns the path of a Chromium or Chrome binary, or skips t
// when there is none outside CI (CI installs Debian's chromium: there the
// test must run).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH, and CI is set: .ci/run installs Debian's chromium")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); CI runs this test")
	return ""
}

// TestStatusPageInBrowser loads the status page of a running checkpointed
// job in headless Chromium and checks what it renders: the job graph with
// every operator, a row per checkpoint in the history, and a checkpoint's
// barrier timeline with a row per subtask input channel and per source,
// the critical path marked, and its subtask table. With -screenshots DIR it
// saves the overview and the timeline as PNG files there.
func TestStatusPageInBrowser(t *testing.T) {
	exe := chromium(t)
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2, Workers: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: 200 * time.Millisecond, StateDir: filepath.Join(t.TempDir(), "state")}})
	src := ringflow.Source(job, "events", ringflow.Generate(func(i uint64) uint64 { return i * 7919 },
		ringflow.GenOptions{Rate: 200_000}))
	parsed := ringflow.Map(src, "parse", func(v uint64) uint64 { return v >> 3 })
	counts := ringflow.MapWithState(ringflow.KeyBy(parsed, func(v uint64) uint64 { return v % 1000 }), "count",
		func(c *int64, _ uint64) int64 { *c++; return *c })
	ringflow.Sink(counts, "sink", func(context.Context, int64) error { return nil }, ringflow.Parallelism(1))

	srv := httptest.NewServer(ringflow.StatusHandler(job))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("job: %v", err)
		}
	}()
	var cp ringflow.CheckpointStats
	for completed := 0; completed < 3; {
		select {
		case err := <-done:
			t.Fatalf("the job ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		completed = 0
		for _, c := range job.Checkpoints() {
			if c.Status == "completed" {
				completed++
				cp = c
			}
		}
	}
	rows := 0
	for _, st := range cp.Subtasks {
		rows += max(len(st.Inputs), 1) // a source has a row of its own
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	bctx, tcancel := context.WithTimeout(bctx, 2*time.Minute)
	defer tcancel()

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("chromium: %v", err)
		}
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatalf("chromium: count %s: %v", sel, err)
		}
		return n
	}
	screenshot := func() []byte {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("chromium: screenshot: %v", err)
		}
		return png
	}

	do(chromedp.Navigate(srv.URL+"/?refresh=0"), chromedp.WaitVisible(chromedp.CSS("#graph")))
	ops := count("#graph .op")
	overview := screenshot()
	do(chromedp.Navigate(srv.URL+"/checkpoints?refresh=0"), chromedp.WaitVisible(chromedp.CSS("#checkpoints")))
	cps := count("#checkpoints tr.checkpoint")
	do(chromedp.Navigate(fmt.Sprintf("%s/checkpoints/%d", srv.URL, cp.ID)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	chans := count("#timeline g.row")
	critical := count("#timeline g.row.critical")
	subtasks := count("#subtasks tr.subtask")
	timeline := screenshot()
	if ops != 4 {
		t.Errorf("the graph shows %d operators, want 4", ops)
	}
	if cps < 3 {
		t.Errorf("the history shows %d checkpoints, want at least the 3 completed", cps)
	}
	if chans != rows || critical == 0 || subtasks != len(cp.Subtasks) {
		t.Errorf("checkpoint %d: timeline rows %d (want %d), %d critical (want some), subtask rows %d (want %d)",
			cp.ID, chans, rows, critical, subtasks, len(cp.Subtasks))
	}
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	for name, png := range map[string][]byte{"status-overview.png": overview, "status-timeline.png": timeline} {
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			t.Errorf("%s: not a PNG (%d bytes)", name, len(png))
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
