package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnHandle is what a checkpoint keeps of a pre-committed transaction: all
// it takes to commit it from another process, and the layout of the
// transactional ids of the subtask that opened it, so that a restore at
// another parallelism fences every id an old subtask used. An empty
// handle (id "") stands for a checkpoint in which the subtask wrote
// nothing; it carries the layout alone. The prefix of the subtask's
// transactional ids lets whoever restores the handle fence them, though
// its own prefix differs (a process of a distributed job rescaled to
// fewer processes fences the ids of the old processes it stands in for).
type txnHandle struct {
	id          string // transactional id
	producerID  int64
	epoch       int16
	subtask     int
	parallelism int
	pool        int    // transactional ids per subtask
	prefix      string // of the subtask's transactional ids; "" in version 1
}

const handleVersion = 2

var errBadHandle = errors.New("kafka sink: corrupt transaction handle")

// encode lays the handle out as:
//
//	version byte (2)
//	uvarint len(id), id
//	varint producer id, varint epoch
//	uvarint subtask, uvarint parallelism, uvarint pool
//	uvarint len(prefix), prefix
//
// Version 1 ends before the prefix.
func (h txnHandle) encode() []byte {
	b := []byte{handleVersion}
	b = binary.AppendUvarint(b, uint64(len(h.id)))
	b = append(b, h.id...)
	b = binary.AppendVarint(b, h.producerID)
	b = binary.AppendVarint(b, int64(h.epoch))
	b = binary.AppendUvarint(b, uint64(h.subtask))
	b = binary.AppendUvarint(b, uint64(h.parallelism))
	b = binary.AppendUvarint(b, uint64(h.pool))
	b = binary.AppendUvarint(b, uint64(len(h.prefix)))
	return append(b, h.prefix...)
}

func decodeHandle(b []byte) (txnHandle, error) {
	var h txnHandle
	if len(b) == 0 || b[0] != 1 && b[0] != handleVersion {
		return h, fmt.Errorf("%w: version %v, want 1 or %d", errBadHandle, b[:min(len(b), 1)], handleVersion)
	}
	version := b[0]
	b = b[1:]
	l, k := binary.Uvarint(b)
	if k <= 0 || l > uint64(len(b)-k) {
		return h, errBadHandle
	}
	h.id, b = string(b[k:k+int(l)]), b[k+int(l):]
	var vs [5]int64
	for i := range vs {
		var v int64
		if i < 2 {
			v, k = binary.Varint(b)
		} else {
			var u uint64
			u, k = binary.Uvarint(b)
			v = int64(u)
		}
		if k <= 0 {
			return h, errBadHandle
		}
		vs[i], b = v, b[k:]
	}
	if version >= 2 {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return h, errBadHandle
		}
		h.prefix, b = string(b[k:k+int(l)]), b[k+int(l):]
	}
	if len(b) != 0 {
		return h, errBadHandle
	}
	h.producerID, h.epoch = vs[0], int16(vs[1])
	h.subtask, h.parallelism, h.pool = int(vs[2]), int(vs[3]), int(vs[4])
	if h.parallelism <= 0 || h.pool <= 0 {
		return h, fmt.Errorf("%w: parallelism %d, pool %d", errBadHandle, h.parallelism, h.pool)
	}
	return h, nil
}

func (h txnHandle) empty() bool { return h.id == "" }

func (h txnHandle) String() string {
	return fmt.Sprintf("%s (producer %d, epoch %d)", h.id, h.producerID, h.epoch)
}

// transactionalID names slot of subtask's pool.
func transactionalID(prefix string, subtask, slot int) string {
	return fmt.Sprintf("%s-%d-%d", prefix, subtask, slot)
}

// ErrTransactionAborted says that a transaction a checkpoint holds as
// pre-committed was aborted instead (see Recover in the package doc): its
// records are lost to the output.
var ErrTransactionAborted = errors.New("kafka sink: a pre-committed transaction was aborted")

// retriableTxn reports whether a transaction coordinator's error passes by
// itself: the coordinator is busy ending another transaction of the id, or
// loading.
func retriableTxn(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator)
}

// retryTxn calls f until it returns an error that does not pass by itself
// (or nil), or ctx is done, backing off between tries.
func retryTxn(ctx context.Context, f func() error) error {
	backoff := txnRetryMin
	for {
		err := f()
		if !retriableTxn(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, txnRetryMax)
	}
}

// endTxn commits the transaction h names with a raw EndTxn request, as
// its producer would: from a process that did not open it.
func endTxn(ctx context.Context, cl *kgo.Client, h txnHandle) error {
	return retryTxn(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = h.id, h.producerID, h.epoch, true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// fence initializes transactional id with a raw InitProducerID request:
// the coordinator bumps the id's epoch, so that a producer still holding
// the old one (a zombie) can write no more, and aborts the transaction
// the id has open, if any.
func fence(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration) error {
	return retryTxn(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}
