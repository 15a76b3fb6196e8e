package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/pipelines"
)

// checkSavepointFlags reports savepoint flags that make no sense
// together, in the flags' words.
func checkSavepointFlags(c *pipelines.Config, after time.Duration, keep bool) error {
	switch {
	case after < 0:
		return fmt.Errorf("--savepoint-after %v: must be positive", after)
	case after > 0 && c.Checkpoint.Interval == 0:
		return fmt.Errorf("--savepoint-after %v: a savepoint is a checkpoint; set --checkpoint-interval", after)
	case after > 0 && c.Checkpoint.SavepointDir == "":
		return fmt.Errorf("--savepoint-after %v: set --savepoint-dir, where it goes", after)
	case after == 0 && c.Checkpoint.SavepointDir != "":
		return fmt.Errorf("--savepoint-dir %s: without --savepoint-after no savepoint is taken", c.Checkpoint.SavepointDir)
	case after == 0 && keep:
		return errors.New("--savepoint-keep-running: without --savepoint-after no savepoint is taken")
	}
	return nil
}

// savepointer takes --savepoint-after's savepoint of the run's job.
type savepointer struct {
	after   time.Duration
	started atomic.Bool // the job was built, and the goroutine started
	ended   chan struct{}
	done    chan struct{}
	path    string
	err     error
}

// startSavepoint arranges for a savepoint (stopping the job unless keep)
// after d from when c's job is built; nothing if d is 0.
func startSavepoint(ctx context.Context, c *pipelines.Config, d time.Duration, keep bool) *savepointer {
	s := &savepointer{after: d, done: make(chan struct{}), ended: make(chan struct{})}
	if d == 0 {
		return s
	}
	onJob := c.OnJob
	c.OnJob = func(job *ringflow.Job) {
		if onJob != nil {
			onJob(job)
		}
		s.started.Store(true)
		go func() {
			defer close(s.done)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			case <-s.ended:
				s.err = fmt.Errorf("the run ended before --savepoint-after %v", d)
				return
			}
			if keep {
				s.path, s.err = job.Savepoint(ctx)
			} else {
				s.path, s.err = job.StopWithSavepoint(ctx)
			}
			if errors.Is(s.err, ringflow.ErrNotRunning) {
				s.err = fmt.Errorf("the run ended before --savepoint-after %v: %w", d, s.err)
			}
		}()
	}
	return s
}

// wait returns the savepoint's directory, once it is written; call it
// once the run has ended.
func (s *savepointer) wait() (string, error) {
	if !s.started.Load() {
		return "", nil // no savepoint asked for, or no job built
	}
	close(s.ended)
	<-s.done
	if s.err != nil {
		return "", fmt.Errorf("savepoint: %w", s.err)
	}
	return s.path, nil
}
