package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringflow/ringflow"
)

// Delivery is the guarantee a sink gives for what it writes.
type Delivery int

const (
	// DeliveryDefault is ExactlyOnce in a job with checkpoints and
	// AtLeastOnce in one without (where exactly-once would make the
	// whole run one transaction, committed at its end).
	DeliveryDefault Delivery = iota
	// ExactlyOnce writes each checkpoint's records in a Kafka
	// transaction, committed when the checkpoint completes.
	ExactlyOnce
	// AtLeastOnce waits, for each checkpoint, until the brokers have
	// acknowledged every record written before it; a restore writes
	// again the records after the checkpoint it restores.
	AtLeastOnce
	// NoGuarantee produces and never waits: a failure may lose records.
	NoGuarantee
)

func (d Delivery) String() string {
	switch d {
	case DeliveryDefault:
		return "default"
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	case NoGuarantee:
		return "none"
	}
	return fmt.Sprintf("Delivery(%d)", int(d))
}

// SinkConfig configures Sink.
type SinkConfig[T any] struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// Topic is where a record goes whose Encode leaves its Topic empty.
	Topic string
	// Encode makes the Kafka record of a record (its Key, Value,
	// Headers, Timestamp; Topic and Partition if it chooses them). The
	// sink keeps the record until the broker has it. Exactly one of
	// Encode and EncodeTo is required.
	Encode func(T) (*kgo.Record, error)
	// EncodeTo, instead of Encode, fills in a record the sink hands it,
	// so that writing a record allocates nothing: the sink reuses a
	// record once the broker has it, its fields zero but for Key, Value
	// and Headers, which keep their capacity at length 0 to be appended
	// to. EncodeTo must not keep r or what it holds.
	EncodeTo func(rec T, r *kgo.Record) error
	// Delivery is the guarantee; DeliveryDefault by default.
	Delivery Delivery

	// TransactionalIDPrefix starts the transactional ids of an
	// exactly-once sink: subtask s uses <prefix>-<s>-<slot> for slot in
	// [0, PoolSize). By default it is "ringflow-<job id>-<operator>",
	// which a job keeps across restarts and runs on its state directory.
	// Two jobs (or sinks) writing at once must not share a prefix: each
	// would fence the other.
	TransactionalIDPrefix string
	// PoolSize is the number of transactional ids of each subtask: the
	// transactions it may have open at once, its current one and those
	// pre-committed for checkpoints that are not complete yet. 5 by
	// default; a subtask that needs one more fails (see the package doc).
	PoolSize int
	// TransactionTimeout is how long the brokers keep a transaction open
	// before they abort it (transaction.timeout.ms); 15 minutes by
	// default, the brokers' default transaction.max.timeout.ms. It must
	// exceed the time from a checkpoint's barrier to its completion, and,
	// for a pre-committed transaction to outlive a failure, the time to
	// restart the job too: see the package doc.
	TransactionTimeout time.Duration

	// Linger is how long the producer waits to fill a batch; the
	// client's default (none) if 0.
	Linger time.Duration
	// BatchMaxBytes bounds a record batch; the client's default (about
	// 1 MB) if 0.
	BatchMaxBytes int32
	// Compression is the codecs the producer prefers, in order; the
	// client's default (snappy, then none) if nil.
	Compression []kgo.CompressionCodec
	// Retries bounds how often a record is retried; the client's default
	// (until the delivery timeout) if 0.
	Retries int
	// ClientOpts are added to the producer clients' options (TLS, SASL, a
	// logger, ...) after the sink's own.
	ClientOpts []kgo.Opt
	// Logger receives what the sink logs (transactions that a recovery
	// found committed before); nil is slog.Default().
	Logger *slog.Logger
}

func (c *SinkConfig[T]) check() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Brokers"))
	}
	switch {
	case c.Encode == nil && c.EncodeTo == nil:
		errs = append(errs, errors.New("no Encode or EncodeTo function"))
	case c.Encode != nil && c.EncodeTo != nil:
		errs = append(errs, errors.New("both Encode and EncodeTo: give one"))
	}
	if c.Delivery < DeliveryDefault || c.Delivery > NoGuarantee {
		errs = append(errs, fmt.Errorf("unknown Delivery %d", int(c.Delivery)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka sink config: %w", err)
	}
	return nil
}

func (c SinkConfig[T]) withDefaults() SinkConfig[T] {
	if c.PoolSize <= 0 {
		c.PoolSize = defaultPoolSize
	}
	if c.TransactionTimeout <= 0 {
		c.TransactionTimeout = defaultTransactionTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// producerOpts are the options of every producer client of the sink.
func (c *SinkConfig[T]) producerOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.Linger > 0 {
		opts = append(opts, kgo.ProducerLinger(c.Linger))
	}
	if c.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.BatchMaxBytes))
	}
	if c.Compression != nil {
		opts = append(opts, kgo.ProducerBatchCompression(c.Compression...))
	}
	if c.Retries > 0 {
		opts = append(opts, kgo.RecordRetries(c.Retries))
	}
	return append(opts, c.ClientOpts...)
}

// Sink returns a transactional sink that writes each record as the Kafka
// record cfg.Encode makes of it, with cfg.Delivery's guarantee: for
// ringflow.TxnSink.
func Sink[T any](cfg SinkConfig[T]) func() ringflow.TwoPhaseSink[T] {
	cfg = cfg.withDefaults()
	return func() ringflow.TwoPhaseSink[T] { return &sink[T]{cfg: cfg} }
}

var _ ringflow.TwoPhaseSink[int] = (*sink[int])(nil)

// ErrPoolExhausted says that every transactional id of a subtask holds a
// transaction not yet committed, so the subtask cannot begin another.
var ErrPoolExhausted = errors.New("kafka sink: every transactional id holds a transaction awaiting its checkpoint")

type sink[T any] struct {
	cfg      SinkConfig[T]
	ctx      context.Context // the attempt's, for produces
	delivery Delivery
	sub, par int
	prefix   string

	// client issues raw transaction requests and, without exactly-once,
	// produces.
	client *kgo.Client
	gen    *generation // records produced since the last checkpoint, without exactly-once

	slots []*slot
	cur   *slot // holds the open transaction; nil before the first record after a checkpoint

	pool *recordPool // with EncodeTo; nil with Encode

	// flushed is closed once every record of the transaction before the
	// open one is in the log; nil when that is known. Until then the open
	// transaction's records wait in held. A subtask's transactions are on
	// different producers, which would interleave their records in a
	// partition; held keeps each partition in the order the subtask wrote
	// it, as one producer does and as the watermarks and end markers of a
	// repartition topic need.
	flushed chan struct{}
	held    []*kgo.Record
}

// recordPool recycles a sink's records for EncodeTo. The task takes
// records from free; the promises, on the client's goroutines, return
// them to back, which the task takes over whole when free runs dry. It
// holds at most as many records as the clients buffer at once.
type recordPool struct {
	free []*kgo.Record
	mu   sync.Mutex
	back []*kgo.Record
}

func (p *recordPool) get() *kgo.Record {
	if len(p.free) == 0 {
		p.mu.Lock()
		p.free, p.back = p.back, p.free
		p.mu.Unlock()
		if len(p.free) == 0 {
			return new(kgo.Record)
		}
	}
	r := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return r
}

// put takes back a record the client is done with.
func (p *recordPool) put(r *kgo.Record) {
	*r = kgo.Record{Key: r.Key[:0], Value: r.Value[:0], Headers: r.Headers[:0]}
	p.mu.Lock()
	p.back = append(p.back, r)
	p.mu.Unlock()
}

// slot is one transactional id of the subtask's pool and its producer.
type slot struct {
	id      string
	cl      *kgo.Client
	open    bool       // holds the current transaction
	pending *txnHandle // pre-committed, awaiting Commit
	err     atomic.Pointer[error]
	promise func(*kgo.Record, error)
}

func (s *slot) fail(err error) { s.err.CompareAndSwap(nil, &err) }

func (s *slot) failed() error {
	if e := s.err.Load(); e != nil {
		return *e
	}
	return nil
}

// generation counts the records produced between two checkpoints until
// the brokers acknowledge them, for at-least-once.
type generation struct {
	left   atomic.Int64 // produced, not yet acknowledged
	sealed atomic.Bool  // the checkpoint was taken: no more records
	once   sync.Once
	acked  chan struct{} // closed when sealed and none is left
	err    atomic.Pointer[error]
	// promise is each record's promise, made once so that producing
	// does not allocate a method value per record.
	promise func(*kgo.Record, error)
}

func newGeneration(pool *recordPool) *generation {
	g := &generation{acked: make(chan struct{})}
	g.promise = func(r *kgo.Record, err error) {
		if err != nil {
			g.err.CompareAndSwap(nil, &err)
		}
		if pool != nil {
			pool.put(r)
		}
		if g.left.Add(-1) == 0 && g.sealed.Load() {
			g.once.Do(func() { close(g.acked) })
		}
	}
	return g
}

func (g *generation) seal() {
	g.sealed.Store(true)
	if g.left.Load() == 0 {
		g.once.Do(func() { close(g.acked) })
	}
}

func (g *generation) wait(ctx context.Context) error {
	select {
	case <-g.acked:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e := g.err.Load(); e != nil {
		return fmt.Errorf("kafka sink: produce: %w", *e)
	}
	return nil
}

func (s *sink[T]) Open(ctx context.Context, subtask, parallelism int) error {
	if err := s.cfg.check(); err != nil {
		return err
	}
	s.ctx, s.sub, s.par = ctx, subtask, parallelism
	ti, hasInfo := ringflow.TaskInfoFrom(ctx)
	s.delivery = s.cfg.Delivery
	if s.delivery == DeliveryDefault {
		s.delivery = ExactlyOnce
		if hasInfo && !ti.Checkpoints {
			s.delivery = AtLeastOnce
		}
	}
	s.prefix = s.cfg.TransactionalIDPrefix
	if s.prefix == "" && s.delivery == ExactlyOnce {
		if !hasInfo {
			return errors.New("kafka sink: no TransactionalIDPrefix, and the context names no job to make one of")
		}
		s.prefix = "ringflow-" + ti.Job + "-" + ti.Operator
	}
	cl, err := kgo.NewClient(s.cfg.producerOpts()...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if s.cfg.EncodeTo != nil {
		s.pool = &recordPool{}
	}
	s.client, s.gen = cl, newGeneration(s.pool)
	pool := s.pool
	for i := range s.cfg.PoolSize {
		sl := &slot{id: transactionalID(s.prefix, subtask, i)}
		sl.promise = func(r *kgo.Record, err error) {
			if err != nil {
				sl.fail(err)
			}
			if pool != nil {
				pool.put(r)
			}
		}
		s.slots = append(s.slots, sl)
	}
	return nil
}

// Recover commits the restored checkpoint's transactions, then fences
// every transactional id this subtask — and, after a restore at a lower
// parallelism, the old subtasks whose transactions it took over — may
// have left a transaction open on; and those of the subtasks of other
// prefixes whose transactions it took over (the old processes a process
// of a distributed job stands in for after a rescale).
func (s *sink[T]) Recover(ctx context.Context, txns [][]byte) error {
	if s.delivery != ExactlyOnce {
		return nil
	}
	oldPar, oldPool := s.par, s.cfg.PoolSize
	var ids []string
	seen := map[string]bool{}
	fenceIDs := func(prefix string, sub, pool int) {
		for i := range pool {
			if id := transactionalID(prefix, sub, i); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	for _, b := range txns {
		h, err := decodeHandle(b)
		if err != nil {
			return err
		}
		if h.prefix != "" && h.prefix != s.prefix {
			fenceIDs(h.prefix, h.subtask, h.pool)
		} else {
			oldPar, oldPool = max(oldPar, h.parallelism), max(oldPool, h.pool)
		}
		if h.empty() || commitAtBarrier {
			continue
		}
		if err := s.commitRestored(ctx, h); err != nil {
			return err
		}
	}
	for sub := s.sub; sub < oldPar; sub += s.par {
		fenceIDs(s.prefix, sub, oldPool)
	}
	for _, id := range ids {
		if err := fence(ctx, s.client, id, s.cfg.TransactionTimeout); err != nil {
			return fmt.Errorf("kafka sink: fence transactional id %s: %w", id, err)
		}
	}
	return nil
}

// commitRestored commits a transaction of a checkpoint from a producer
// that may be gone. Its producer's epoch has moved on if the transaction
// was committed and its id used again (or fenced) since, by an earlier
// attempt that restored the same checkpoint: that is success. It has also
// moved on if the brokers aborted the transaction when it timed out,
// which no answer tells apart: so that case is only logged (the package
// doc says how to size the timeout).
func (s *sink[T]) commitRestored(ctx context.Context, h txnHandle) error {
	err := endTxn(ctx, s.client, h)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidProducerIDMapping):
		s.cfg.Logger.Warn("kafka sink: a restored transaction's producer has moved on: it was committed before, or aborted at its timeout",
			"transaction", h.String(), "err", err)
		return nil
	case errors.Is(err, kerr.InvalidTxnState):
		return fmt.Errorf("%w: %s: %w", ErrTransactionAborted, h, err)
	}
	return fmt.Errorf("kafka sink: commit restored transaction %s: %w", h, err)
}

func (s *sink[T]) Write(rec T) error {
	r, err := s.encode(rec)
	if err != nil {
		return err
	}
	if r.Topic == "" {
		if r.Topic = s.cfg.Topic; r.Topic == "" {
			return errors.New("kafka sink: a record has no topic, and the config names none")
		}
	}
	if s.delivery != ExactlyOnce {
		if e := s.gen.err.Load(); e != nil {
			return fmt.Errorf("kafka sink: produce: %w", *e)
		}
		s.gen.left.Add(1)
		s.client.Produce(s.ctx, r, s.gen.promise)
		return nil
	}
	if s.cur == nil {
		if err := s.begin(); err != nil {
			return err
		}
	}
	if err := s.cur.failed(); err != nil {
		return fmt.Errorf("kafka sink: produce in transaction %s: %w", s.cur.id, err)
	}
	if s.flushed != nil {
		select {
		case <-s.flushed:
			s.flushed = nil
			for i, h := range s.held {
				s.cur.cl.Produce(s.ctx, h, s.cur.promise)
				s.held[i] = nil
			}
			s.held = s.held[:0]
		default:
			s.held = append(s.held, r)
			return nil
		}
	}
	s.cur.cl.Produce(s.ctx, r, s.cur.promise)
	return nil
}

// encode makes rec's Kafka record with the config's Encode or EncodeTo.
func (s *sink[T]) encode(rec T) (*kgo.Record, error) {
	if s.pool != nil {
		r := s.pool.get()
		if err := s.cfg.EncodeTo(rec, r); err != nil {
			s.pool.put(r)
			return nil, fmt.Errorf("kafka sink: encode a %T: %w", rec, err)
		}
		return r, nil
	}
	r, err := s.cfg.Encode(rec)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: encode a %T: %w", rec, err)
	}
	if r == nil {
		return nil, fmt.Errorf("kafka sink: Encode made no record of a %T", rec)
	}
	return r, nil
}

// begin opens a transaction on a free slot of the pool.
func (s *sink[T]) begin() error {
	var free *slot
	for _, sl := range s.slots {
		if !sl.open && sl.pending == nil {
			free = sl
			break
		}
	}
	if free == nil {
		return fmt.Errorf("%w: subtask %d has %d (SinkConfig.PoolSize); checkpoints are not completing", ErrPoolExhausted, s.sub, len(s.slots))
	}
	if free.cl == nil {
		opts := append(s.cfg.producerOpts(),
			kgo.TransactionalID(free.id), kgo.TransactionTimeout(s.cfg.TransactionTimeout))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("kafka sink: producer for %s: %w", free.id, err)
		}
		free.cl = cl
	}
	if err := free.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka sink: begin transaction on %s: %w", free.id, err)
	}
	free.open, s.cur = true, free
	return nil
}

// PreCommit ends the subtask's transaction for the checkpoint: its handle
// names the transactional id, producer id and epoch; its durable function
// flushes it and checks every record got in.
func (s *sink[T]) PreCommit() ([]byte, func(context.Context) error, error) {
	switch s.delivery {
	case NoGuarantee:
		return nil, nil, nil
	case AtLeastOnce:
		g := s.gen
		s.gen = newGeneration(s.pool)
		g.seal()
		return nil, g.wait, nil
	}
	layout := txnHandle{subtask: s.sub, parallelism: s.par, pool: len(s.slots), prefix: s.prefix}
	sl := s.cur
	if sl == nil {
		return layout.encode(), nil, nil
	}
	s.cur = nil
	pid, epoch, err := sl.cl.ProducerID(s.ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka sink: producer id of %s: %w", sl.id, err)
	}
	h := layout
	h.id, h.producerID, h.epoch = sl.id, pid, epoch
	sl.pending = &h
	// The flush starts now, not when the checkpoint asks for durability,
	// so that the next transaction's held records go out as soon as this
	// one's are in, whatever the checkpoint does.
	prev, held := s.flushed, s.held
	flushed, flushErr := make(chan struct{}), new(error)
	s.flushed, s.held = flushed, nil
	go func() {
		defer close(flushed)
		if prev != nil {
			select {
			case <-prev:
			case <-s.ctx.Done():
				*flushErr = context.Cause(s.ctx)
				return
			}
			for _, r := range held {
				sl.cl.Produce(s.ctx, r, sl.promise)
			}
		}
		*flushErr = sl.cl.Flush(s.ctx)
	}()
	durable := func(ctx context.Context) error {
		select {
		case <-flushed:
		case <-ctx.Done():
			return fmt.Errorf("kafka sink: flush transaction %s: %w", h, context.Cause(ctx))
		}
		if err := *flushErr; err != nil {
			return fmt.Errorf("kafka sink: flush transaction %s: %w", h, err)
		}
		if err := sl.failed(); err != nil {
			return fmt.Errorf("kafka sink: produce in transaction %s: %w", h, err)
		}
		// NB: a producer whose id or epoch changed mid-transaction
		// aborted what it had written under the old one.
		if pid2, epoch2, err := sl.cl.ProducerID(ctx); err != nil || pid2 != pid || epoch2 != epoch {
			return fmt.Errorf("kafka sink: transaction %s: the producer is now %d epoch %d (%v)", h, pid2, epoch2, err)
		}
		if commitAtBarrier {
			if err := sl.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("kafka sink: commit transaction %s: %w", h, err)
			}
		}
		return nil
	}
	return h.encode(), durable, nil
}

// Commit commits a pre-committed transaction: through its producer when
// this sink pre-committed it, else as Recover does.
func (s *sink[T]) Commit(ctx context.Context, txn []byte) error {
	if txn == nil {
		return nil
	}
	h, err := decodeHandle(txn)
	if err != nil || h.empty() {
		return err
	}
	for _, sl := range s.slots {
		if sl.pending == nil || *sl.pending != h {
			continue
		}
		if err := sl.failed(); err != nil {
			return fmt.Errorf("kafka sink: transaction %s lost records: %w", h, err)
		}
		if commitAtBarrier {
			sl.pending, sl.open = nil, false
			return nil
		}
		if err := sl.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka sink: commit transaction %s: %w", h, err)
		}
		sl.pending, sl.open = nil, false
		return nil
	}
	return s.commitRestored(ctx, h)
}

// Close aborts the open transaction, which no checkpoint holds, so that
// it does not hold back read_committed consumers; pre-committed
// transactions stay open for a restored job to commit.
func (s *sink[T]) Close() error {
	if sl := s.cur; sl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeAbortTimeout)
		if err := sl.cl.AbortBufferedRecords(ctx); err == nil {
			sl.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
		s.cur = nil
	}
	for _, sl := range s.slots {
		if sl.cl != nil {
			sl.cl.Close()
		}
	}
	if s.client != nil {
		if s.delivery != ExactlyOnce {
			ctx, cancel := context.WithTimeout(context.Background(), closeAbortTimeout)
			s.client.Flush(ctx) // NB: what the brokers do not take in time is lost, as NoGuarantee allows
			cancel()
		}
		s.client.Close()
	}
	return nil
}
