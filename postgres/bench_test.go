package postgres_test

import (
	"context"
	"testing"

	"github.com/ringflow/ringflow/postgres"
)

// BenchmarkSink writes b.N rows through one subtask's sink, with a
// checkpoint (PREPARE, then COMMIT PREPARED) every 10,000 rows: the
// cost of a row end to end, on the test server (fsync off).
func BenchmarkSink(b *testing.B) {
	connString, conn := newDB(b)
	ctx := context.Background()
	s := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"},
		Row: kvRow, TxnPrefix: "bench"})()
	if err := s.Open(ctx, 0, 1); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Recover(ctx, nil); err != nil {
		b.Fatal(err)
	}
	checkpoint := func() {
		txn, durable, err := s.PreCommit()
		if err == nil && durable != nil {
			err = durable(ctx)
		}
		if err == nil && txn != nil {
			err = s.Commit(ctx, txn)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := range b.N {
		if err := s.Write(kv{int64(i % 100), int64(i)}); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 9_999 {
			checkpoint()
		}
	}
	checkpoint()
	b.StopTimer()
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM out").Scan(&n); err != nil || n != b.N {
		b.Fatalf("%d rows in the table (%v), want %d", n, err, b.N)
	}
}
