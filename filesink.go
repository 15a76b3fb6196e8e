package ringflow

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringflow/ringflow/operator"
)

// TwoPhaseSink is a transactional sink; see operator.TwoPhaseSink.
type TwoPhaseSink[T any] = operator.TwoPhaseSink[T]

// TxnSink adds a sink whose output becomes visible only when a checkpoint
// covering it completes: with checkpoints on, its output holds every record
// exactly once across failures and restarts. Each subtask uses its own
// sink from newSink.
func TxnSink[T any](s Stream[T], name string, newSink func() TwoPhaseSink[T], opts ...Option) {
	n, _ := s.job.addNode(name, opts, s.srcs)
	s.checkTimed(name)
	n.build = func(ctx *operator.Context, down any) ([]any, operator.Operator) {
		op := operator.NewTxnSink(newSink())
		return []any{operator.Input[T](op)}, op
	}
}

// FileSink returns a transactional sink that writes each record as a line
// of a part file in dir. A transaction is a part file under dir/.pending;
// committing renames it into dir. So dir only ever holds committed data:
// the files dir/part-<subtask>-<n> of completed checkpoints.
func FileSink(dir string) func() TwoPhaseSink[string] {
	return FileSinkOf(dir, func(b []byte, line string) []byte { return append(b, line...) })
}

// FileSinkOf is FileSink for records of any type: format appends a
// record's line, without its newline, to b and returns the result. The
// sink reuses b from record to record and copies the line into its
// buffered part file, so that, unlike formatting each record into a
// string, writing a record allocates nothing.
func FileSinkOf[T any](dir string, format func(b []byte, r T) []byte) func() TwoPhaseSink[T] {
	return func() TwoPhaseSink[T] { return &fileSink[T]{dir: dir, format: format} }
}

type fileSink[T any] struct {
	dir      string
	format   func([]byte, T) []byte
	line     []byte // format's buffer, reused
	sub, par int
	seq      uint64 // number of the next part file
	f        *os.File
	w        *bufio.Writer
	name     string
}

func (s *fileSink[T]) pendingDir() string { return filepath.Join(s.dir, ".pending") }

func (s *fileSink[T]) Open(subtask, parallelism int) error {
	s.sub, s.par = subtask, parallelism
	return os.MkdirAll(s.pendingDir(), 0o755)
}

// partSeq parses "part-<subtask>-<seq>".
func partSeq(name string) (sub int, seq uint64, ok bool) {
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
// continues numbering after every part file this subtask has.
func (s *fileSink[T]) Recover(txns [][]byte) error {
	for _, t := range txns {
		if err := s.Commit(t); err != nil {
			return err
		}
	}
	pending, err := os.ReadDir(s.pendingDir())
	if err != nil {
		return err
	}
	for _, e := range pending {
		sub, _, ok := partSeq(e.Name())
		if ok && (sub == s.sub || s.sub == 0 && sub >= s.par) {
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
		if sub, seq, ok := partSeq(e.Name()); ok && sub == s.sub && seq >= s.seq {
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
		s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	s.line = append(s.format(s.line[:0], r), '\n')
	_, err := s.w.Write(s.line)
	return err
}

func (s *fileSink[T]) PreCommit() ([]byte, func() error, error) {
	if s.f == nil {
		return nil, nil, nil
	}
	f := s.f
	err := s.w.Flush()
	s.f, s.w = nil, nil
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	durable := func() error {
		err := f.Sync()
		return errors.Join(err, f.Close())
	}
	return []byte(s.name), durable, nil
}

func (s *fileSink[T]) Commit(txn []byte) error {
	name := string(txn)
	if _, _, ok := partSeq(name); !ok {
		return fmt.Errorf("file sink: %q is not a part file name", name)
	}
	err := os.Rename(filepath.Join(s.pendingDir(), name), filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(filepath.Join(s.dir, name)); statErr == nil {
			return nil // committed before: commits are idempotent
		}
		return fmt.Errorf("file sink: commit %s: neither pending nor committed", name)
	}
	if err != nil {
		return err
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *fileSink[T]) Close() error {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	return nil
}

// ReadFileSink returns the lines of every committed part file of a
// FileSink directory, in no particular order: the sink's committed output.
func ReadFileSink(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range entries {
		if _, _, ok := partSeq(e.Name()); !ok || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines, nil
}
