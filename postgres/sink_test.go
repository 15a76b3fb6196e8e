package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/pgtest"
	"github.com/ringflow/ringflow/postgres"
)

// These tests drive the sink by hand, as the engine would, with a
// TxnPrefix in place of the job's TaskInfo.

const batchRows = 100

// openSink opens subtask sub of par of a sink of kv records into out,
// with txn prefix prefix, and closes it when t ends.
func openSink(t *testing.T, connString, prefix string, sub, par int) ringflow.TwoPhaseSink[kv] {
	t.Helper()
	s := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"},
		Row: kvRow, BatchSize: batchRows, TxnPrefix: prefix})()
	if err := s.Open(context.Background(), sub, par); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeRows writes the records (k, v) for v in [from, to).
func writeRows(t *testing.T, s ringflow.TwoPhaseSink[kv], k, from, to int64) {
	t.Helper()
	for v := from; v < to; v++ {
		if err := s.Write(kv{k, v}); err != nil {
			t.Fatal(err)
		}
	}
}

// preCommit pre-commits s's transaction and makes it durable.
func preCommit(t *testing.T, s ringflow.TwoPhaseSink[kv]) []byte {
	t.Helper()
	txn, durable, err := s.PreCommit()
	if err == nil && durable != nil {
		err = durable(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	if txn == nil {
		t.Fatal("PreCommit of a transaction with rows returned no handle")
	}
	return txn
}

func rowsOf(k, from, to int64) []kv {
	var out []kv
	for v := from; v < to; v++ {
		out = append(out, kv{k, v})
	}
	return out
}

// TestVisibleAfterCommit checks the protocol on one subtask: rows are
// invisible while written and once prepared, visible after Commit, and a
// second Commit of the same transaction changes nothing. Checkpoint n+1's
// rows are written while n is prepared but not committed.
func TestVisibleAfterCommit(t *testing.T) {
	connString, conn := newDB(t)
	ctx := context.Background()
	s := openSink(t, connString, "vis", 0, 1)
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if txn, durable, err := s.PreCommit(); txn != nil || durable != nil || err != nil {
		t.Fatalf("PreCommit with no rows: %q, %v; want no transaction", txn, err)
	}
	writeRows(t, s, 1, 0, 2*batchRows+7) // two full batches and part of one
	if got := outRows(t, conn); len(got) != 0 {
		t.Fatalf("%d rows visible before PreCommit", len(got))
	}
	txn1 := preCommit(t, s)
	if gids := prepared(t, conn); !slices.Equal(gids, []string{string(txn1)}) {
		t.Fatalf("prepared %q after the first PreCommit, want %q", gids, txn1)
	}
	writeRows(t, s, 2, 0, 50)
	if got := outRows(t, conn); len(got) != 0 {
		t.Fatalf("%d rows visible before Commit", len(got))
	}
	if err := s.Commit(ctx, txn1); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(1, 0, 2*batchRows+7)
	diffRows(t, outRows(t, conn), want)
	if err := s.Commit(ctx, txn1); err != nil {
		t.Fatalf("second Commit of %s: %v", txn1, err)
	}
	diffRows(t, outRows(t, conn), want)
	txn2 := preCommit(t, s)
	if string(txn2) == string(txn1) {
		t.Fatalf("two transactions named %s", txn1)
	}
	if err := s.Commit(ctx, txn2); err != nil {
		t.Fatal(err)
	}
	diffRows(t, outRows(t, conn), append(want, rowsOf(2, 0, 50)...))
	if gids := prepared(t, conn); len(gids) != 0 {
		t.Fatalf("prepared %q after every commit", gids)
	}
}

// TestRecoverAfterCrash checks a crash after PREPARE: the first instance
// prepares a transaction its checkpoint completed with (covered), one of
// a checkpoint that never completed (not covered), and leaves a third
// open, then stops answering with its sessions still open. A new instance
// commits the covered one once, rolls back the other, and does so again
// the same way when it is itself restored from the same checkpoint.
func TestRecoverAfterCrash(t *testing.T) {
	connString, conn := newDB(t)
	ctx := context.Background()
	crashed := openSink(t, connString, "crash", 0, 1)
	if err := crashed.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeRows(t, crashed, 1, 0, 150)
	covered := preCommit(t, crashed)
	writeRows(t, crashed, 2, 0, 150)
	uncovered := preCommit(t, crashed)
	writeRows(t, crashed, 3, 0, 150) // open, never prepared
	if gids := prepared(t, conn); len(gids) != 2 {
		t.Fatalf("prepared %q, want 2 transactions", gids)
	}
	for range 2 {
		s := openSink(t, connString, "crash", 0, 1)
		if err := s.Recover(ctx, [][]byte{covered}); err != nil {
			t.Fatal(err)
		}
		diffRows(t, outRows(t, conn), rowsOf(1, 0, 150))
		if gids := prepared(t, conn); len(gids) != 0 {
			t.Fatalf("prepared %q after Recover, want none (%s rolled back)", gids, uncovered)
		}
		s.Close()
	}
	// The crashed instance's sessions were ended by the first Recover.
	if err := crashed.Write(kv{4, 0}); err == nil {
		if _, durable, err := crashed.PreCommit(); err == nil && durable(ctx) == nil {
			t.Fatal("the crashed instance prepared a transaction after its sessions were terminated")
		}
	}
	diffRows(t, outRows(t, conn), rowsOf(1, 0, 150))
}

// TestRecoverRescaled checks a restore at another parallelism: three
// subtasks each prepare a covered and an uncovered transaction; restored
// at two, subtask 0 takes over old subtasks 0 and 2, subtask 1 old
// subtask 1 (j % 2, as the engine hands out checkpointed transactions),
// and the two recover at once. Then the same from two back to three.
func TestRecoverRescaled(t *testing.T) {
	for _, c := range []struct{ from, to int }{{3, 2}, {2, 3}, {5, 3}, {4, 1}} {
		t.Run(fmt.Sprintf("%dto%d", c.from, c.to), func(t *testing.T) {
			connString, conn := newDB(t)
			ctx := context.Background()
			prefix := fmt.Sprintf("rescale%d%d", c.from, c.to)
			covered := make([][][]byte, c.to)
			var want []kv
			for j := range c.from {
				s := openSink(t, connString, prefix, j, c.from)
				if err := s.Recover(ctx, nil); err != nil {
					t.Fatal(err)
				}
				writeRows(t, s, int64(j), 0, 120)
				covered[j%c.to] = append(covered[j%c.to], preCommit(t, s))
				want = append(want, rowsOf(int64(j), 0, 120)...)
				writeRows(t, s, int64(j), 1000, 1050)
				preCommit(t, s)
				s.Close()
			}
			if gids := prepared(t, conn); len(gids) != 2*c.from {
				t.Fatalf("prepared %d transactions, want %d", len(gids), 2*c.from)
			}
			var wg sync.WaitGroup
			errs := make([]error, c.to)
			for i := range c.to {
				s := openSink(t, connString, prefix, i, c.to)
				wg.Go(func() { errs[i] = s.Recover(ctx, covered[i]) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			diffRows(t, outRows(t, conn), want)
			if gids := prepared(t, conn); len(gids) != 0 {
				t.Fatalf("prepared %q left after the restore", gids)
			}
		})
	}
}

// TestRecoverLeavesOthers checks that Recover touches only its own
// scope's transactions: another sink's prepared transaction stays.
func TestRecoverLeavesOthers(t *testing.T) {
	connString, conn := newDB(t)
	ctx := context.Background()
	other := openSink(t, connString, "other", 0, 1)
	if err := other.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeRows(t, other, 9, 0, 10)
	theirs := preCommit(t, other)
	s := openSink(t, connString, "mine", 0, 1)
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if gids := prepared(t, conn); !slices.Equal(gids, []string{string(theirs)}) {
		t.Fatalf("prepared %q after another sink's Recover, want %q", gids, theirs)
	}
	if err := other.Commit(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	diffRows(t, outRows(t, conn), rowsOf(9, 0, 10))
}

// TestFailedCopyFailsSink checks that a batch the server refuses fails
// the transaction's durable function and every later call, so no later
// checkpoint completes and no Commit takes the lost transaction for one
// committed before.
func TestFailedCopyFailsSink(t *testing.T) {
	connString, _ := newDB(t)
	ctx := context.Background()
	s := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"}, TxnPrefix: "bad",
		Row: func(row []any, r kv) []any {
			if r.V == 3 {
				return append(row, r.K, "not a number")
			}
			return kvRow(row, r)
		}})()
	if err := s.Open(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeRows(t, s, 1, 0, 2)
	good := preCommit(t, s)
	writeRows(t, s, 1, 2, 5)
	_, durable, err := s.PreCommit()
	if err != nil {
		t.Fatal(err)
	}
	errContains(t, "the durable function of a refused batch", durable(ctx), "postgres sink out", "copy 3 rows")
	errContains(t, "Commit after a refused batch", s.Commit(ctx, good), "copy 3 rows")
	_, _, err = s.PreCommit()
	errContains(t, "PreCommit after a refused batch", err, "copy 3 rows")
}

// TestOpenErrors checks that each mistake in the configuration or the
// server is reported at Open, naming it.
func TestOpenErrors(t *testing.T) {
	connString, conn := newDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE ro (k bigint); CREATE ROLE reader LOGIN"); err != nil {
		t.Fatal(err)
	}
	base := postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"}, Row: kvRow, TxnPrefix: "e"}
	for _, c := range []struct {
		name string
		edit func(*postgres.Config[kv])
		want []string
	}{
		{"bad connection string", func(c *postgres.Config[kv]) { c.ConnString = "postgres://host:notaport/db" }, []string{"connection string"}},
		{"no server", func(c *postgres.Config[kv]) { c.ConnString = "host=/nonexistent dbname=x" }, []string{"connect"}},
		{"missing table", func(c *postgres.Config[kv]) { c.Table = "nosuch" }, []string{`no table "nosuch"`}},
		{"missing schema", func(c *postgres.Config[kv]) { c.Table = "nosuch.out" }, []string{`no table "nosuch"."out"`}},
		{"missing column", func(c *postgres.Config[kv]) { c.Columns = []string{"k", "w"} }, []string{`no column "w"`, "it has k, v"}},
		{"no privilege", func(c *postgres.Config[kv]) { c.ConnString += " user=reader" }, []string{"may not insert"}},
		{"empty", func(c *postgres.Config[kv]) { *c = postgres.Config[kv]{} },
			[]string{"Table is empty", "Columns is empty", "Row is nil", "needs a TxnPrefix"}},
		{"bad table name", func(c *postgres.Config[kv]) { c.Table = "a.b.c" }, []string{`Table "a.b.c"`}},
		{"column twice", func(c *postgres.Config[kv]) { c.Columns = []string{"k", "k"} }, []string{`column 1 is "k"`}},
		{"negative batch", func(c *postgres.Config[kv]) { c.BatchSize = -1 }, []string{"BatchSize is -1"}},
	} {
		cfg := base
		c.edit(&cfg)
		s := postgres.Sink(cfg)()
		err := s.Open(ctx, 0, 1)
		s.Close()
		errContains(t, c.name, err, c.want...)
	}
}

// TestPreparedTransactionsOff checks that Open refuses a server with
// max_prepared_transactions = 0, saying so.
func TestPreparedTransactionsOff(t *testing.T) {
	pgtest.Shared(t) // skips without PostgreSQL
	srv, err := pgtest.Start(pgtest.Options{Settings: map[string]string{"max_prepared_transactions": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, createOut); err != nil {
		t.Fatal(err)
	}
	s := postgres.Sink(postgres.Config[kv]{ConnString: srv.ConnString("postgres"), Table: "out", Columns: []string{"k", "v"},
		Row: kvRow, TxnPrefix: "off"})()
	err = s.Open(ctx, 0, 1)
	s.Close()
	if !errors.Is(err, postgres.ErrPreparedTransactionsDisabled) {
		t.Fatalf("Open: %v; want ErrPreparedTransactionsDisabled", err)
	}
	errContains(t, "Open", err, "max_prepared_transactions is 0")
}

// TestRowCount checks that a Row that appends the wrong number of values
// fails Write, naming the columns.
func TestRowCount(t *testing.T) {
	connString, _ := newDB(t)
	ctx := context.Background()
	s := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"}, TxnPrefix: "rc",
		Row: func(row []any, r kv) []any { return append(row, r.K) }})()
	if err := s.Open(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errContains(t, "Write", s.Write(kv{1, 2}), "Row appended 1 values", "want 2", "(k, v)")
}

// TestWriteAllocs checks that writing a record allocates nothing but the
// boxing of its values: values below 256 box without allocating.
func TestWriteAllocs(t *testing.T) {
	connString, _ := newDB(t)
	ctx := context.Background()
	// NB: no batch fills up, so the writer's COPY, which allocates on
	// its own goroutine, does not count.
	s := postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"},
		Row: kvRow, BatchSize: 10_000, TxnPrefix: "allocs"})()
	if err := s.Open(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if err := s.Write(kv{1, 2}); err != nil {
			t.Fatal(err)
		}
	}); a > 0.05 {
		t.Fatalf("%.2f allocations per Write, want none", a)
	}
}
