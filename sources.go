package ringflow

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
)

// SourceFunc produces the records of one subtask of a source operator
// (Source, SourceWithEventTime); each subtask has its own, made by the
// job's NewSource (again for every attempt, after a restart). Sources are replayable: Position says where the source
// stands, a checkpoint keeps it, and a restored job opens the source at
// it again, so that it reads exactly the records after those the
// checkpoint covers.
//
// A SourceFunc may also implement:
//   - CheckpointListener, to be told when a checkpoint completes (to
//     acknowledge the messages it covers to a broker, say) or is aborted;
//   - CheckpointPositioner, to know which checkpoint a position goes into;
//   - Pacer, to say when its next record is due;
//   - SplitSource, to be restored at another parallelism than its
//     checkpoint's;
//   - EventTimeSource, to stamp its records and keep its watermark
//     itself (SourceWithOwnEventTime).
//
// Its methods run on the subtask's worker thread, one at a time. An error
// from any of them, or a panic, fails the task with an *OperatorError
// naming the operator and subtask, and the job restarts as Config.Restart
// says. Generate, FromSlice, FileLines, FromBlocking and Push make
// sources.
type SourceFunc[T any] interface {
	// Open prepares subtask of parallelism (subtask in [0, parallelism))
	// to read from pos, a value Position returned earlier (possibly in
	// another run), or from the beginning if pos is nil.
	Open(subtask, parallelism int, pos []byte) error
	// Read fills buf with up to len(buf) records and returns how many. It
	// returns io.EOF when the source is exhausted (with the records read
	// before it, if any). (0, nil) means nothing is available now: the
	// task asks again when the source's Pacer says, or after about a
	// millisecond.
	//
	// Read must not block. It runs between the source's checkpoint
	// messages: while it waits, the worker's other tasks wait, and a
	// checkpoint cannot start at the source. A source whose input may
	// block reads it on a goroutine of its own and hands over what that
	// has read; FromBlocking does so for a reader of one record at a time.
	Read(buf []T) (int, error)
	// Position returns where to resume to read exactly the records after
	// those Read has returned. The source may not change the slice later.
	Position() []byte
	// Close releases what the source holds, when the task ends, fails or
	// restarts.
	Close() error
}

// CheckpointPositioner is implemented by sources that need to know which
// checkpoint a position goes into, so as to act when that checkpoint
// completes (as a CheckpointListener): a task taking checkpoint id asks
// such a source for its position with PositionFor(id) instead of
// Position.
type CheckpointPositioner interface {
	PositionFor(checkpoint uint64) []byte
}

// Pacer is implemented by sources that produce on a schedule (Generate at
// a Rate): NextReady says when the next record is due, and a task whose
// source returned no records asks it again then rather than polling. The
// zero time means now (or never, once the source is exhausted).
type Pacer interface {
	NextReady() time.Time
}

// SplitSource is implemented by a source whose input is made of splits
// (files, partitions, ranges) that its subtasks share out, so that a job
// can be restored at another parallelism than its checkpoint's (see
// Config.RestoreFrom). A source that does not implement it is restored at
// its checkpoint's parallelism only; at another, the restore fails.
type SplitSource interface {
	// RescalePosition returns the position that subtask of parallelism
	// opens at (SourceFunc.Open), given old, the positions of every
	// subtask of the parallelism the checkpoint was taken at (old[i] of
	// subtask i; nil where a subtask had none). The subtasks at the new
	// parallelism must together read every split of old exactly once,
	// from where it stood; a subtask may be given none. It is called on
	// an instance that has not been opened.
	RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, error)
}

// EventTimeSource is implemented by a source that keeps its records'
// event time itself, as SourceWithOwnEventTime runs it: it knows what the
// runtime does not, such as which split (a Kafka partition) each record
// came from, and so can hold its watermark at the slowest of its splits
// and leave idle splits out, where a WatermarkStrategy sees only the
// newest timestamp of each batch of a subtask.
//
// Its methods run on the subtask's worker thread, like Read: Timestamps
// right after a Read that returned records, Watermark after every Read.
type EventTimeSource interface {
	// Timestamps fills ts, as long as the number of records the last
	// Read returned, with their event times (epoch milliseconds), in
	// order.
	Timestamps(ts []int64)
	// Watermark returns the source's watermark after the records it has
	// returned (MinWatermark while it knows none), and whether it is
	// idle: an idle source does not hold back the watermark downstream.
	// The engine ignores a watermark lower than one it was given before.
	Watermark(now time.Time) (wm int64, idle bool)
}

// WatermarkStrategy says how the records of a source (SourceWithEventTime,
// PushOptions.EventTime) are timestamped and watermarked.
//
// A source's watermark advances once per batch it reads (up to
// Config.BatchSize records), from the newest timestamp in that batch, not
// record by record: every record of a batch is processed before the
// watermark that follows it. So when event-time timers and windows fire
// relative to the records around them depends on the batch size (their
// results do not, for records within the out-of-orderness bound). A job
// that needs a watermark after every record sets Config.BatchSize to 1,
// at a cost in throughput.
type WatermarkStrategy[T any] struct {
	// Timestamp extracts a record's event time, in epoch milliseconds.
	// It, TimestampPtr or Timestamps is required.
	Timestamp func(T) int64
	// TimestampPtr is Timestamp given a pointer to the record instead of
	// a copy (see MapPtr), for records of more than a few words; it is
	// used when set. The pointer is valid only during the call.
	TimestampPtr func(*T) int64
	// Timestamps is the batch form of Timestamp: it sets ts[i] to the
	// event time of recs[i], for every i (len(ts) == len(recs)). It is
	// used when set, before the other two: one call per batch, where they
	// cost a call through a function value per record, which on a fast
	// pipeline is a measurable share of each record's time. Neither slice
	// may be kept after the call.
	Timestamps func(recs []T, ts []int64)
	// OutOfOrderness bounds how far behind the newest timestamp seen a
	// record may be: the watermark is the newest timestamp less the
	// bound, less 1 ms. Records older than the watermark are late.
	OutOfOrderness time.Duration
	// IdleTimeout marks the source idle when it produced nothing for this
	// long, so that it does not hold back the watermark downstream; 0
	// never marks it idle.
	IdleTimeout time.Duration
}

// The runtime's interfaces and the ones above are the same, so that a
// value of either is one of the other.
var (
	_ operator.Source[int]             = (SourceFunc[int])(nil)
	_ SourceFunc[int]                  = (operator.Source[int])(nil)
	_ operator.CheckpointPositioner    = (CheckpointPositioner)(nil)
	_ CheckpointPositioner             = (operator.CheckpointPositioner)(nil)
	_ operator.Pacer                   = (Pacer)(nil)
	_ Pacer                            = (operator.Pacer)(nil)
	_ operator.SplitSource             = (SplitSource)(nil)
	_ operator.EventTimeSource         = (EventTimeSource)(nil)
	_ EventTimeSource                  = (operator.EventTimeSource)(nil)
	_ SplitSource                      = (operator.SplitSource)(nil)
	_ *operator.WatermarkStrategy[int] = (*operator.WatermarkStrategy[int])((*WatermarkStrategy[int])(nil))
)

// GenOptions configure Generate.
type GenOptions struct {
	// Count is the number of records to generate over all subtasks; 0
	// generates without end.
	Count uint64
	// Rate is the number of records per second over all subtasks; 0 is as
	// fast as the job takes them.
	Rate float64
}

// Generate returns a source of f(0), f(1), ...: subtask i of p generates
// the sequence numbers i, i+p, i+2p, ... Its position is the count of
// records a subtask has generated, so it replays exactly.
func Generate[T any](f func(seq uint64) T, opts GenOptions) NewSource[T] {
	return func() SourceFunc[T] { return &generator[T]{f: f, opts: opts} }
}

type generator[T any] struct {
	f       func(uint64) T
	opts    GenOptions
	sub     uint64
	par     uint64
	emitted uint64 // records this subtask has generated
	limit   uint64 // records this subtask generates in all, if bounded
	bounded bool
	start   time.Time
	base    uint64  // emitted when pacing started
	rate    float64 // per subtask
}

func (g *generator[T]) Open(subtask, parallelism int, pos []byte) error {
	g.sub, g.par = uint64(subtask), uint64(parallelism)
	if pos != nil {
		if len(pos) != 8 {
			return fmt.Errorf("generator position of %d bytes, want 8", len(pos))
		}
		g.emitted = binary.LittleEndian.Uint64(pos)
	}
	if g.opts.Count > 0 {
		// Sequence numbers below Count that are ≡ subtask (mod p).
		g.limit, g.bounded = (g.opts.Count+g.par-1-g.sub)/g.par, true
	}
	g.rate = g.opts.Rate / float64(parallelism)
	g.start, g.base = time.Now(), g.emitted
	return nil
}

func (g *generator[T]) Read(buf []T) (int, error) {
	n := uint64(len(buf))
	if g.bounded {
		if g.emitted >= g.limit {
			return 0, io.EOF
		}
		n = min(n, g.limit-g.emitted)
	}
	if g.rate > 0 {
		due := g.base + uint64(time.Since(g.start).Seconds()*g.rate)
		if due <= g.emitted {
			return 0, nil
		}
		n = min(n, due-g.emitted)
	}
	for i := range n {
		buf[i] = g.f(g.sub + (g.emitted+i)*g.par)
	}
	g.emitted += n
	return int(n), nil
}

// NextReady implements Pacer.
func (g *generator[T]) NextReady() time.Time {
	if g.rate <= 0 {
		return time.Time{}
	}
	return g.start.Add(time.Duration(float64(g.emitted-g.base+1) / g.rate * float64(time.Second)))
}

func (g *generator[T]) Position() []byte { return binary.LittleEndian.AppendUint64(nil, g.emitted) }

func (g *generator[T]) Close() error { return nil }

// FromSlice returns a source of the records of xs: subtask i of p reads
// xs[i], xs[i+p], ...
func FromSlice[T any](xs []T) NewSource[T] {
	return Generate(func(seq uint64) T { return xs[seq] }, GenOptions{Count: uint64(len(xs))})
}

// FileLines returns a source of the lines of the file at path, without
// their line endings: subtask i of p reads lines i, i+p, ... Its position is
// the byte offset and number of the next line.
func FileLines(path string) NewSource[string] {
	return func() SourceFunc[string] { return &fileLines{path: path} }
}

type fileLines struct {
	path     string
	f        *os.File
	r        *bufio.Reader
	sub, par uint64
	offset   uint64 // byte offset of the next line
	line     uint64 // number of the next line
}

func (s *fileLines) Open(subtask, parallelism int, pos []byte) error {
	s.sub, s.par = uint64(subtask), uint64(parallelism)
	if pos != nil {
		if len(pos) != 16 {
			return fmt.Errorf("file position of %d bytes, want 16", len(pos))
		}
		s.offset, s.line = binary.LittleEndian.Uint64(pos), binary.LittleEndian.Uint64(pos[8:])
	}
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	if _, err := f.Seek(int64(s.offset), io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("seek %s to %d: %w", s.path, s.offset, err)
	}
	s.f, s.r = f, bufio.NewReaderSize(f, 64<<10)
	return nil
}

func (s *fileLines) Read(buf []string) (int, error) {
	n := 0
	for n < len(buf) {
		line, err := s.r.ReadString('\n')
		if err == io.EOF && line == "" {
			return n, io.EOF
		}
		if err != nil && err != io.EOF {
			return n, fmt.Errorf("read %s at byte %d: %w", s.path, s.offset, err)
		}
		s.offset += uint64(len(line))
		mine := s.line%s.par == s.sub
		s.line++
		if mine {
			buf[n] = trimEOL(line)
			n++
		}
	}
	return n, nil
}

func trimEOL(s string) string {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
		if len(s) > 0 && s[len(s)-1] == '\r' {
			s = s[:len(s)-1]
		}
	}
	return s
}

func (s *fileLines) Position() []byte {
	b := binary.LittleEndian.AppendUint64(nil, s.offset)
	return binary.LittleEndian.AppendUint64(b, s.line)
}

func (s *fileLines) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}

// BlockingReader reads the records of one subtask one at a time, and may
// block doing so (a socket, a pipe, a broker's client). See FromBlocking.
type BlockingReader[T any] interface {
	// Next returns the next record and the position after it: a position
	// to resume from, as SourceFunc.Position would return it after the
	// record (the source keeps the slice: Next must not change it later).
	// It returns io.EOF at the end of the input. ctx is done when the
	// source closes (the job ends, fails or restarts): a Next that blocks
	// should return then, with any error.
	Next(ctx context.Context) (rec T, pos []byte, err error)
	// Close releases the reader. It is called once ctx is done, maybe
	// while Next still blocks: a reader whose Next cannot wait on ctx (a
	// read from a connection) makes it return here.
	Close() error
}

// FromBlocking returns a source over readers that may block: open makes
// each subtask's reader, at pos (nil: the beginning). Each reader runs on
// a goroutine of its own, at most buffer records (at least 1) ahead of the
// job; the source's Read only takes what the goroutine has read. So a
// read that waits for input holds back neither the worker's other tasks
// nor checkpoints: a checkpoint's position is that of the last record Read
// handed over, and the records read ahead are read again after a restore.
// An error from open or Next fails the task, and the job restarts as
// Config.Restart says.
func FromBlocking[T any](open func(subtask, parallelism int, pos []byte) (BlockingReader[T], error), buffer int) NewSource[T] {
	return func() SourceFunc[T] { return &blockingSource[T]{open: open, buffer: max(buffer, 1)} }
}

type blockingSource[T any] struct {
	open   func(subtask, parallelism int, pos []byte) (BlockingReader[T], error)
	buffer int
	r      BlockingReader[T]
	recs   chan blockingRec[T]
	stop   context.CancelFunc
	done   chan struct{}
	pos    []byte
	err    error // the reader's final error (io.EOF at the end)
}

type blockingRec[T any] struct {
	rec T
	pos []byte
	err error
}

func (s *blockingSource[T]) Open(subtask, parallelism int, pos []byte) error {
	r, err := s.open(subtask, parallelism, pos)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	s.r, s.pos, s.stop = r, pos, stop
	s.recs, s.done = make(chan blockingRec[T], s.buffer), make(chan struct{})
	go s.readAhead(ctx)
	return nil
}

// readAhead runs on the source's goroutine until the reader fails or ends,
// or Close stops it.
func (s *blockingSource[T]) readAhead(ctx context.Context) {
	defer close(s.done)
	for {
		rec, pos, err := s.r.Next(ctx)
		select {
		case s.recs <- blockingRec[T]{rec, pos, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *blockingSource[T]) Read(buf []T) (int, error) {
	n := 0
take:
	for n < len(buf) && s.err == nil {
		select {
		case r := <-s.recs:
			if r.err != nil {
				s.err = r.err
				break take
			}
			buf[n], s.pos = r.rec, r.pos
			n++
		default:
			break take // nothing read ahead: (0, nil) lets the task go on
		}
	}
	switch {
	case s.err != nil && !errors.Is(s.err, io.EOF):
		return n, fmt.Errorf("blocking reader: %w", s.err)
	case n == 0 && s.err != nil:
		return 0, io.EOF
	}
	return n, nil
}

func (s *blockingSource[T]) Position() []byte { return s.pos }

func (s *blockingSource[T]) Close() error {
	if s.r == nil {
		return nil
	}
	s.stop()
	err := s.r.Close()
	<-s.done
	return err
}
