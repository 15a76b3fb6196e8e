package ringflow

import (
	"errors"
	"sync"
	"time"
)

// EventListener is told of a job's lifecycle (Config.Events). Every field
// is optional: a nil callback is not called, and a nil listener costs
// nothing.
//
// # Threading
//
// The engine never runs a callback itself. It posts each event, a value
// copied out of its own state, to a queue (taking the queue's lock for an
// append, holding nothing else of its own but, for checkpoint events, the
// checkpoint coordinator's lock, which is never held while a callback
// runs); one goroutine per Run takes the events off the queue and calls
// the callbacks, one at a time. So a callback never runs on a worker
// thread, never holds an engine lock, and a slow one delays only the
// callbacks after it, never a record or a checkpoint. Callbacks may call
// the Job's methods (Checkpoints, Restarts, LastRestore) but must not
// panic. Events are per checkpoint, per attempt and per job, never per
// record.
//
// # Ordering
//
// Callbacks are called in the order the events happened, and each has
// returned before the next is called. Run returns only after the last,
// JobEnded, has returned. One Run reports, for each attempt:
//
//	Restored                       (an attempt that starts from a checkpoint)
//	CheckpointTriggered            \
//	CheckpointCompleted            |  per checkpoint, interleaved
//	  or CheckpointFailed          /   as MaxConcurrent allows
//	TaskFailed                     (an attempt that failed while running)
//	CheckpointFailed{Aborted}      (for each checkpoint still in flight)
//	Restarting                     (when the restart strategy allows another attempt)
//
// and then JobEnded, once, last. Each triggered checkpoint ends with
// exactly one CheckpointCompleted or CheckpointFailed. A checkpoint can
// end before it reached the sources (the store could not begin it, its
// timeout ran out before its trigger time, or its attempt ended first):
// then it is reported failed or aborted, once, without having been
// reported triggered.
type EventListener struct {
	// CheckpointTriggered: the sources were sent the checkpoint's barrier.
	CheckpointTriggered func(CheckpointTriggeredInfo)
	// CheckpointCompleted: the checkpoint is durable; its statistics are
	// those Job.Checkpoints lists.
	CheckpointCompleted func(CheckpointStats)
	// CheckpointFailed: the checkpoint failed (a task declined it, a
	// write or the commit failed, it timed out) or was aborted because
	// its attempt ended (Aborted set).
	CheckpointFailed func(CheckpointFailedInfo)
	// Restored: an attempt restored the job's state from a checkpoint.
	Restored func(RestoreInfo)
	// TaskFailed: an attempt failed while it ran: a task failed, or the
	// job failed it (too many failed checkpoints).
	TaskFailed func(TaskFailureInfo)
	// Restarting: the job starts another attempt after a failure.
	Restarting func(RestartInfo)
	// JobEnded: Run is about to return.
	JobEnded func(JobEndInfo)
}

// CheckpointTriggeredInfo describes a checkpoint sent to the sources.
type CheckpointTriggeredInfo struct {
	ID      uint64
	Trigger time.Time
	Final   bool // taken at the end of input
}

// CheckpointFailedInfo describes a checkpoint that failed or was aborted.
type CheckpointFailedInfo struct {
	ID      uint64
	Trigger time.Time
	Final   bool
	// Aborted is set for a checkpoint still in flight when its attempt
	// ended; Err is then the attempt's failure, or ErrAborted when it
	// ended without one (the input ended, or Run's context was done).
	Aborted bool
	Err     error
}

// ErrAborted is the cause of an aborted checkpoint whose attempt ended
// without a failure.
var ErrAborted = errors.New("ringflow: checkpoint aborted: the job stopped")

// RestoreInfo describes the restore that began an attempt.
type RestoreInfo struct {
	Checkpoint uint64
	Attempt    int // 0 for the first attempt of a Run
	// Duration is the time from looking for the latest checkpoint to the
	// state of every subtask restored.
	Duration time.Duration
	// Skipped lists newer checkpoints the restore passed over as unusable.
	Skipped []uint64
}

// TaskFailureInfo describes the failure that ended an attempt.
type TaskFailureInfo struct {
	// Operator and Subtask name the failed task, when the failure is a
	// task's (an *OperatorError); Operator is "" otherwise.
	Operator string
	Subtask  int
	Attempt  int
	Err      error
}

// RestartInfo describes a restart.
type RestartInfo struct {
	Attempt int           // the attempt about to start, 1 for the first restart
	Delay   time.Duration // waited before it starts (RestartStrategy.Delay)
	Err     error         // the failure restarted from
}

// JobEndInfo describes the end of Run.
type JobEndInfo struct {
	Err      error // what Run returns
	Restarts int
	Duration time.Duration // Run's wall time
}

// events is the queue between the engine and the callbacks of one Run (see
// EventListener, "Threading"). The zero value and a nil *events drop every
// event.
type events struct {
	l  *EventListener
	mu struct {
		sync.Mutex
		queue  []func()
		closed bool
	}
	wake chan struct{}
	done chan struct{}
}

// startEvents starts the goroutine that calls l's callbacks; nil if l is.
func startEvents(l *EventListener) *events {
	if l == nil {
		return nil
	}
	e := &events{l: l, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go e.loop()
	return e
}

func (e *events) loop() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.mu.queue) == 0 && !e.mu.closed {
			e.mu.Unlock()
			<-e.wake
			e.mu.Lock()
		}
		batch, closed := e.mu.queue, e.mu.closed
		e.mu.queue = nil
		e.mu.Unlock()
		for _, call := range batch {
			call()
		}
		if closed && len(batch) == 0 {
			return
		}
	}
}

// close waits until every event posted so far has been delivered; later
// ones are dropped.
func (e *events) close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.mu.closed = true
	e.mu.Unlock()
	signal(e.wake)
	<-e.done
}

func (e *events) post(call func()) {
	e.mu.Lock()
	if !e.mu.closed {
		e.mu.queue = append(e.mu.queue, call)
	}
	e.mu.Unlock()
	signal(e.wake)
}

func (e *events) checkpointTriggered(info CheckpointTriggeredInfo) {
	if e != nil && e.l.CheckpointTriggered != nil {
		e.post(func() { e.l.CheckpointTriggered(info) })
	}
}

func (e *events) checkpointCompleted(s CheckpointStats) {
	if e != nil && e.l.CheckpointCompleted != nil {
		e.post(func() { e.l.CheckpointCompleted(s) })
	}
}

func (e *events) checkpointFailed(info CheckpointFailedInfo) {
	if e != nil && e.l.CheckpointFailed != nil {
		e.post(func() { e.l.CheckpointFailed(info) })
	}
}

func (e *events) restored(info RestoreInfo) {
	if e != nil && e.l.Restored != nil {
		e.post(func() { e.l.Restored(info) })
	}
}

func (e *events) taskFailed(info TaskFailureInfo) {
	if e != nil && e.l.TaskFailed != nil {
		e.post(func() { e.l.TaskFailed(info) })
	}
}

func (e *events) restarting(info RestartInfo) {
	if e != nil && e.l.Restarting != nil {
		e.post(func() { e.l.Restarting(info) })
	}
}

func (e *events) jobEnded(info JobEndInfo) {
	if e != nil && e.l.JobEnded != nil {
		e.post(func() { e.l.JobEnded(info) })
	}
}
