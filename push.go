package ringflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/ringflow/ringflow/internal/operator"
)

// PushOptions configure a Push source.
type PushOptions[T any] struct {
	// Buffer is the most records the handle holds that the job has not
	// taken yet: Push blocks while it holds that many, which it does while
	// the job is backpressured. Default 4096.
	Buffer int
	// OnDurable, if set, is called when a checkpoint completes with the
	// sequence number up to which pushed records are durable: every record
	// of a lower number is in the checkpoint — its effects are in the
	// job's state and in what its transactional sinks commit — and the
	// job will not ask for it again, so the service may drop it from its
	// own queue. Calls come one at a time, in order, each with a higher
	// number than the one before, on a goroutine of the handle; the last
	// one of a run has returned when Run returns. A restored job reports
	// the sequence number it restored as it opens. Without checkpoints,
	// nothing is ever durable.
	OnDurable func(seq uint64)
	// EventTime, if set, timestamps and watermarks the records as
	// SourceWithEventTime does.
	EventTime *WatermarkStrategy[T]
}

// DefaultPushBuffer is PushOptions.Buffer's default.
const DefaultPushBuffer = 4096

// Errors of a Pusher.
var (
	// ErrRewound is returned by Push and Close when the job restored a
	// checkpoint from before records pushed (after a failure, or, at the
	// start of a run, on a state directory of an earlier one): those
	// records were not taken, or were lost with the failed attempt. Call
	// Resume, and push again from the sequence number it returns.
	ErrRewound = errors.New("ringflow: the push source was rewound: resume from Pusher.Resume")
	// ErrPushClosed is returned by Push after Close.
	ErrPushClosed = errors.New("ringflow: push source closed")
	// ErrJobEnded is wrapped by what a Pusher's methods return once Run
	// has returned (with Run's error, if any, wrapped too).
	ErrJobEnded = errors.New("ringflow: the job of the push source has ended")
)

// Push adds a source fed from outside the job, by a service, through the
// handle it returns: Push(ctx, rec) hands the job one record. Records are
// numbered in the order Push takes them, 0, 1, 2, ... over the whole life
// of the job's state directory, and a checkpoint records the number of
// the next record the job would take. So the service keeps each record
// until OnDurable says it is durable, and after a restart pushes again
// the ones after the restored number:
//
//	orders, push := ringflow.Push(job, "orders", ringflow.PushOptions[Order]{
//		OnDurable: func(seq uint64) { queue.DropBefore(seq) },
//	})
//	...
//	go func() { done <- job.Run(ctx) }()
//	for {
//		seq, err := push.Resume(ctx) // where the job stands: its restored number
//		...
//		for ; err == nil; seq++ {
//			err = push.Push(ctx, queue.Get(seq))
//		}
//		if !errors.Is(err, ringflow.ErrRewound) {
//			return err
//		}
//		// A failure rewound the job: resume from its checkpoint.
//	}
//
// Push blocks while the job is backpressured, until ctx is done. When a
// task fails and the job restores its latest checkpoint, the records
// pushed after it are lost with the failed attempt: Push and Close then
// return ErrRewound, and Resume says where to go on. (A source that
// hands records over a channel instead loses them silently.)
//
// The source has one subtask: a Parallelism option other than 1 fails
// Run with a *ConfigError; Rebalance spreads its records. Without
// checkpoints, records are not durable and a failure fails the job.
func Push[T any](j *Job, name string, po PushOptions[T], opts ...Option) (Stream[T], *Pusher[T]) {
	var o nodeOptions
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.parallelismSet && o.parallelism != 1 {
		j.errs = append(j.errs, &ConfigError{Field: "Parallelism", Operator: name,
			Problem: fmt.Sprintf("%d: a Push source has one subtask (Rebalance spreads its records)", o.parallelism)})
	}
	if po.Buffer < 0 {
		j.errs = append(j.errs, &ConfigError{Field: "PushOptions.Buffer", Operator: name,
			Problem: fmt.Sprintf("%d: must be at least 1 (or 0 for the default)", po.Buffer)})
	}
	if po.EventTime != nil && po.EventTime.Timestamp == nil && po.EventTime.TimestampPtr == nil && po.EventTime.Timestamps == nil {
		j.errorf("source %q: watermark strategy without a Timestamp function", name)
	}
	size := po.Buffer
	if size <= 0 {
		size = DefaultPushBuffer
	}
	p := &Pusher[T]{name: name, onDurable: po.OnDurable, q: make([]T, size), changed: make(chan struct{})}
	j.ended = append(j.ended, p.jobEnded)
	checkpoints := j.cfg.Checkpoint.enabled()
	newSrc := func() SourceFunc[T] { return &pushSource[T]{p: p, checkpoints: checkpoints} }
	return sourceNode(j, name, newSrc, po.EventTime, append(slices.Clip(opts), Parallelism(1))), p
}

// Pusher is the handle of a Push source: a service pushes records into the
// job through it. Its methods may be called from any goroutine; a single
// producer keeps the numbering simple (records are numbered in the order
// Push takes them).
type Pusher[T any] struct {
	name      string
	onDurable func(uint64)

	mu sync.Mutex
	// q holds the records pushed and not taken yet, qLen of them from
	// qHead, numbered next-qLen to next-1.
	q           []T
	qHead, qLen int
	next        uint64 // the number of the next record pushed
	synced      bool   // a source has opened once: next follows the job's numbering
	open        bool   // a source has the handle (between its Open and Close)
	rewound     bool   // the job went back: Push refuses records until Resume
	closed      bool   // Close was called: the input ends after the records pushed
	drained     bool   // the source took every record of a closed input
	checkpoints bool   // the open source's job takes checkpoints
	durable     uint64 // records below it are in a completed checkpoint
	ended       error  // once Run returned: ErrJobEnded, wrapping its error
	// changed is closed, and replaced, when the state above changes while
	// someone waits (waiting says so).
	changed chan struct{}
	waiting bool
	// notify wakes the goroutine that calls onDurable, while a source is
	// open; notified is closed when it has returned.
	notify   chan struct{}
	notified chan struct{}
	reported uint64 // the last number given to onDurable; the goroutine's
}

// signal wakes whoever waits for a change; p.mu is held.
func (p *Pusher[T]) signal() {
	if p.waiting {
		close(p.changed)
		p.changed, p.waiting = make(chan struct{}), false
	}
}

// wait releases p.mu until the state changes or ctx is done, and takes it
// again; it returns ctx's error if ctx is done.
func (p *Pusher[T]) wait(ctx context.Context) error {
	ch := p.changed
	p.waiting = true
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Push hands rec to the job as the record of the next number, and returns
// once the handle holds it (not once the job has processed it). It blocks
// while the handle's buffer is full — the job is backpressured — or until
// the job's source first opens, until ctx is done. It returns an error
// wrapping ErrRewound, without taking rec, once the job has restored a
// checkpoint from before the records pushed (see Resume); ErrPushClosed
// after Close; and an error wrapping ErrJobEnded once Run has returned.
func (p *Pusher[T]) Push(ctx context.Context, rec T) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.ended != nil:
			return p.ended
		case p.rewound:
			return ErrRewound
		case p.closed:
			return ErrPushClosed
		case p.synced && p.qLen < len(p.q):
			i := p.qHead + p.qLen
			if i >= len(p.q) {
				i -= len(p.q)
			}
			p.q[i] = rec
			p.qLen++
			p.next++
			return nil
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
	}
}

// Resume waits until the job's source has opened — restoring the job's
// latest checkpoint, if it has one — and returns the number of the record
// the job takes next: the producer pushes from there. After ErrRewound,
// Push takes records again once Resume has been called.
func (p *Pusher[T]) Resume(ctx context.Context) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.open {
		if p.ended != nil {
			return 0, p.ended
		}
		if err := p.wait(ctx); err != nil {
			return 0, err
		}
	}
	p.rewound = false
	return p.next, nil
}

// Close ends the input after the records pushed: the source ends once the
// job has taken them, and a bounded job finishes (with a final checkpoint,
// which makes them all durable). Close waits for that: it returns nil once
// every record pushed is durable (without checkpoints: once the job has
// taken them all), and an error wrapping ErrRewound if the job went back
// before then — Resume, push the records again and Close again — until ctx
// is done or Run returns.
func (p *Pusher[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rewound {
		return ErrRewound
	}
	p.closed = true
	p.signal()
	for {
		switch {
		case p.rewound:
			return ErrRewound
		case p.synced && p.qLen == 0 && (p.checkpoints && p.durable >= p.next || !p.checkpoints && p.drained):
			return nil
		case p.ended != nil:
			return p.ended
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
	}
}

// Durable returns the number up to which pushed records are durable (see
// PushOptions.OnDurable).
func (p *Pusher[T]) Durable() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.durable
}

// jobEnded is called as Run returns, with its error.
func (p *Pusher[T]) jobEnded(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.ended = fmt.Errorf("%w: %w", ErrJobEnded, err)
	} else {
		p.ended = ErrJobEnded
	}
	p.signal()
}

// attach gives the handle to a source that opens at number start, the
// position of the checkpoint it restored (0 without one): the records
// from start on that the handle holds are kept; if it holds none from
// start, its numbering moves to start, and if that is not where it was,
// Push refuses records until Resume.
func (p *Pusher[T]) attach(start uint64, checkpoints bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base := p.next - uint64(p.qLen)
	if p.synced && start >= base && start <= p.next {
		drop := int(start - base)
		clear(p.q[p.qHead:min(p.qHead+drop, len(p.q))])
		clear(p.q[:max(p.qHead+drop-len(p.q), 0)])
		p.qHead = (p.qHead + drop) % len(p.q)
		p.qLen -= drop
	} else {
		clear(p.q)
		p.qHead, p.qLen = 0, 0
		if start != p.next {
			// The records from start on were lost, or never pushed under
			// these numbers: the producer resumes from start.
			p.rewound, p.closed = true, false
		}
		p.next = start
	}
	p.synced, p.open, p.drained, p.checkpoints = true, true, false, checkpoints
	if p.onDurable != nil {
		p.notify, p.notified = make(chan struct{}, 1), make(chan struct{})
		go p.notifier(p.notify, p.notified)
	}
	if checkpoints && start > 0 {
		p.setDurable(start) // the restored checkpoint holds them
	}
	p.signal()
}

// detach takes the handle from the source, which closes; the last
// OnDurable call has returned when it returns.
func (p *Pusher[T]) detach() {
	p.mu.Lock()
	p.open = false
	ch, done := p.notify, p.notified
	p.notify, p.notified = nil, nil
	p.signal()
	p.mu.Unlock()
	if ch != nil {
		close(ch)
		<-done
	}
}

// take moves up to len(buf) records into buf, for a source at number
// *pos; it returns io.EOF at the end of a closed input.
func (p *Pusher[T]) take(buf []T, pos *uint64) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(buf), p.qLen)
	if n == 0 {
		if p.closed && !p.rewound {
			p.drained = true
			p.signal()
			return 0, io.EOF
		}
		return 0, nil
	}
	k := copy(buf[:n], p.q[p.qHead:min(p.qHead+n, len(p.q))])
	copy(buf[k:n], p.q[:n-k])
	clear(p.q[p.qHead:min(p.qHead+n, len(p.q))])
	clear(p.q[:n-k])
	p.qHead = (p.qHead + n) % len(p.q)
	p.qLen -= n
	*pos += uint64(n)
	p.signal()
	return n, nil
}

// setDurable records that records below seq are durable; p.mu is held.
func (p *Pusher[T]) setDurable(seq uint64) {
	if seq <= p.durable {
		return
	}
	p.durable = seq
	p.signal()
	if p.notify != nil {
		select {
		case p.notify <- struct{}{}:
		default: // it will read the newest number anyway
		}
	}
}

// notifier calls onDurable with each new durable number, until notify is
// closed; then once more with the last.
func (p *Pusher[T]) notifier(notify <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range notify {
		p.report()
	}
	p.report()
}

func (p *Pusher[T]) report() {
	p.mu.Lock()
	d := p.durable
	p.mu.Unlock()
	if d > p.reported {
		p.reported = d
		p.onDurable(d)
	}
}

// pushSource is one attempt's source of a Push: it takes the records of
// its handle, and tells it which are durable as checkpoints complete.
type pushSource[T any] struct {
	p           *Pusher[T]
	checkpoints bool
	pos         uint64 // the number of the next record it takes
	// marks are the positions of the checkpoints it took part in that
	// have not completed or aborted yet.
	marks []pushMark
	open  bool
}

type pushMark struct{ id, pos uint64 }

var (
	_ operator.CheckpointPositioner = (*pushSource[int])(nil)
	_ operator.CheckpointListener   = (*pushSource[int])(nil)
)

func (s *pushSource[T]) Open(subtask, parallelism int, pos []byte) error {
	if parallelism != 1 {
		return fmt.Errorf("push source with %d subtasks: it has one", parallelism)
	}
	if pos != nil {
		if len(pos) != 8 {
			return fmt.Errorf("push source position of %d bytes, want 8", len(pos))
		}
		s.pos = binary.LittleEndian.Uint64(pos)
	}
	s.p.attach(s.pos, s.checkpoints)
	s.open = true
	return nil
}

func (s *pushSource[T]) Read(buf []T) (int, error) { return s.p.take(buf, &s.pos) }

func (s *pushSource[T]) Position() []byte { return binary.LittleEndian.AppendUint64(nil, s.pos) }

// PositionFor implements CheckpointPositioner.
func (s *pushSource[T]) PositionFor(id uint64) []byte {
	s.marks = append(s.marks, pushMark{id, s.pos})
	return s.Position()
}

// NotifyComplete implements CheckpointListener: the records before
// the position of checkpoint id are durable.
func (s *pushSource[T]) NotifyComplete(id uint64) error {
	var durable uint64
	found := false
	kept := s.marks[:0]
	for _, m := range s.marks {
		if m.id <= id {
			durable, found = max(durable, m.pos), true
		} else {
			kept = append(kept, m)
		}
	}
	s.marks = kept
	if found {
		s.p.mu.Lock()
		s.p.setDurable(durable)
		s.p.mu.Unlock()
	}
	return nil
}

// NotifyAborted implements CheckpointListener.
func (s *pushSource[T]) NotifyAborted(id uint64) {
	s.marks = slices.DeleteFunc(s.marks, func(m pushMark) bool { return m.id == id })
}

func (s *pushSource[T]) Close() error {
	if s.open {
		s.open = false
		s.p.detach()
	}
	return nil
}
