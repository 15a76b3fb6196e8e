// Package pgtest starts a throwaway PostgreSQL server for tests: a cluster
// made by initdb in a temporary directory, listening only on a Unix socket
// there (listen_addresses is empty: no TCP port is taken), with fsync off
// and prepared transactions enabled. It is removed when the server stops.
//
// A package's tests share one server, started by TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }
//
// and each test takes it, or is skipped when PostgreSQL is not installed:
//
//	srv := pgtest.Shared(t)
//	conn := srv.CreateDatabase(t) // a database of the test's own
//
// With CI=1 in the environment a missing installation fails the tests
// instead of skipping them, so that CI cannot pass without running them.
//
// The binaries (initdb and postgres) are looked up on PATH, then in
// /usr/lib/postgresql/<version>/bin (where Debian's packages put them; the
// highest version wins). PostgreSQL refuses to run as root, so when the
// test runs as root the server runs as the OS user postgres (the one
// Debian's package creates), and its directory is handed to that user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled says no PostgreSQL binaries were found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (initdb and postgres are neither on PATH nor in /usr/lib/postgresql/*/bin; on Debian: apt-get install postgresql)")

// Options configure a server.
type Options struct {
	// Settings are server settings (postgres -c name=value) on top of
	// the defaults: max_prepared_transactions 64, fsync, synchronous_commit
	// and full_page_writes off.
	Settings map[string]string
}

// Tunables, each with its reason.
const (
	// startTimeout bounds the wait for a new server to accept
	// connections; a loaded CI machine may take seconds.
	startTimeout = 60 * time.Second
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 20 * time.Second
	// port only names the socket file: there is no TCP listener.
	port = 5432
)

func defaultSettings() map[string]string {
	return map[string]string{
		"listen_addresses": "",
		// Enough for a few tests' sinks at once, and for the
		// transactions a killed job leaves prepared.
		"max_prepared_transactions": "64",
		"fsync":                     "off",
		"synchronous_commit":        "off",
		"full_page_writes":          "off",
		"shared_buffers":            "32MB",
	}
}

// Server is a running PostgreSQL server.
type Server struct {
	dir     string // the temporary directory: data/, the socket, server.log
	log     string
	stop    chan struct{}
	exited  chan error // the postmaster's exit, once
	stopped atomic.Bool
	dbs     atomic.Int64 // databases made by CreateDatabase
}

// Start initialises a cluster in a new temporary directory and starts a
// server on it. ErrNotInstalled says there is no PostgreSQL to start.
func Start(opts Options) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, log: filepath.Join(dir, "server.log"), stop: make(chan struct{}), exited: make(chan error, 1)}
	if err := s.start(bin, cred, opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(bin string, cred *syscall.Credential, opts Options) error {
	if cred != nil {
		// NB: the server's user must reach the directory: MkdirTemp made
		// it 0700 for root.
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: hand %s to the postgres user: %w", s.dir, err)
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir = s.dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: %s: %w\n%s", initdb, err, out)
	}
	settings := defaultSettings()
	for k, v := range opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", data, "-k", s.dir, "-p", strconv.Itoa(port)}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", k+"="+settings[k])
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, logf, logf
	// NB: Pdeathsig ends the server with the test binary, even when that
	// is killed; it fires when the thread that started the server exits,
	// so that thread stays locked to the goroutine that waits on it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	started := make(chan error, 1)
	go s.own(cmd, started)
	if err := <-started; err != nil {
		return fmt.Errorf("pgtest: start %s: %w", cmd.Path, err)
	}
	return s.waitReady()
}

// own starts cmd on a locked thread and waits for it or for Stop.
func (s *Server) own(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the server
	if err := cmd.Start(); err != nil {
		started <- err
		close(s.exited)
		return
	}
	started <- nil
	wait := make(chan error, 1)
	go func() { wait <- cmd.Wait() }()
	var err error
	select {
	case err = <-wait:
	case <-s.stop:
		cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case err = <-wait:
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			err = <-wait
		}
	}
	s.exited <- err
	close(s.exited)
}

// waitReady waits until the server accepts a connection.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-s.exited:
			return fmt.Errorf("pgtest: the server exited (%v) before accepting connections: %s", err, s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.ConnString("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: the server did not accept connections within %v (%v): %s", startTimeout, last, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ConnString returns the connection string of database db on the server,
// as the superuser postgres.
func (s *Server) ConnString(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.dir, port, db)
}

// CreateDatabase creates a database of t's own and returns its connection
// string; it is dropped, with its prepared transactions rolled back, when
// t ends.
func (s *Server) CreateDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", s.dbs.Add(1), sanitize(t.Name()))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.ConnString("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() { s.dropDatabase(t, name) })
	return s.ConnString(name)
}

// dropDatabase rolls back the prepared transactions of database name,
// which would keep it from being dropped, and drops it.
func (s *Server) dropDatabase(t testing.TB, name string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.ConnString(name))
	if err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
		return
	}
	rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
	var gids []string
	if err == nil {
		gids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	for _, gid := range gids {
		if err == nil {
			_, err = conn.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid))
		}
	}
	conn.Close(ctx)
	if err == nil {
		conn, err = pgx.Connect(ctx, s.ConnString("postgres"))
	}
	if err == nil {
		_, err = conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	if err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	if s.stopped.Swap(true) {
		return nil
	}
	close(s.stop)
	err := <-s.exited
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil // a fast shutdown, or a server that never started
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// findBinaries returns the directory holding initdb and postgres.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if i, err := exec.LookPath("initdb"); err == nil && filepath.Dir(i) == filepath.Dir(p) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "postgres")) && isFile(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

// versionOf returns the major version in /usr/lib/postgresql/<v>/bin.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// serverUser returns the credential to run the server with: nil unless
// this process runs as root, then the postgres user's.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: PostgreSQL will not run as root, and there is no postgres user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: the postgres user's ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// sanitize makes a test's name fit a database name: lower-case letters,
// digits and underscores, at most 40 bytes.
func sanitize(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 40)])
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// The server Main started for the test binary, or why there is none.
var (
	shared    *Server
	sharedErr error
)

// Main starts one server for the test binary, runs its tests and stops the
// server; it returns the exit code for os.Exit. The tests take the server
// with Shared.
func Main(m *testing.M, opts Options) int {
	shared, sharedErr = Start(opts)
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop:", err)
			code = max(code, 1)
		}
	}
	return code
}

// Shared returns the server Main started. Without PostgreSQL installed it
// skips t, or fails it when the environment says CI=1; a server that
// failed to start fails t.
func Shared(t testing.TB) *Server {
	t.Helper()
	switch {
	case shared != nil:
		return shared
	case sharedErr == nil:
		t.Fatal("pgtest: Shared without pgtest.Main in TestMain")
	case errors.Is(sharedErr, ErrNotInstalled) && os.Getenv("CI") != "1":
		t.Skip(sharedErr)
	}
	t.Fatal(sharedErr)
	return nil
}
