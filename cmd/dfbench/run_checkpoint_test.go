package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("run.seed", "")

// TestRunCheckpointJSON checks the "checkpoints" object: its keys, that
// checkpoints completed with their timings and bytes, and that --fail-after
// restarted the job once while the sink directory got every line once.
func TestRunCheckpointJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := []string{"run", "--pipeline", "keyed-count", "--records", "200000", "--keys", "1000", "--rate", "1000000",
		"--checkpoint-interval", "10ms", "--sink-dir", out, "--fail-after", "100000", "--json"}
	var stdout, stderr bytes.Buffer
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var obj struct {
		Checkpoints map[string]any `json:"checkpoints"`
		Workers     []struct {
			Parks     *int64   `json:"parks"`
			Stolen    *int64   `json:"stolen"`
			Rests     *int64   `json:"rests"`
			RestedMs  *float64 `json:"rested_ms"`
			Preempted *int64   `json:"preempted"`
		} `json:"workers"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &obj); err != nil {
		t.Fatalf("%v in %q", err, stdout.String())
	}
	ck := obj.Checkpoints
	want := []string{"aborted", "alignment_ms", "bytes_reused", "bytes_written", "completed", "duration_ms", "failed",
		"history", "restarts", "restored_from", "sync_cpu_us", "sync_us"}
	if got := sortedKeys(ck); !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoints keys %v, want %v", got, want)
	}
	for _, q := range []string{"duration_ms", "sync_us", "sync_cpu_us", "alignment_ms"} {
		if got := sortedKeys(ck[q].(map[string]any)); !reflect.DeepEqual(got, []string{"max", "p50", "p99"}) {
			t.Errorf("%s keys %v", q, got)
		}
	}
	if ck["completed"].(float64) < 1 || ck["restarts"] != 1.0 || ck["bytes_written"].(float64) <= 0 ||
		ck["sync_us"].(map[string]any)["max"].(float64) <= 0 || ck["duration_ms"].(map[string]any)["max"].(float64) <= 0 ||
		ck["sync_cpu_us"].(map[string]any)["max"].(float64) <= 0 ||
		ck["sync_cpu_us"].(map[string]any)["max"].(float64) > ck["sync_us"].(map[string]any)["max"].(float64) {
		t.Errorf("checkpoints %v: want some completed, 1 restart, bytes written, sync (on cpu no longer than in all) and duration times", ck)
	}
	delays := 0
	for i, h := range ck["history"].([]any) {
		e := h.(map[string]any)
		want := []string{"alignment_max_us", "async_max_us", "bytes_reused", "bytes_written", "duration_ms", "final", "id",
			"start_delay_max_us", "status", "sync_cpu_max_us", "sync_max_us", "trigger_unix_us", "written_ms"}
		if got := sortedKeys(e); !reflect.DeepEqual(got, want) {
			t.Fatalf("history entry %d keys %v, want %v", i, got, want)
		}
		if w, d := e["written_ms"].(float64), e["duration_ms"].(float64); e["status"] == "completed" && (w <= 0 || w > d) {
			t.Errorf("history entry %d: written after %v ms of %v, want within the checkpoint's duration", i, w, d)
		}
		if e["status"] == "completed" && e["start_delay_max_us"].(float64) > 0 && e["alignment_max_us"].(float64) >= 0 {
			delays++ // the keyed subtasks see their first barrier after the trigger
		}
	}
	if delays == 0 {
		t.Errorf("no completed checkpoint in the history has a start delay: %v", ck["history"])
	}
	if n := len(readPartLines(t, out)); n != 200000 {
		t.Errorf("sink directory holds %d lines, want one per record: 200000", n)
	}
	if len(obj.Workers) == 0 {
		t.Errorf("no workers in the JSON: %s", stdout.String())
	}
	for i, w := range obj.Workers {
		if w.Parks == nil || w.Stolen == nil || w.Rests == nil || w.RestedMs == nil || w.Preempted == nil {
			t.Errorf("worker %d: %+v, want parks, stolen, rests, rested_ms and preempted", i, w)
		}
	}
}

// TestRunCheckpointWindowsJSON: with --checkpoint-windows the JSON gains
// the latency of each kind of window and their ratio.
func TestRunCheckpointWindowsJSON(t *testing.T) {
	args := []string{"run", "--pipeline", "keyed-count", "--duration", "1s", "--keys", "1000", "--rate", "200000",
		"--checkpoint-interval", "50ms", "--checkpoint-windows", "400ms", "--json"}
	var stdout, stderr bytes.Buffer
	if code := dfbench(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var obj struct {
		Windows map[string]any `json:"checkpoint_windows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &obj); err != nil {
		t.Fatalf("%v in %q", err, stdout.String())
	}
	w := obj.Windows
	if got, want := sortedKeys(w), []string{"p99_ratio", "window_s", "with_checkpoints_us", "without_checkpoints_us"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoint_windows keys %v, want %v", got, want)
	}
	for _, k := range []string{"with_checkpoints_us", "without_checkpoints_us"} {
		lat := w[k].(map[string]any)
		if got := sortedKeys(lat); !reflect.DeepEqual(got, []string{"p50", "p99", "p999", "samples"}) || lat["samples"].(float64) == 0 {
			t.Errorf("%s: %v, want p50, p99, p999 and some samples", k, lat)
		}
	}
	if w["window_s"] != 0.4 || w["p99_ratio"].(float64) <= 0 {
		t.Errorf("checkpoint_windows %v", w)
	}
}

// killChildEnv, when set, makes TestRunKillChild run dfbench with the
// arguments it holds (separated by newlines) and exit with its code.
const killChildEnv = "DFBENCH_KILL_CHILD_ARGS"

func TestRunKillChild(t *testing.T) {
	args := os.Getenv(killChildEnv)
	if args == "" {
		t.Skip("only a child process of TestRunKillAndRerun or a soak test runs this")
	}
	os.Exit(dfbench(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// TestRunKillAndRerun is issue 4's contract: SIGKILL `dfbench run` with
// checkpoints and a sink directory at random moments, rerun the same
// command until it exits 0, and the sink directory holds exactly the lines
// of an uninterrupted run.
func TestRunKillAndRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	rnd := rand.New(rand.NewPCG(seeds.Seed(t), 1))
	for _, pipeline := range []string{"keyed-count", "window"} {
		t.Run(pipeline, func(t *testing.T) {
			dir := t.TempDir()
			command := func(sub string) []string {
				return []string{"run", "--pipeline", pipeline, "--records", "300000", "--keys", "1000",
					"--rate", "300000", "--parallelism", "2", "--workers", "2", "--checkpoint-interval", "10ms",
					"--state-dir", filepath.Join(dir, sub, "state"), "--sink-dir", filepath.Join(dir, sub, "out"), "--json"}
			}
			var stdout, stderr bytes.Buffer
			if code := dfbench(command("whole"), &stdout, &stderr); code != 0 {
				t.Fatalf("uninterrupted run: exit %d: %s", code, stderr.String())
			}
			want := readPartLines(t, filepath.Join(dir, "whole", "out"))
			if len(want) == 0 {
				t.Fatal("the uninterrupted run committed no lines")
			}
			child := func() *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^TestRunKillChild$")
				cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join(command("killed"), "\n"))
				cmd.Stderr = os.Stderr
				return cmd
			}
			for i := range 4 {
				cmd := child()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				after := time.Duration(50+rnd.IntN(900)) * time.Millisecond
				time.Sleep(after) // the random moment of the kill, not synchronisation
				cmd.Process.Signal(syscall.SIGKILL)
				err := cmd.Wait()
				t.Logf("kill %d after %v: %v", i+1, after, err)
			}
			for attempt := 1; ; attempt++ {
				err := child().Run()
				if err == nil {
					break
				}
				if attempt == 3 {
					t.Fatalf("rerun %d: %v", attempt, err)
				}
				t.Logf("rerun %d: %v", attempt, err)
			}
			got := readPartLines(t, filepath.Join(dir, "killed", "out"))
			if !slices.Equal(got, want) {
				t.Errorf("after kills: %d lines, uninterrupted: %d; first difference at %s",
					len(got), len(want), firstLineDiff(got, want))
			}
		})
	}
}

// readPartLines returns the lines of every committed part file in dir, sorted.
func readPartLines(t *testing.T, dir string) []string {
	lines, err := ringflow.ReadFileSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

func firstLineDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return strconv.Itoa(i) + ": " + a[i] + " vs " + b[i]
		}
	}
	return "the end of the shorter"
}
