package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/ringflow/ringflow"
)

// StartOffset says where a source starts in a partition when no checkpoint
// says.
type StartOffset int

const (
	// StartEarliest starts at the oldest record the broker keeps.
	StartEarliest StartOffset = iota
	// StartLatest starts after the last record (the last stable offset,
	// reading committed records only), as of when the subtask opens.
	StartLatest
)

// SourceConfig configures Source.
type SourceConfig[T any] struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// Topics are read whole: every partition of each, as the topics have
	// when the job first opens. Required.
	Topics []string
	// Partitions, if set, narrows Topics to the partitions for which it
	// returns true; the source's subtasks share those out as they would
	// the whole topics. A process of a distributed job reads its own
	// partitions so.
	Partitions func(topic string, partition int32) bool
	// Decode makes a record of a Kafka record; an error fails the task,
	// naming the record's topic, partition and offset. It runs on the
	// subtask's worker thread and must not keep r. Required.
	Decode func(r *kgo.Record) (T, error)
	// Start says where to start in each partition when the job starts
	// without a checkpoint; StartEarliest by default. It is resolved to
	// offsets when the subtask opens, and those offsets are what the
	// first checkpoint keeps (a job that restarts before its first
	// checkpoint resolves them again).
	Start StartOffset
	// Bounded makes the source stop, with the end of its input, at the
	// end offsets its partitions had when the job first opened (their
	// last stable offsets): the job then ends once every record before
	// them is processed. The end offsets are kept in the checkpoints, so
	// a restored job stops where the first run would have (a job that
	// restarts before its first checkpoint lists them again).
	//
	// A partition is done when the source reads a record at or past its
	// bound. Reading committed records, the records just before a bound
	// may belong to a transaction that aborted after another began; the
	// consumer steps over them, and the partition is done only when that
	// other transaction ends and its records (or marker) appear.
	Bounded bool
	// ReadUncommitted reads records of open and aborted transactions too;
	// by default the source reads committed records only (isolation
	// level read_committed).
	ReadUncommitted bool
	// Group, if set, is a consumer group the source commits its offsets to
	// when a checkpoint completes, for tools that watch a group's lag.
	// Only the checkpoint's position counts for exactly-once: the group's
	// offsets are never read, and the source joins no group.
	Group string

	// EventTime gives a record's event time in epoch milliseconds, for a
	// source added with ringflow.SourceWithOwnEventTime; nil takes the
	// Kafka record's timestamp. The source keeps a watermark per
	// partition and holds its own at the slowest partition that is not
	// idle.
	EventTime func(T) int64
	// OutOfOrderness bounds how far behind the newest timestamp of its
	// partition a record may be: a partition's watermark is its newest
	// timestamp less the bound, less 1 ms.
	OutOfOrderness time.Duration
	// IdleTimeout marks a partition idle when it has had no record for
	// this long, so that it no longer holds back the watermark; 0 never
	// does, and then a partition that gets no record (an empty one, of an
	// unbounded source) holds the watermark at its start. A subtask that
	// owns no partition is always idle.
	IdleTimeout time.Duration

	// Buffer is how many fetched batches a subtask keeps ahead of the
	// job; 16 by default.
	Buffer int
	// OpenTimeout bounds the metadata and offset requests a subtask makes
	// when it opens, and each commit to the group; 30 s by default.
	OpenTimeout time.Duration
	// ClientOpts are added to the consumer client's options (TLS, SASL,
	// fetch sizes, a logger, ...) after the source's own.
	ClientOpts []kgo.Opt
	// Logger receives what the source logs (failed group commits); nil is
	// slog.Default().
	Logger *slog.Logger
}

func (c *SourceConfig[T]) check() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Brokers"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("no Topics"))
	}
	if c.Decode == nil {
		errs = append(errs, errors.New("no Decode function"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka source config: %w", err)
	}
	return nil
}

func (c SourceConfig[T]) withDefaults() SourceConfig[T] {
	if c.Buffer <= 0 {
		c.Buffer = defaultBuffer
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = defaultOpenTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Source returns a source of the records of cfg.Topics. Each subtask reads
// some of the partitions (see the package doc) from the offsets its
// checkpoint keeps. It is a ringflow.SplitSource, so a job restored at
// another parallelism moves partitions between subtasks with their
// offsets, and an EventTimeSource, for ringflow.SourceWithOwnEventTime.
func Source[T any](cfg SourceConfig[T]) ringflow.NewSource[T] {
	cfg = cfg.withDefaults()
	return func() ringflow.SourceFunc[T] { return &source[T]{cfg: cfg} }
}

var (
	_ ringflow.SourceFunc[int]      = (*source[int])(nil)
	_ ringflow.SplitSource          = (*source[int])(nil)
	_ ringflow.CheckpointPositioner = (*source[int])(nil)
	_ ringflow.CheckpointListener   = (*source[int])(nil)
	_ ringflow.EventTimeSource      = (*source[int])(nil)
)

// partState is a partition as the worker thread sees it.
type partState struct {
	partPos
	maxTs  int64     // newest event time read, MinWatermark before any
	lastAt time.Time // when a batch of it last came
}

// fetched is a batch of one partition's records, handed from the poller
// to Read; err ends the poller.
type fetched struct {
	part *partState
	recs []*kgo.Record
	err  error
}

type source[T any] struct {
	cfg   SourceConfig[T]
	parts []*partState // sorted by topic and partition
	cl    *kgo.Client

	batches chan fetched
	stop    context.CancelFunc
	running sync.WaitGroup // the poller and the group committer
	cur     fetched
	at      int // index in cur.recs of the next record

	ts []int64 // event times of the records of the last Read
	wm int64   // watermark last said

	marks   []mark         // positions by checkpoint, for the group
	commits chan []partPos // to the group committer, newest only
}

type mark struct {
	checkpoint uint64
	parts      []partPos
}

func (s *source[T]) Open(subtask, parallelism int, pos []byte) error {
	if err := s.cfg.check(); err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.KeepControlRecords(),                    // to step past a transaction's marker at a bound
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), // a lost offset fails the task, never skips
	}
	if !s.cfg.ReadUncommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(append(opts, s.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	s.cl = cl
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	defer cancel()
	var mine []partPos
	if pos == nil {
		mine, err = s.fresh(ctx, subtask, parallelism)
	} else {
		mine, err = decodePosition(pos)
	}
	if err != nil {
		cl.Close()
		s.cl = nil
		return err
	}
	s.start(mine)
	return nil
}

// fresh finds every partition of the topics, takes subtask's share and
// resolves its start (and stop) offsets.
func (s *source[T]) fresh(ctx context.Context, subtask, parallelism int) ([]partPos, error) {
	all, err := s.partitions(ctx)
	if err != nil {
		return nil, err
	}
	mine := assign(all, subtask, parallelism)
	if len(mine) == 0 {
		return nil, nil
	}
	start := int64(-2) // earliest
	if s.cfg.Start == StartLatest {
		start = -1
	}
	starts, err := s.listOffsets(ctx, mine, start)
	if err != nil {
		return nil, err
	}
	var stops map[tp]int64
	if s.cfg.Bounded {
		if stops, err = s.listOffsets(ctx, mine, -1); err != nil {
			return nil, err
		}
	}
	for i := range mine {
		k := tp{mine[i].topic, mine[i].part}
		mine[i].next, mine[i].stop = starts[k], noStop
		if s.cfg.Bounded {
			mine[i].stop = stops[k]
		}
	}
	return mine, nil
}

type tp struct {
	topic string
	part  int32
}

// partitions lists every partition of the configured topics.
func (s *source[T]) partitions(ctx context.Context) ([]partPos, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("kafka source: metadata of %v: %w", s.cfg.Topics, err)
	}
	var all []partPos
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("kafka source: topic %q: %w", name, err)
		}
		for _, p := range t.Partitions {
			if s.cfg.Partitions == nil || s.cfg.Partitions(name, p.Partition) {
				all = append(all, partPos{topic: name, part: p.Partition})
			}
		}
	}
	return all, nil
}

// listOffsets returns the offsets at ts (-2 earliest, -1 latest: the last
// stable offset when reading committed records) of ps.
func (s *source[T]) listOffsets(ctx context.Context, ps []partPos, ts int64) (map[tp]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if !s.cfg.ReadUncommitted {
		req.IsolationLevel = 1
	}
	byTopic := map[string]int{}
	for _, p := range ps {
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.part, ts, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	out := map[tp]int64{}
	for _, shard := range s.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, fmt.Errorf("kafka source: list offsets: %w", shard.Err)
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("kafka source: list offsets of %s/%d: %w", t.Topic, p.Partition, err)
				}
				out[tp{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	for _, p := range ps {
		if _, ok := out[tp{p.topic, p.part}]; !ok {
			return nil, fmt.Errorf("kafka source: list offsets: no answer for %s/%d", p.topic, p.part)
		}
	}
	return out, nil
}

// start assigns the subtask's partitions to the client at their offsets
// and starts the poller.
func (s *source[T]) start(mine []partPos) {
	now := time.Now()
	assigned := map[string]map[int32]kgo.Offset{}
	byTP := map[tp]*partState{}
	for _, p := range mine {
		ps := &partState{partPos: p, maxTs: ringflow.MinWatermark, lastAt: now}
		s.parts = append(s.parts, ps)
		byTP[tp{p.topic, p.part}] = ps
		if p.done() {
			continue
		}
		if assigned[p.topic] == nil {
			assigned[p.topic] = map[int32]kgo.Offset{}
		}
		assigned[p.topic][p.part] = kgo.NewOffset().At(p.next)
	}
	s.wm = ringflow.MinWatermark
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.batches = make(chan fetched, s.cfg.Buffer)
	if len(assigned) > 0 {
		s.cl.AddConsumePartitions(assigned)
		s.running.Go(func() { s.poll(ctx, byTP) })
	}
	if s.cfg.Group != "" {
		s.commits = make(chan []partPos, 1)
		s.running.Go(s.commitGroup)
	}
}

// poll runs on the source's goroutine: it fetches and hands each
// partition's batch to Read, until Close or a fetch error.
func (s *source[T]) poll(ctx context.Context, byTP map[tp]*partState) {
	send := func(f fetched) bool {
		select {
		case s.batches <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		fs := s.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		var err error
		fs.EachError(func(t string, p int32, e error) {
			if err == nil && !errors.Is(e, context.Canceled) {
				err = fmt.Errorf("kafka source: fetch %s/%d: %w", t, p, e)
			}
		})
		ok := true
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if ok && len(p.Records) > 0 {
				ok = send(fetched{part: byTP[tp{p.Topic, p.Partition}], recs: p.Records})
			}
		})
		if !ok {
			return
		}
		if err != nil {
			send(fetched{err: err})
			return
		}
	}
}

// Read hands over the records the poller fetched; it never waits.
func (s *source[T]) Read(buf []T) (int, error) {
	if cap(s.ts) < len(buf) {
		s.ts = make([]int64, len(buf))
	}
	n := 0
	for n < len(buf) {
		if s.at == len(s.cur.recs) {
			if !s.next() {
				break
			}
			if s.cur.err != nil {
				return n, s.cur.err
			}
			if s.cur.part == nil {
				r := s.cur.recs[0]
				return n, fmt.Errorf("kafka source: fetched %s/%d, which is not this subtask's", r.Topic, r.Partition)
			}
			continue
		}
		r, p := s.cur.recs[s.at], s.cur.part
		s.at++
		if r.Offset < p.next || p.done() {
			continue // behind the position, or past the bound
		}
		if p.stop != noStop && r.Offset >= p.stop {
			// NB: offsets are not dense (compaction, records of aborted
			// transactions): the first one past a gap may be past the bound.
			p.next = p.stop
			s.pause(p)
			continue
		}
		p.next = r.Offset + 1
		if p.done() {
			s.pause(p)
		}
		if r.Attrs.IsControl() {
			continue
		}
		v, err := s.cfg.Decode(r)
		if err != nil {
			return n, fmt.Errorf("kafka source: decode %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		buf[n] = v
		ts := r.Timestamp.UnixMilli()
		if s.cfg.EventTime != nil {
			ts = s.cfg.EventTime(v)
		}
		s.ts[n], p.maxTs = ts, max(p.maxTs, ts)
		n++
	}
	if n == 0 && s.cfg.Bounded && s.allDone() {
		return 0, io.EOF
	}
	return n, nil
}

// pause stops fetching a partition read to its bound.
func (s *source[T]) pause(p *partState) {
	s.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.part}})
}

// next takes the next fetched batch, if there is one.
func (s *source[T]) next() bool {
	select {
	case f := <-s.batches:
		s.cur, s.at = f, 0
		if f.part != nil {
			f.part.lastAt = time.Now()
		}
		return true
	default:
		return false
	}
}

func (s *source[T]) allDone() bool {
	for _, p := range s.parts {
		if !p.done() {
			return false
		}
	}
	return true
}

// Timestamps implements ringflow.EventTimeSource.
func (s *source[T]) Timestamps(ts []int64) { copy(ts, s.ts) }

// Watermark implements ringflow.EventTimeSource: the lowest of the
// watermarks of the partitions that are neither idle nor read to their
// bound.
func (s *source[T]) Watermark(now time.Time) (int64, bool) {
	wm, active, done := int64(math.MaxInt64), false, 0
	for _, p := range s.parts {
		if p.done() {
			done++
			continue
		}
		if s.cfg.IdleTimeout > 0 && now.Sub(p.lastAt) >= s.cfg.IdleTimeout {
			continue
		}
		active = true
		if p.maxTs == ringflow.MinWatermark {
			return s.wm, false // a partition with no event time yet holds it all back
		}
		wm = min(wm, p.maxTs-s.cfg.OutOfOrderness.Milliseconds()-1)
	}
	if !active {
		// NB: a subtask that read every partition to its bound is not
		// idle but about to end, with the watermark at its end: were it
		// idle for the moment between, operators downstream could let
		// their watermark run ahead of what its last records make fire,
		// which would then come late.
		return s.wm, len(s.parts) == 0 || done < len(s.parts)
	}
	s.wm = max(s.wm, wm)
	return s.wm, false
}

func (s *source[T]) positions() []partPos {
	ps := make([]partPos, len(s.parts))
	for i, p := range s.parts {
		ps[i] = p.partPos
	}
	return ps
}

// Position returns each partition's next offset (and bound).
func (s *source[T]) Position() []byte { return encodePosition(s.positions()) }

// PositionFor implements ringflow.CheckpointPositioner: with a group, it
// remembers the offsets that go into checkpoint id, to commit them when it
// completes.
func (s *source[T]) PositionFor(id uint64) []byte {
	ps := s.positions()
	if s.cfg.Group != "" {
		if len(s.marks) == marksMax {
			s.marks = s.marks[1:]
		}
		s.marks = append(s.marks, mark{id, ps})
	}
	return encodePosition(ps)
}

// NotifyComplete implements ringflow.CheckpointListener: the offsets of
// checkpoint id (or the newest before it) go to the group committer.
func (s *source[T]) NotifyComplete(id uint64) error {
	var latest []partPos
	kept := s.marks[:0]
	for _, m := range s.marks {
		if m.checkpoint <= id {
			latest = m.parts
		} else {
			kept = append(kept, m)
		}
	}
	s.marks = kept
	if latest == nil || s.commits == nil {
		return nil
	}
	for {
		select {
		case s.commits <- latest:
			return nil
		default:
			select { // the committer is behind: replace what it has not taken
			case <-s.commits:
			default:
			}
		}
	}
}

// NotifyAborted implements ringflow.CheckpointListener.
func (s *source[T]) NotifyAborted(uint64) {}

// commitGroup runs on a goroutine of its own while the source has a group:
// it commits the offsets it is given, until Close closes s.commits (after
// the last it was given). Failures are logged: the group's offsets are
// for monitoring.
func (s *source[T]) commitGroup() {
	// NB: OffsetCommit v10 names topics by id; a raw request names them
	// by name, which v9 and below take.
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOpts...)
	cl, err := kgo.NewClient(append(opts, kgo.MaxVersions(vs))...)
	if err != nil {
		s.cfg.Logger.Error("kafka source: no client to commit offsets to the group", "group", s.cfg.Group, "err", err)
		for range s.commits {
		}
		return
	}
	defer cl.Close()
	for ps := range s.commits {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
		if err := commitOffsets(ctx, cl, s.cfg.Group, ps); err != nil {
			s.cfg.Logger.Warn("kafka source: commit offsets to the group", "group", s.cfg.Group, "err", err)
		}
		cancel()
	}
}

// commitOffsets commits ps to group as a client outside the group does
// (generation -1).
func commitOffsets(ctx context.Context, cl *kgo.Client, group string, ps []partPos) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	byTopic := map[string]int{}
	for _, p := range ps {
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.topic] = i
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p.part, p.next, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// RescalePosition implements ringflow.SplitSource: the partitions of every
// old subtask are shared out again as on a fresh start, each with its
// offsets; with SourceConfig.Partitions set, those it selects only (a
// process of a distributed job rescaled to another number of processes
// takes its own partitions from the positions of every old process).
func (s *source[T]) RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, error) {
	return rescale(subtask, parallelism, old, s.cfg.Partitions)
}

func (s *source[T]) Close() error {
	if s.cl == nil {
		return nil
	}
	if s.stop != nil {
		s.stop()
		if s.commits != nil {
			close(s.commits)
		}
		s.running.Wait()
	}
	s.cl.Close()
	return nil
}
