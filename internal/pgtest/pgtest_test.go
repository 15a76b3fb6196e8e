package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m, Options{})) }

// TestServer checks that the shared server runs with the settings a
// two-phase-commit sink needs, and that a test's database is its own.
func TestServer(t *testing.T) {
	srv := Shared(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.CreateDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for name, want := range map[string]string{"max_prepared_transactions": "64", "fsync": "off", "listen_addresses": ""} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil || db == "postgres" {
		t.Fatalf("current database %q (%v): want one of the test's own", db, err)
	}
}

// TestSettings starts a second server with a setting of its own.
func TestSettings(t *testing.T) {
	Shared(t) // skips without PostgreSQL
	srv, err := Start(Options{Settings: map[string]string{"max_prepared_transactions": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
			t.Errorf("the server's directory is left after Stop: %v", err)
		}
	}()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SHOW max_prepared_transactions").Scan(&got); err != nil || got != "0" {
		t.Fatalf("max_prepared_transactions = %q (%v), want 0", got, err)
	}
}
