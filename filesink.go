package ringflow

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringflow/ringflow/internal/operator"
)

// TwoPhaseSink is a sink whose output becomes visible only when a
// checkpoint that covers it completes (Flink's TwoPhaseCommitSinkFunction),
// as TxnSink runs it. Records go into the current transaction; when a
// checkpoint's barrier reaches the sink, the transaction is pre-committed
// (made durable but kept invisible) and a new one begins; when that
// checkpoint completes, the transaction is committed. A restored job
// commits again the transactions of the checkpoint it restores, so Commit
// must be idempotent. Without checkpoints, the one transaction is
// committed at the end of input.
//
// Its methods run on the subtask's worker thread, one at a time, but for
// the durable function PreCommit returns. While one blocks, the worker's
// other tasks wait: the calls that may wait on an external system (a
// broker, a database) — Open, Recover, Commit and the durable function —
// are given the context of the job's attempt, which is done when the
// attempt ends (the job is cancelled, stops or ends, or another task
// fails), and should return then. An error from any of them, or a panic,
// fails the task with an *OperatorError naming the operator and subtask,
// and the job restarts as Config.Restart says. A TwoPhaseSink
// that implements CheckpointListener is told when checkpoints complete,
// after its transactions up to them are committed. FileSink and its
// variants are TwoPhaseSinks.
type TwoPhaseSink[T any] interface {
	// Open prepares subtask of parallelism (subtask in [0, parallelism)).
	Open(ctx context.Context, subtask, parallelism int) error
	// Recover is called once after Open, before any record: it commits the
	// transactions txns (pre-committed in the restored checkpoint; none on
	// a fresh start) and discards every other transaction this subtask
	// left behind. After a restore at another parallelism p, subtask i is
	// given the transactions of every earlier subtask j with j % p == i;
	// a sink that cleans up after vanished subtasks by the same rule never
	// discards a transaction another subtask is given to commit.
	Recover(ctx context.Context, txns [][]byte) error
	// Write adds a record to the current transaction.
	Write(rec T) error
	// PreCommit ends the current transaction. It returns its handle (nil
	// for an empty transaction), which the checkpoint keeps and Commit
	// and Recover are given, and a function (or nil) that makes the
	// transaction durable: it runs on a goroutine of its own, off the
	// task's thread, and the checkpoint completes only once it has
	// returned nil. It is given the context of the attempt that took the
	// checkpoint.
	PreCommit() (txn []byte, durable func(ctx context.Context) error, err error)
	// Commit makes a pre-committed transaction visible. It is idempotent:
	// committing a transaction committed already does nothing.
	Commit(ctx context.Context, txn []byte) error
	// Close releases what the sink holds; an open transaction is dropped.
	Close() error
}

var (
	_ operator.TwoPhaseSink[int] = (TwoPhaseSink[int])(nil)
	_ TwoPhaseSink[int]          = (operator.TwoPhaseSink[int])(nil)
)

// TxnSink adds a sink whose output becomes visible only when a checkpoint
// covering it completes: with checkpoints on, its output holds every record
// exactly once across failures and restarts. Each subtask uses its own
// sink from newSink.
func TxnSink[T any](s Stream[T], name string, newSink func() TwoPhaseSink[T], opts ...SinkOption) {
	n := s.job.addSink(name, opts, s.srcs)
	s.checkTimed(name)
	j := s.job
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		sink := newSink()
		if o, ok := sink.(ownedSink); ok {
			o.setOwner(func() identity { return j.identity })
		}
		op := operator.NewTxnSink[T](sink)
		return []any{operator.Input[T](op)}, op
	}
}

// ownedSink is a sink that records which job and run own its output.
type ownedSink interface{ setOwner(func() identity) }

// FileSink returns a transactional sink that writes each record as a line
// of a part file in dir. A transaction is a part file under dir/.pending;
// committing renames it into dir. So dir only ever holds committed data:
// the files dir/part-<subtask>-<n> of completed checkpoints. The kernel
// is asked to write a part back to the disk as it grows, so that the sync
// that makes it durable at a checkpoint has little left to write.
func FileSink(dir string) func() TwoPhaseSink[string] { return FileSinkWith(dir, FileSinkOptions{}) }

// FileSinkOptions configure FileSinkWith, FileSinkOfWith and
// FileSinkEncoded.
type FileSinkOptions struct {
	// Fresh deletes the output of another job or run found in the
	// directory (its part files and pending transactions) and takes the
	// directory over. The job's own output, when it restarts or resumes,
	// is kept.
	Fresh bool
}

// FileSinkWith is FileSink with options.
func FileSinkWith(dir string, opts FileSinkOptions) func() TwoPhaseSink[string] {
	return FileSinkOfWith(dir, opts, appendString)
}

func appendString(b []byte, line string) []byte { return append(b, line...) }

// FileSinkOf is FileSink for records of any type: format appends a
// record's line, without its newline, to b and returns the result. The
// sink reuses b from record to record and copies the line into its
// buffered part file, so that, unlike formatting each record into a
// string, writing a record allocates nothing.
func FileSinkOf[T any](dir string, format func(b []byte, r T) []byte) func() TwoPhaseSink[T] {
	return FileSinkOfWith(dir, FileSinkOptions{}, format)
}

// FileSinkOfWith is FileSinkOf with options.
func FileSinkOfWith[T any](dir string, opts FileSinkOptions, format func(b []byte, r T) []byte) func() TwoPhaseSink[T] {
	if format == nil {
		return FileSinkEncoded[T](dir, opts, nil)
	}
	return FileSinkEncoded(dir, opts, func(b []byte, r T) ([]byte, error) { return format(b, r), nil })
}

// LineEncoder appends the encoding of record r, one line without its
// newline, to b and returns the result; an error fails the job. The line
// must not hold a newline (it would read back as two records): a file
// sink fails the job on one, naming the sink.
type LineEncoder[T any] func(b []byte, r T) ([]byte, error)

// JSONLines returns a LineEncoder that writes each record as one line of
// JSON, as encoding/json's Marshal encodes it (JSON Lines: Marshal escapes
// every newline inside a value). ReadFileSinkJSON reads such a sink's
// committed output back.
func JSONLines[T any]() LineEncoder[T] {
	return func(b []byte, r T) ([]byte, error) {
		j, err := json.Marshal(r)
		if err != nil {
			return b, err
		}
		return append(b, j...), nil
	}
}

// FileSinkEncoded is FileSink for records of any type, each written as
// the line enc makes of it (JSONLines, or an encoder of its own); the
// commit protocol is FileSink's. An encoder's error fails the job, naming
// the sink's directory.
func FileSinkEncoded[T any](dir string, opts FileSinkOptions, enc LineEncoder[T]) func() TwoPhaseSink[T] {
	return func() TwoPhaseSink[T] { return &fileSink[T]{dir: dir, fresh: opts.Fresh, encode: enc} }
}

// ownerFile is the file in a FileSink directory that names its owner.
const ownerFile = ".ringflow-owner"

type fileSink[T any] struct {
	dir      string
	fresh    bool
	owner    func() identity // nil outside a job
	encode   LineEncoder[T]
	line     []byte // encode's buffer, reused
	sub, par int
	seq      uint64 // number of the next part file
	f        *os.File
	wb       *writeBehind // under w: starts f's write-back as it grows
	w        *bufio.Writer
	name     string
}

func (s *fileSink[T]) pendingDir() string { return filepath.Join(s.dir, ".pending") }

func (s *fileSink[T]) setOwner(f func() identity) { s.owner = f }

func (s *fileSink[T]) Open(_ context.Context, subtask, parallelism int) error {
	s.sub, s.par = subtask, parallelism
	if s.encode == nil {
		return fmt.Errorf("file sink %s: the record encoder is nil", s.dir)
	}
	if err := os.MkdirAll(s.pendingDir(), 0o755); err != nil {
		return err
	}
	if s.owner == nil {
		return nil
	}
	return s.claim(s.owner())
}

// claim makes sure the directory is the output of job id: it is if its
// owner file says so; it becomes so if it holds no output (or Fresh
// deletes what it holds).
func (s *fileSink[T]) claim(id identity) error {
	b, err := os.ReadFile(filepath.Join(s.dir, ownerFile))
	var other string
	switch {
	case err == nil:
		was, ok := parseIdentity(string(b))
		if ok && was.job == id.job && was.run == id.run {
			return nil
		}
		other = fmt.Sprintf("the output of %s", was)
		if !ok {
			other = fmt.Sprintf("output whose owner file is unreadable (%q)", b)
		}
	case errors.Is(err, fs.ErrNotExist):
		parts, err := s.outputFiles()
		if err != nil {
			return err
		}
		if len(parts) == 0 {
			return s.own(id)
		}
		other = fmt.Sprintf("%d files of output that no job claims (%s, ...)", len(parts), filepath.Base(parts[0]))
	default:
		return err
	}
	if !s.fresh {
		return fmt.Errorf("%w: %s holds %s; this is %s, and its output would mix with it (use another directory, or FileSinkOptions.Fresh to delete that output)",
			ErrSinkOwned, s.dir, other, id)
	}
	parts, err := s.outputFiles()
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("file sink: start %s afresh: %w", s.dir, err)
		}
	}
	return s.own(id)
}

// own records id as the directory's owner.
func (s *fileSink[T]) own(id identity) error {
	data := id.encode()
	if id.stateDir != "" {
		data += "state " + id.stateDir + "\n"
	}
	if err := writeFileAtomic(s.dir, ownerFile, data); err != nil {
		return fmt.Errorf("file sink: record the owner of %s: %w", s.dir, err)
	}
	return nil
}

// outputFiles lists the committed and pending part files of the
// directory.
func (s *fileSink[T]) outputFiles() ([]string, error) {
	var out []string
	for _, dir := range []string{s.dir, s.pendingDir()} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, _, ok := FileSinkPart(e.Name()); ok && !e.IsDir() {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out, nil
}

// FileSinkPart parses the name of a file sink's part file,
// "part-<subtask>-<seq>": the sink subtask that wrote it and its sequence
// number among that subtask's parts (commit order). ok is false for any
// other name. Tools that read a sink's directory while the job runs (the
// committed parts are the ones there) use it to order the parts.
func FileSinkPart(name string) (subtask int, seq uint64, ok bool) {
	f := strings.Split(name, "-")
	if len(f) != 3 || f[0] != "part" {
		return 0, 0, false
	}
	sub, err1 := strconv.Atoi(f[1])
	seq, err2 := strconv.ParseUint(f[2], 10, 64)
	return sub, seq, err1 == nil && err2 == nil
}

// Recover commits txns, then removes every other pending part file of this
// subtask (and, on subtask 0, of subtasks that no longer exist), and
// continues numbering after every part file this subtask has. A
// transaction that is neither pending nor committed fails it, unless the
// directory holds no committed part at all: then the job was restored
// from a savepoint into a directory of its own, and the transaction was
// committed where the job that took the savepoint wrote.
func (s *fileSink[T]) Recover(ctx context.Context, txns [][]byte) error {
	for _, t := range txns {
		err := s.Commit(ctx, t)
		if errors.Is(err, errTxnMissing) {
			var parts []string
			if parts, err = s.committedParts(); err == nil && len(parts) > 0 {
				err = fmt.Errorf("file sink: commit %s: %w", t, errTxnMissing)
			}
		}
		if err != nil {
			return err
		}
	}
	pending, err := os.ReadDir(s.pendingDir())
	if err != nil {
		return err
	}
	for _, e := range pending {
		sub, _, ok := FileSinkPart(e.Name())
		// NB: the parts of earlier subtask j are this one's if j % par is
		// its index: the engine gives it their transactions (which the
		// loop above committed), and no other subtask may remove them
		// meanwhile.
		if ok && sub%s.par == s.sub {
			if err := os.Remove(filepath.Join(s.pendingDir(), e.Name())); err != nil {
				return err
			}
		}
	}
	committed, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range committed {
		if sub, seq, ok := FileSinkPart(e.Name()); ok && sub == s.sub && seq >= s.seq {
			s.seq = seq + 1
		}
	}
	return nil
}

func (s *fileSink[T]) Write(r T) error {
	if s.f == nil {
		s.name = fmt.Sprintf("part-%d-%d", s.sub, s.seq)
		s.seq++
		f, err := os.OpenFile(filepath.Join(s.pendingDir(), s.name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		s.f, s.wb = f, newWriteBehind(f)
		s.w = bufio.NewWriterSize(s.wb, 64<<10)
	}
	line, err := s.encode(s.line[:0], r)
	if err != nil {
		return fmt.Errorf("file sink %s: encode a %T: %w", s.dir, r, err)
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		return fmt.Errorf("file sink %s: the line of a %T holds a newline at byte %d (%.40q): it would read back as two records",
			s.dir, r, i, line)
	}
	s.line = append(line, '\n')
	_, err = s.w.Write(s.line)
	return err
}

// PreCommit flushes the part file; its durable function syncs and closes
// it. A local file's sync does not wait on ctx.
func (s *fileSink[T]) PreCommit() ([]byte, func(context.Context) error, error) {
	if s.f == nil {
		return nil, nil, nil
	}
	f := s.f
	err := s.w.Flush()
	s.f, s.wb, s.w = nil, nil, nil
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	durable := func(context.Context) error {
		err := f.Sync()
		return errors.Join(err, f.Close())
	}
	return []byte(s.name), durable, nil
}

func (s *fileSink[T]) Commit(_ context.Context, txn []byte) error {
	name := string(txn)
	if _, _, ok := FileSinkPart(name); !ok {
		return fmt.Errorf("file sink: %q is not a part file name", name)
	}
	err := os.Rename(filepath.Join(s.pendingDir(), name), filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(filepath.Join(s.dir, name)); statErr == nil {
			return nil // committed before: commits are idempotent
		}
		return fmt.Errorf("file sink: commit %s: %w", name, errTxnMissing)
	}
	if err != nil {
		return err
	}
	return syncDir(s.dir)
}

// errTxnMissing says a transaction to commit is neither pending nor
// committed.
var errTxnMissing = errors.New("neither pending nor committed")

// committedParts lists the committed part files of the directory.
func (s *fileSink[T]) committedParts() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if _, _, ok := FileSinkPart(e.Name()); ok && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close drops the open transaction, if there is one: its part file was
// never pre-committed, so no checkpoint refers to it, and a run that
// resumes writes its records again.
func (s *fileSink[T]) Close() error {
	if s.f != nil {
		s.f.Close()
		s.f = nil
		os.Remove(filepath.Join(s.pendingDir(), s.name))
	}
	return nil
}

// ReadFileSinkJSON returns the records of every committed part file of a
// file sink directory written with JSONLines, in no particular order: the
// sink's committed output. A line that is not JSON for a T is an error
// naming its file and line.
func ReadFileSinkJSON[T any](dir string) ([]T, error) {
	var out []T
	err := readParts(dir, func(part string, n int, line []byte) error {
		var r T
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("file sink %s: %s line %d: %w", dir, part, n, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// readParts calls f with every non-empty line of every committed part
// file of dir, with the part's name and the line's number (from 1).
func readParts(dir string, f func(part string, n int, line []byte) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, _, ok := FileSinkPart(e.Name()); !ok || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		for n, l := range bytes.Split(b, []byte{'\n'}) {
			if len(l) == 0 {
				continue
			}
			if err := f(e.Name(), n+1, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadFileSink returns the lines of every committed part file of a
// FileSink directory, in no particular order: the sink's committed output.
func ReadFileSink(dir string) ([]string, error) {
	var lines []string
	err := readParts(dir, func(_ string, _ int, line []byte) error {
		lines = append(lines, string(line))
		return nil
	})
	return lines, err
}
