package operator

import (
	"fmt"
	"strings"
)

// TaskName names the task ("count#1"), for the scheduler's stall records.
func (t *Task) TaskName() string { return t.Name }

// StallNote says, for the scheduler's record of a stall in the task's last
// step, whether that step took a checkpoint's synchronous part, and how
// long the part took.
func (t *Task) StallNote() string {
	if c := t.Checkpoints; c != nil && c.syncStep == t.steps && c.syncStep != 0 {
		return fmt.Sprintf("checkpoint %d: synchronous part %v", c.syncID, c.syncTook)
	}
	return ""
}

// String describes the task's state, for stall reports and debugging.
func (t *Task) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s: wm=%d finishing=%v", t.Name, t.wm, t.finishing)
	if c := t.Checkpoints; c != nil {
		c.mail.Lock()
		msgs := fmt.Sprint(c.mail.msgs)
		c.mail.Unlock()
		fmt.Fprintf(&b, " ckpt{last=%d completed=%d srcDone=%v snap=%v mail=%v %s steps=%d}", c.last, c.completed, c.srcDone,
			c.snap != nil, c.hasMail.Load(), msgs, t.steps)
		if c.Aligner != nil {
			fmt.Fprintf(&b, " pending=%d", c.Aligner.Pending())
		}
	}
	for _, ch := range t.Inputs {
		fmt.Fprintf(&b, " in%d{ended=%v blocked=%v buf=%d err=%v}", ch.Index, ch.ended, ch.blocked,
			ch.Reader.Buffered(), ch.Reader.Err())
	}
	for i, p := range t.Ports {
		fmt.Fprintf(&b, " out%d{room=%v dirty=%v}", i, p.Room(), p.Dirty())
	}
	return b.String()
}
