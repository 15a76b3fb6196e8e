package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringflow/ringflow"
)

// ExchangeConfig configures Exchange.
type ExchangeConfig struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// ReplicationFactor of the repartition topics Exchange creates; the
	// brokers' default if 0.
	ReplicationFactor int16
	// TransactionTimeout of the repartition sinks' transactions; see
	// SinkConfig.TransactionTimeout.
	TransactionTimeout time.Duration
	// ClientOpts are added to every client's options (TLS, SASL, ...).
	ClientOpts []kgo.Opt
	// Logger receives what the sources and sinks log; nil is
	// slog.Default().
	Logger *slog.Logger
}

// Exchange returns the transport of a distributed job (ringflow.Cluster)
// on Kafka: each repartition topic is read by this package's Source, of
// the process's partitions only and committed records only, and written
// by its Sink, exactly once, each record to the partition the engine
// chose. Both keep what they need in the processes' checkpoints, as they
// do in any job: see the ringflow package doc's "Distributed jobs" for
// why that makes the whole exactly once.
func Exchange(cfg ExchangeConfig) ringflow.Exchange { return &exchange{cfg: cfg} }

type exchange struct{ cfg ExchangeConfig }

func (x *exchange) Source(topic string, partitions []int32) ringflow.NewSource[ringflow.ExchangeRecord] {
	mine := slices.Clone(partitions)
	slices.Sort(mine)
	return Source(SourceConfig[ringflow.ExchangeRecord]{
		Brokers: x.cfg.Brokers, Topics: []string{topic}, ClientOpts: x.cfg.ClientOpts, Logger: x.cfg.Logger,
		Partitions: func(_ string, p int32) bool { _, ok := slices.BinarySearch(mine, p); return ok },
		// NB: the value aliases the fetched record, which the source
		// keeps until its next Read; the engine decodes it before then.
		Decode: func(r *kgo.Record) (ringflow.ExchangeRecord, error) {
			return ringflow.ExchangeRecord{Partition: r.Partition, Value: r.Value}, nil
		},
	})
}

func (x *exchange) Sink(topic, prefix string) func() ringflow.TwoPhaseSink[ringflow.ExchangeRecord] {
	opts := append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, x.cfg.ClientOpts...)
	return Sink(SinkConfig[ringflow.ExchangeRecord]{
		Brokers: x.cfg.Brokers, Topic: topic, Delivery: exchangeDelivery, TransactionalIDPrefix: prefix,
		TransactionTimeout: x.cfg.TransactionTimeout, ClientOpts: opts, Logger: x.cfg.Logger,
		// NB: the value is copied into a record the sink reuses, so a
		// record costs no allocation here, and the writer may reuse its
		// buffer once Write returns.
		EncodeTo: func(x ringflow.ExchangeRecord, r *kgo.Record) error {
			r.Topic, r.Partition, r.Value = topic, x.Partition, append(r.Value, x.Value...)
			return nil
		},
	})
}

// CreateTopics creates the topics that do not exist and checks the
// partitions of those that do.
func (x *exchange) CreateTopics(ctx context.Context, topics []string, partitions int) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(x.cfg.Brokers...)}, x.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka exchange: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t, int32(partitions), -1
		if x.cfg.ReplicationFactor > 0 {
			rt.ReplicationFactor = x.cfg.ReplicationFactor
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka exchange: create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka exchange: create topic %s: %w", t.Topic, err)
		}
	}
	// NB: brokers may not list a topic just created by this process or
	// another for a moment; retriable errors are waited out.
	for {
		err := x.checkPartitions(ctx, cl, topics, partitions)
		if err == nil || !kerr.IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (and then %w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (x *exchange) checkPartitions(ctx context.Context, cl *kgo.Client, topics []string, partitions int) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka exchange: metadata: %w", err)
	}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("kafka exchange: topic %s: %w", name, err)
		}
		if len(t.Partitions) != partitions {
			return fmt.Errorf("kafka exchange: topic %s has %d partitions, the job's plan %d (Cluster.Partitions cannot change)",
				name, len(t.Partitions), partitions)
		}
	}
	return nil
}
