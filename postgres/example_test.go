package postgres_test

import (
	"context"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/postgres"
)

type wordCount struct {
	Word  string
	Count int64
}

// A keyed count into a PostgreSQL table created beforehand with
//
//	CREATE TABLE word_counts (word text NOT NULL, count bigint NOT NULL)
//
// Each checkpoint's rows become visible when it completes; after a
// failure the table still holds each count once.
func ExampleSink() {
	job := ringflow.NewJob(ringflow.Config{Parallelism: 2,
		Checkpoint: ringflow.CheckpointConfig{Interval: time.Second, StateDir: "state"},
		Restart:    ringflow.RestartStrategy{Attempts: 3}})
	words := ringflow.Source(job, "words", ringflow.FromSlice([]string{"to", "be", "or", "not", "to", "be"}))
	ones := ringflow.Map(words, "one", func(w string) wordCount { return wordCount{w, 1} })
	counts := ringflow.Reduce(ringflow.KeyBy(ones, func(c wordCount) string { return c.Word }), "count",
		func(acc, c wordCount) wordCount { return wordCount{c.Word, acc.Count + c.Count} })
	ringflow.TxnSink(counts, "word_counts", postgres.Sink(postgres.Config[wordCount]{
		ConnString: "postgres://app@db.internal/analytics",
		Table:      "word_counts",
		Columns:    []string{"word", "count"},
		Row:        func(row []any, c wordCount) []any { return append(row, c.Word, c.Count) },
	}))
	_ = job.Run(context.Background())
}
