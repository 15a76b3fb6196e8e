package ringflow

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringflow/ringflow/internal/affinity"
)

// policySink is a transactional sink that counts the scheduling policies
// its thread had when it wrote, pre-committed (in the synchronous part of
// a snapshot) and made a transaction durable.
type policySink struct {
	mu                          *sync.Mutex
	writes, precommits, durable map[uint32]int
	n                           int
}

func threadPolicy() uint32 {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return ^uint32(0)
	}
	return attr.Policy
}

func (s *policySink) note(m map[uint32]int) {
	p := threadPolicy()
	s.mu.Lock()
	m[p]++
	s.mu.Unlock()
}

func (s *policySink) Open(context.Context, int, int) error    { return nil }
func (s *policySink) Recover(context.Context, [][]byte) error { return nil }
func (s *policySink) Commit(context.Context, []byte) error    { return nil }
func (s *policySink) Close() error                            { return nil }
func (s *policySink) Write(uint64) error {
	if s.n++; s.n%1000 == 0 {
		s.note(s.writes)
	}
	return nil
}
func (s *policySink) PreCommit() ([]byte, func(context.Context) error, error) {
	s.note(s.precommits)
	return []byte{1}, func(context.Context) error {
		s.note(s.durable)
		return nil
	}, nil
}

// TestSyncPartRaised: a snapshot's synchronous part runs in the real-time
// class, and only it: the same thread writes records in the fair class, and
// the durable step runs there too. With NoRaise the part stays fair.
func TestSyncPartRaised(t *testing.T) {
	run := func(noRaise bool) *policySink {
		s := &policySink{mu: &sync.Mutex{}, writes: map[uint32]int{}, precommits: map[uint32]int{}, durable: map[uint32]int{}}
		job := NewJob(Config{Parallelism: 1, Workers: 1, Checkpoint: CheckpointConfig{Interval: 5 * time.Millisecond,
			StateDir: filepath.Join(t.TempDir(), "state"), NoRaise: noRaise}})
		src := Source(job, "gen", Generate(func(i uint64) uint64 { return i }, GenOptions{Count: 5_000_000}))
		TxnSink(src, "out", func() TwoPhaseSink[uint64] { return s })
		if err := job.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	raised := run(false)
	if affinity.RealtimeRefused() {
		t.Skip("the kernel refuses SCHED_FIFO to this process (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)")
	}
	fair := run(true)
	t.Logf("raised: writes %v, pre-commits %v, durable %v", raised.writes, raised.precommits, raised.durable)
	t.Logf("NoRaise: writes %v, pre-commits %v, durable %v", fair.writes, fair.precommits, fair.durable)
	fifo := uint32(unix.SCHED_FIFO)
	if len(raised.precommits) == 0 || raised.precommits[fifo] != sum(raised.precommits) {
		t.Errorf("pre-commits, in the synchronous part, ran under policies %v; want all SCHED_FIFO (%d)", raised.precommits, fifo)
	}
	for name, m := range map[string]map[uint32]int{"writes": raised.writes, "durable steps": raised.durable,
		"pre-commits with NoRaise": fair.precommits, "writes with NoRaise": fair.writes} {
		if m[fifo] > 0 {
			t.Errorf("%s ran under SCHED_FIFO (policies %v)", name, m)
		}
	}
	if len(raised.writes) == 0 || len(fair.precommits) == 0 {
		t.Errorf("too little seen: writes %v, pre-commits with NoRaise %v", raised.writes, fair.precommits)
	}
}

func sum(m map[uint32]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}
