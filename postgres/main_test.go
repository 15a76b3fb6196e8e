package postgres_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/pgtest"
	"github.com/ringflow/ringflow/internal/testseed"
	"github.com/ringflow/ringflow/postgres"
)

var seeds = testseed.Flag("seed", "POSTGRES_SEED")

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir, os.Getenv(killChildEnv+"_DB")))
	}
	if dir := os.Getenv(kafkaChildEnv); dir != "" {
		os.Exit(kafkaChild(dir, os.Getenv(kafkaChildEnv+"_DB"), os.Getenv(kafkaChildEnv+"_BROKERS")))
	}
	os.Exit(pgtest.Main(m, pgtest.Options{}))
}

// kv is the record the tests write: a key and a value, the row (k, v) of
// table out.
type kv struct{ K, V int64 }

func kvRow(row []any, r kv) []any { return append(row, r.K, r.V) }

const createOut = "CREATE TABLE out (k bigint NOT NULL, v bigint NOT NULL)"

// newDB creates a database of t's own holding the empty table out and
// returns its connection string and a connection to it.
func newDB(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	connString := pgtest.Shared(t).CreateDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, createOut); err != nil {
		t.Fatal(err)
	}
	return connString, conn
}

// outRows returns the committed rows of table out, sorted.
func outRows(t testing.TB, conn *pgx.Conn) []kv {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT k, v FROM out ORDER BY k, v")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kv])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// prepared returns the gids of the prepared transactions of conn's
// database, sorted.
func prepared(t testing.TB, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY gid")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return gids
}

// diffRows fails t unless got equals want, naming the first difference
// and the counts.
func diffRows(t testing.TB, got, want []kv) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%d rows, want %d; row %d is %v, want %v", len(got), len(want), i, got[i], want[i])
		}
	}
	t.Fatalf("%d rows, want %d (the shorter is a prefix of the longer)", len(got), len(want))
}

// keyCounts returns the rows a keyed count of records 0..n-1 over keys
// keys writes: for each key k, (k, 1), (k, 2), ... one row per record of
// key k (record i has key i % keys).
func keyCounts(n, keys uint64) []kv {
	var out []kv
	for k := range keys {
		for c := range (n - k + keys - 1) / keys {
			out = append(out, kv{int64(k), int64(c + 1)})
		}
	}
	return out
}

// keyCount counts records per key and emits (key, count).
type keyCount struct{}

func (keyCount) Create() kv              { return kv{} }
func (keyCount) Add(acc kv, i uint64) kv { return kv{int64(i % countKeys), acc.V + 1} }
func (keyCount) Result(acc kv) kv        { return acc }
func (keyCount) Merge(a, b kv) kv        { return kv{a.K, a.V + b.V} }

const countKeys = 100

// outSink returns the sink of kv records into table out.
func outSink(connString string) func() ringflow.TwoPhaseSink[kv] {
	return postgres.Sink(postgres.Config[kv]{ConnString: connString, Table: "out", Columns: []string{"k", "v"}, Row: kvRow})
}

// errContains fails t unless err holds every one of parts.
func errContains(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error; want one saying %q", what, parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error %q does not say %q", what, err, p)
		}
	}
}
