package operator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// TwoPhaseSink is a sink whose output becomes visible only when a
// checkpoint that covers it completes. It is the runtime's side of
// ringflow.TwoPhaseSink, whose doc states the contract (pre-commit at the
// barrier, commit on completion, idempotent commits, the attempt's context
// where a call may block); the root package checks at compile time that
// the two method sets stay identical.
type TwoPhaseSink[T any] interface {
	Open(ctx context.Context, subtask, parallelism int) error
	Recover(ctx context.Context, txns [][]byte) error
	Write(rec T) error
	PreCommit() (txn []byte, durable func(ctx context.Context) error, err error)
	Commit(ctx context.Context, txn []byte) error
	Close() error
}

type pendingTxn struct {
	checkpoint uint64
	txn        []byte
}

// TxnSink runs a TwoPhaseSink.
type TxnSink[T any] struct {
	Base
	sink    TwoPhaseSink[T]
	pending []pendingTxn // pre-committed, not yet committed
	restore [][]byte     // transactions to commit at Recover
}

// NewTxnSink returns the operator for sink.
func NewTxnSink[T any](sink TwoPhaseSink[T]) *TxnSink[T] { return &TxnSink[T]{sink: sink} }

// Open implements Operator.
func (s *TxnSink[T]) Open(ctx *Context) (err error) {
	s.Ctx = ctx
	defer recoverTo(ctx, &err)
	if err := ctx.Declare("txns", "pre-committed transactions"); err != nil {
		return err
	}
	if err := s.sink.Open(ctx.Ctx(), ctx.Subtask, ctx.Parallelism); err != nil {
		return err
	}
	s.restore = [][]byte{} // a fresh start recovers nothing but still cleans up
	return nil
}

// Push implements Input.
func (s *TxnSink[T]) Push(recs []T, _ []int64) {
	defer Guard(s.Ctx)
	if s.restore != nil {
		s.recover()
	}
	for i := range recs {
		if err := s.sink.Write(recs[i]); err != nil {
			Fail(s.Ctx, err)
		}
	}
}

// recover runs the sink's Recover once, before the first record or
// checkpoint.
func (s *TxnSink[T]) recover() {
	txns := s.restore
	s.restore = nil
	if err := s.sink.Recover(s.Ctx.Ctx(), txns); err != nil {
		Fail(s.Ctx, fmt.Errorf("recover transactions: %w", err))
	}
}

// SnapshotState implements Checkpointed: it pre-commits the current
// transaction; the snapshot stores every transaction not yet committed.
func (s *TxnSink[T]) SnapshotState(id uint64) (StateSnapshot, error) {
	if s.restore != nil {
		s.recover()
	}
	txn, durable, err := s.sink.PreCommit()
	if err != nil {
		return nil, fmt.Errorf("pre-commit: %w", err)
	}
	if txn != nil {
		s.pending = append(s.pending, pendingTxn{id, txn})
	}
	return &txnSnapshot{ctx: s.Ctx.Ctx(), durable: durable, blob: encodeTxns(s.pending)}, nil
}

// NotifyComplete implements CheckpointListener: every transaction
// pre-committed up to checkpoint id is committed; then a sink that listens
// is told.
func (s *TxnSink[T]) NotifyComplete(id uint64) error {
	kept := s.pending[:0]
	for _, p := range s.pending {
		if p.checkpoint > id {
			kept = append(kept, p)
			continue
		}
		if err := s.sink.Commit(s.Ctx.Ctx(), p.txn); err != nil {
			return err
		}
	}
	s.pending = kept
	defer Guard(s.Ctx)
	if l, ok := s.sink.(CheckpointListener); ok {
		return l.NotifyComplete(id)
	}
	return nil
}

// NotifyAborted implements CheckpointListener: the transaction stays
// pending and is committed with the next checkpoint that completes; a sink
// that listens is told.
func (s *TxnSink[T]) NotifyAborted(id uint64) {
	defer Guard(s.Ctx)
	if l, ok := s.sink.(CheckpointListener); ok {
		l.NotifyAborted(id)
	}
}

// RestoreState implements Checkpointed: subtask i takes over the
// transactions of the previous run's subtasks j with j % parallelism == i.
func (s *TxnSink[T]) RestoreState(r StateReader) error {
	s.restore = [][]byte{}
	for j, blob := range r.Subtask("txns") {
		if j%s.Ctx.Parallelism != s.Ctx.Subtask {
			continue
		}
		txns, err := decodeTxns(blob)
		if err != nil {
			return err
		}
		for _, p := range txns {
			s.restore = append(s.restore, p.txn)
		}
	}
	return nil
}

// End implements Operator. Without checkpoints nothing else would ever
// commit, so the output is committed at the end of input.
func (s *TxnSink[T]) End() {
	defer Guard(s.Ctx)
	if s.restore != nil {
		s.recover()
	}
	if s.Ctx.Checkpoints {
		return // the final checkpoint commits
	}
	ctx := s.Ctx.Ctx()
	txn, durable, err := s.sink.PreCommit()
	if err == nil && durable != nil {
		err = durable(ctx)
	}
	if err == nil && txn != nil {
		err = s.sink.Commit(ctx, txn)
	}
	if err != nil {
		Fail(s.Ctx, fmt.Errorf("commit at end of input: %w", err))
	}
}

// Close implements Operator.
func (s *TxnSink[T]) Close() error { return s.sink.Close() }

// FinalCommitter is an operator with transactions that a job's final
// checkpoint may leave pre-committed: the job finished, but the commits
// that follow the checkpoint may not all have run (a failure came
// between, or the process died).
type FinalCommitter interface {
	// CommitFinal opens the operator alone with ctx, restores its state
	// from r and commits what it restores, then closes it.
	CommitFinal(ctx *Context, r StateReader) error
}

// CommitFinal implements FinalCommitter: the sink recovers the final
// checkpoint's transactions (Recover commits them; a commit is
// idempotent) and closes.
func (s *TxnSink[T]) CommitFinal(ctx *Context, r StateReader) (err error) {
	if err := s.Open(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	if err := s.RestoreState(r); err != nil {
		return err
	}
	defer recoverTo(ctx, &err)
	txns := s.restore
	s.restore = nil
	return s.sink.Recover(ctx.Ctx(), txns)
}

type txnSnapshot struct {
	// ctx is the attempt's context, which durable is given.
	ctx     context.Context
	durable func(context.Context) error
	blob    []byte
}

// TakeBeforeCommit implements EarlyBeforeCommit: the sink's durable work,
// which needs nothing of the write-out.
func (t *txnSnapshot) TakeBeforeCommit() func() error {
	durable, ctx := t.durable, t.ctx
	t.durable = nil
	if durable == nil {
		return nil
	}
	return func() error {
		if err := durable(ctx); err != nil {
			return fmt.Errorf("make transaction durable: %w", err)
		}
		return nil
	}
}

func (t *txnSnapshot) WriteTo(w StateWriter) error {
	if fn := t.TakeBeforeCommit(); fn != nil {
		w.BeforeCommit(fn)
	}
	return w.PutSubtask("txns", t.blob)
}

func (t *txnSnapshot) Release() {}

func encodeTxns(ps []pendingTxn) []byte {
	b := binary.AppendUvarint(nil, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, p.checkpoint)
		b = binary.AppendUvarint(b, uint64(len(p.txn)))
		b = append(b, p.txn...)
	}
	return b
}

var errBadTxns = errors.New("corrupt sink transaction list")

func decodeTxns(b []byte) ([]pendingTxn, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errBadTxns
	}
	b = b[k:]
	out := make([]pendingTxn, 0, n)
	for range n {
		id, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return nil, errBadTxns
		}
		l, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || l > uint64(len(b)-k1-k2) {
			return nil, errBadTxns
		}
		start := k1 + k2
		out = append(out, pendingTxn{id, append([]byte(nil), b[start:start+int(l)]...)})
		b = b[start+int(l):]
	}
	if len(b) != 0 {
		return nil, errBadTxns
	}
	return out, nil
}
