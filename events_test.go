package ringflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// restartingJob is a checkpointed job whose store fails the writes of two
// checkpoints (diskFull) and whose map "flaky" panics once, at its first
// record after `after` checkpoints completed (counted by the caller, from
// an event): the job restarts once, from a checkpoint, and ends.
func restartingJob(t *testing.T, cfg Config, after int64, completed *atomic.Int64) *Job {
	dir := t.TempDir()
	inj := &diskFull{from: 1, to: 3, seen: map[string]int{}, failed: map[string]bool{}}
	ck := CheckpointConfig{Interval: 2 * time.Millisecond, StateDir: filepath.Join(dir, "state"), TolerableFailures: 5}
	ck.storeOptions.FS = errorfs.Wrap(vfs.Default, inj)
	cfg.Workers, cfg.BatchSize, cfg.Checkpoint = 2, 20, ck
	cfg.Restart = RestartStrategy{Attempts: 1}
	job := NewJob(cfg)
	// NB: 0.6 s of input, as in TestStoreFullDuringCheckpoint: time for
	// the failed checkpoints and `after` completed ones before the end.
	const n = 600_000
	var failed atomic.Bool
	src := Source(job, "src", Generate(func(i uint64) uint64 { return i }, GenOptions{Count: n, Rate: 1_000_000}))
	flaky := Map(src, "flaky", func(v uint64) string {
		if completed.Load() >= after && failed.CompareAndSwap(false, true) {
			panic("injected failure")
		}
		return fmt.Sprint(v)
	})
	TxnSink(flaky, "out", FileSink(filepath.Join(dir, "out")))
	return job
}

// TestEventOrder runs a job whose store fails two checkpoints and whose
// map fails once, and checks that the listener hears every kind of event,
// each in its place: checkpoints triggered before they end, each ending
// once; the task failure; the aborts of the checkpoints then in flight,
// with the failure as their cause; the restart; the restore of the latest
// completed checkpoint; the final checkpoint; and the end of the job,
// last.
func TestEventOrder(t *testing.T) {
	var log []string // one line per event, in the order delivered
	var completed atomic.Int64
	var restored RestoreInfo
	var ended JobEndInfo
	var failure TaskFailureInfo
	var statsHeard []uint64
	l := &EventListener{
		CheckpointTriggered: func(i CheckpointTriggeredInfo) {
			log = append(log, fmt.Sprintf("triggered %d final=%v", i.ID, i.Final))
		},
		CheckpointCompleted: func(s CheckpointStats) {
			log = append(log, fmt.Sprintf("completed %d final=%v", s.ID, s.Final))
			statsHeard = append(statsHeard, s.ID)
			completed.Add(1)
		},
		CheckpointFailed: func(i CheckpointFailedInfo) {
			kind := "failed"
			if i.Aborted {
				kind = "aborted"
				if !strings.Contains(i.Err.Error(), "injected failure") {
					t.Errorf("checkpoint %d aborted because of %v, want the injected failure", i.ID, i.Err)
				}
			} else if !strings.Contains(i.Err.Error(), "no space left") {
				t.Errorf("checkpoint %d failed because of %v, want the full disk", i.ID, i.Err)
			}
			log = append(log, fmt.Sprintf("%s %d", kind, i.ID))
		},
		Restored: func(i RestoreInfo) {
			restored = i
			log = append(log, fmt.Sprintf("restored %d attempt=%d", i.Checkpoint, i.Attempt))
		},
		TaskFailed: func(i TaskFailureInfo) {
			failure = i
			log = append(log, fmt.Sprintf("task failed %s#%d attempt=%d", i.Operator, i.Subtask, i.Attempt))
		},
		Restarting: func(i RestartInfo) {
			log = append(log, fmt.Sprintf("restarting attempt=%d", i.Attempt))
		},
		JobEnded: func(i JobEndInfo) {
			ended = i
			log = append(log, fmt.Sprintf("ended restarts=%d err=%v", i.Restarts, i.Err))
		},
	}
	job := restartingJob(t, Config{Events: l, Logger: slog.New(slog.DiscardHandler)}, 2, &completed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// NB: Run has returned, so every callback has: log is complete.
	t.Logf("events:\n%s", strings.Join(log, "\n"))
	checkEventOrder(t, log)
	if failure.Operator != "flaky" || failure.Subtask != 0 || failure.Attempt != 0 ||
		!strings.Contains(failure.Err.Error(), "injected failure") {
		t.Errorf("TaskFailed %+v, want flaky#0 in attempt 0 with the injected failure", failure)
	}
	if restored.Attempt != 1 || restored.Checkpoint == 0 {
		t.Errorf("Restored %+v, want a checkpoint restored by attempt 1", restored)
	}
	if ended.Err != nil || ended.Restarts != 1 || ended.Duration <= 0 {
		t.Errorf("JobEnded %+v, want no error and 1 restart", ended)
	}
	var want, aborted []uint64
	ids := map[uint64]bool{}
	for _, c := range job.Checkpoints() {
		if ids[c.ID] {
			t.Errorf("checkpoint id %d used twice (the restart must not reuse an aborted one's)", c.ID)
		}
		ids[c.ID] = true
		switch {
		case c.Status == "completed":
			want = append(want, c.ID)
		case strings.HasPrefix(c.Status, "aborted"):
			aborted = append(aborted, c.ID)
		}
	}
	if !slices.Equal(statsHeard, want) {
		t.Errorf("CheckpointCompleted heard %v, Job.Checkpoints lists %v completed", statsHeard, want)
	}
	var heardAborted []uint64
	for _, line := range log {
		var id uint64
		if _, err := fmt.Sscanf(line, "aborted %d", &id); err == nil {
			heardAborted = append(heardAborted, id)
		}
	}
	if !slices.Equal(heardAborted, aborted) || job.Metrics().CheckpointsAborted != len(aborted) {
		t.Errorf("aborted: heard %v, Job.Checkpoints lists %v, Metrics counts %d",
			heardAborted, aborted, job.Metrics().CheckpointsAborted)
	}
}

// checkEventOrder checks the event lines of one run with one restart
// against the order EventListener documents.
func checkEventOrder(t *testing.T, log []string) {
	t.Helper()
	open := map[uint64]bool{} // triggered, not yet ended
	ended := map[uint64]bool{}
	var lastCompleted uint64
	var phase int // 0: attempt 0; 1: failed; 2: restarting; 3: restored; 4: ended
	seen := map[string]int{}
	for i, line := range log {
		var id uint64
		var kind string
		fields := strings.Fields(line)
		kind = fields[0]
		seen[kind]++
		bad := func(why string) { t.Fatalf("event %d %q: %s", i, line, why) }
		switch kind {
		case "triggered":
			fmt.Sscan(fields[1], &id)
			if phase == 2 || phase == 4 {
				bad("a checkpoint triggered between the restart and the restore, or after the end")
			}
			if ended[id] {
				bad("triggered after its end")
			}
			open[id] = true
		case "completed", "failed", "aborted":
			fmt.Sscan(fields[1], &id)
			if ended[id] {
				bad("a checkpoint ended twice")
			}
			// NB: a checkpoint may fail or be aborted before its trigger
			// time (see EventListener), not complete.
			if !open[id] && kind == "completed" {
				bad("a checkpoint completed that was not triggered")
			}
			ended[id] = true
			delete(open, id)
			if kind == "completed" {
				lastCompleted = id
			}
			if kind == "aborted" && phase != 1 {
				bad("an abort outside the end of the failed attempt")
			}
			if kind == "failed" && phase != 0 {
				bad("the injected disk failures are in the first attempt")
			}
		case "task":
			if phase != 0 {
				bad("a second task failure")
			}
			phase = 1
		case "restarting":
			if phase != 1 || len(open) != 0 {
				bad(fmt.Sprintf("want it after the failure, with no checkpoint in flight (have %v)", open))
			}
			phase = 2
		case "restored":
			if phase != 2 || line != fmt.Sprintf("restored %d attempt=1", lastCompleted) {
				bad(fmt.Sprintf("want the restore of checkpoint %d, the latest completed, after the restart", lastCompleted))
			}
			phase = 3
		case "ended":
			if phase != 3 || i != len(log)-1 || len(open) != 0 {
				bad("want the end last, after the restore, with no checkpoint in flight")
			}
			if i == 0 || !strings.HasPrefix(log[i-1], "completed") || !strings.HasSuffix(log[i-1], "final=true") {
				bad("want the final checkpoint's completion just before the end")
			}
			phase = 4
		default:
			bad("unknown event")
		}
	}
	if phase != 4 {
		t.Fatalf("the events stop in phase %d of 4", phase)
	}
	if seen["failed"] != 2 || seen["completed"] < 3 {
		t.Errorf("%d checkpoints failed and %d completed; want the 2 the full disk failed, and more completed",
			seen["failed"], seen["completed"])
	}
}

// TestLogRecords runs the restarting job with a JSON handler and checks
// the records: the failed checkpoints with their ids and causes, and the
// failure restarted from with its operator, subtask and stack, each at its
// level, with no other warnings or errors.
func TestLogRecords(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var completed atomic.Int64
	l := &EventListener{CheckpointCompleted: func(CheckpointStats) { completed.Add(1) }}
	job := restartingJob(t, Config{Logger: logger, Events: l}, 2, &completed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var failedIDs []uint64
	for _, c := range job.Checkpoints() {
		if strings.HasPrefix(c.Status, "failed") {
			failedIDs = append(failedIDs, c.ID)
		}
	}
	var warned []uint64
	restarts := 0
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var r struct {
			Level, Msg, Operator, Err, Stack string
			Checkpoint                       *uint64
			Subtask, Attempt                 *int
			Source                           string
		}
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("a record is not JSON: %v", err)
		}
		switch {
		case r.Level == "DEBUG" && r.Source == "pebble", r.Level == "INFO":
		case r.Msg == "ringflow: checkpoint failed":
			if r.Level != "WARN" || r.Checkpoint == nil || !strings.Contains(r.Err, "no space left") {
				t.Errorf("checkpoint failure logged as %+v; want WARN with its checkpoint and the full disk", r)
				continue
			}
			warned = append(warned, *r.Checkpoint)
		case strings.HasPrefix(r.Msg, "ringflow: attempt failed"):
			restarts++
			if r.Level != "ERROR" || r.Operator != "flaky" || r.Subtask == nil || *r.Subtask != 0 ||
				r.Attempt == nil || *r.Attempt != 1 || !strings.Contains(r.Err, "panic: injected failure") ||
				!strings.Contains(r.Stack, "events_test.go") {
				t.Errorf("restart logged as %+v; want ERROR naming flaky#0, attempt 1, the panic and its stack", r)
			}
		default:
			t.Errorf("unexpected record %+v", r)
		}
	}
	if restarts != 1 {
		t.Errorf("%d restarts logged, want 1", restarts)
	}
	if len(failedIDs) != 2 || !slices.Equal(warned, failedIDs) {
		t.Errorf("failed checkpoints logged: %v; Job.Checkpoints lists %v failed, want 2", warned, failedIDs)
	}
}
