package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringflow/ringflow"
)

// Config configures a PostgreSQL sink of records of type T.
type Config[T any] struct {
	// ConnString is the server to write to, as a URL
	// ("postgres://user:pass@host:5432/db") or key=value pairs ("host=/run/postgresql
	// dbname=db"), with the environment's PG* variables as defaults (see
	// pgx.ParseConfig). The sink sets application_name itself.
	ConnString string
	// Table is the table the rows go into: "name" or "schema.name". Each
	// part is taken as written (it is quoted, so it is case-sensitive and
	// not folded to lower case) and may not hold a dot.
	Table string
	// Columns are the table's columns the rows fill, in the order Row
	// appends their values; the table's other columns take their
	// defaults.
	Columns []string
	// Row appends the values of the columns of rec's row to row, one per
	// column, and returns the result, as append does. The sink reuses
	// row's memory from batch to batch, so filling it allocates nothing
	// but what boxing a value in an interface does. A value may be of any
	// type pgx encodes into its column's type. Row runs on the subtask's
	// thread, in Write; a panic in it fails the task, as in any user
	// function.
	Row func(row []any, rec T) []any
	// BatchSize is the most rows sent in one COPY; default
	// DefaultBatchSize. A subtask holds at most two batches in memory.
	BatchSize int
	// TxnPrefix, when set, names the sink's prepared transactions in
	// place of the job's id and the operator's name. A sink used outside
	// a ringflow job, whose contexts name no job, needs it. Two sinks, in
	// one job or in two, must never share one: each rolls back the
	// other's transactions as its own left-overs.
	TxnPrefix string
}

// DefaultBatchSize is Config.BatchSize's default: a COPY's round trip is
// paid once for this many rows, and two batches of them stay small.
const DefaultBatchSize = 1024

// Tunables, each with its reason.
const (
	// stragglerWait bounds the wait for the sessions of an earlier run to
	// end once terminated; a server ends a session at its next check for
	// interrupts, within milliseconds unless the machine is overloaded.
	stragglerWait = 30 * time.Second
	// closeTimeout bounds the goodbye to the server at Close.
	closeTimeout = 5 * time.Second
)

// ErrPreparedTransactionsDisabled says the server's
// max_prepared_transactions is 0: it cannot prepare a transaction, and
// the sink needs it to.
var ErrPreparedTransactionsDisabled = errors.New("max_prepared_transactions is 0 on the server: PREPARE TRANSACTION is disabled; " +
	"set max_prepared_transactions in postgresql.conf (at least the sink's parallelism times the checkpoints in flight plus one, e.g. 64) and restart the server")

// Sink returns a transactional sink that inserts each record as a row of
// a PostgreSQL table (see the package doc), for ringflow.TxnSink. Its
// configuration is checked at Open: a mistake in it, or a server that
// cannot take it, fails the job with an error naming what is wrong.
func Sink[T any](cfg Config[T]) func() ringflow.TwoPhaseSink[T] {
	cfg.Columns = slices.Clone(cfg.Columns)
	return func() ringflow.TwoPhaseSink[T] { return &sink[T]{cfg: cfg} }
}

// sink is one subtask's instance.
type sink[T any] struct {
	cfg      Config[T]
	table    pgx.Identifier
	conf     *pgx.ConnConfig // with this instance's application_name
	ctl      *pgx.Conn       // the task thread's: checks, commits, rollbacks
	w        *writer         // the data connection's
	scope    string
	sub, par int
	nonce    string
	seq      uint64  // the next transaction's number
	batch    *batch  // being filled; nil when the task thread holds none
	rows     int     // rows in the open transaction
	pids     []int32 // the server processes of ctl and the writer's connection
}

func (s *sink[T]) errorf(format string, args ...any) error {
	return fmt.Errorf("postgres sink %s: "+format, append([]any{s.cfg.Table}, args...)...)
}

// Open checks the configuration, connects and checks the server: that it
// prepares transactions, that the table and its columns exist and that
// the user may insert into it.
func (s *sink[T]) Open(ctx context.Context, subtask, parallelism int) error {
	s.sub, s.par = subtask, parallelism
	if err := s.configure(ctx); err != nil {
		return err
	}
	var err error
	if s.ctl, err = pgx.ConnectConfig(ctx, s.conf); err != nil {
		return s.errorf("connect: %w", err)
	}
	data, err := pgx.ConnectConfig(ctx, s.conf)
	if err == nil {
		err = s.checkServer(ctx)
	} else {
		err = s.errorf("connect: %w", err)
	}
	if err != nil {
		s.ctl.Close(ctx)
		if data != nil {
			data.Close(ctx)
		}
		s.ctl = nil
		return err
	}
	s.pids = []int32{int32(s.ctl.PgConn().PID()), int32(data.PgConn().PID())}
	s.w = newWriter(ctx, data, s.table, s.cfg.Columns, s.cfg.BatchSize)
	var nonce [4]byte
	rand.Read(nonce[:])
	s.nonce = hex.EncodeToString(nonce[:])
	return nil
}

// configure checks the configuration and derives the sink's names.
func (s *sink[T]) configure(ctx context.Context) error {
	c := &s.cfg
	var errs []error
	s.table = pgx.Identifier(strings.Split(c.Table, "."))
	switch {
	case c.Table == "":
		errs = append(errs, errors.New("Table is empty"))
	case len(s.table) > 2 || slices.Contains(s.table, ""):
		errs = append(errs, fmt.Errorf("Table %q is neither \"name\" nor \"schema.name\"", c.Table))
	}
	if len(c.Columns) == 0 {
		errs = append(errs, errors.New("Columns is empty"))
	}
	for i, col := range c.Columns {
		if col == "" || slices.Contains(c.Columns[:i], col) {
			errs = append(errs, fmt.Errorf("column %d is %q: empty or named twice", i, col))
		}
	}
	if c.Row == nil {
		errs = append(errs, errors.New("Row is nil"))
	}
	switch {
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	case c.BatchSize < 0:
		errs = append(errs, fmt.Errorf("BatchSize is %d", c.BatchSize))
	}
	ti, inJob := ringflow.TaskInfoFrom(ctx)
	switch {
	case c.TxnPrefix != "":
		s.scope = scopeOf("", "", c.TxnPrefix)
	case inJob:
		s.scope = scopeOf(ti.Job, ti.Operator, "")
	default:
		errs = append(errs, errors.New("outside a ringflow job the sink needs a TxnPrefix to name its transactions"))
	}
	conf, err := pgx.ParseConfig(c.ConnString)
	if err != nil {
		errs = append(errs, fmt.Errorf("connection string: %w", err))
	} else {
		conf.RuntimeParams["application_name"] = appPrefixOf(s.scope) + strconv.Itoa(s.sub)
		s.conf = conf
	}
	if err := errors.Join(errs...); err != nil {
		return s.errorf("%w", err)
	}
	return nil
}

// checkServer checks that the server prepares transactions and that the
// table and its columns exist and take inserts.
func (s *sink[T]) checkServer(ctx context.Context) error {
	var maxPrepared int
	var table *string
	err := s.ctl.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int, to_regclass($1)::text",
		s.table.Sanitize()).Scan(&maxPrepared, &table)
	switch {
	case err != nil:
		return s.errorf("check the server: %w", err)
	case maxPrepared == 0:
		return s.errorf("%w", ErrPreparedTransactionsDisabled)
	case table == nil:
		return s.errorf("there is no table %s in database %s", s.table.Sanitize(), s.conf.Database)
	}
	rows, err := s.ctl.Query(ctx, "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
		s.table.Sanitize())
	if err != nil {
		return s.errorf("list the columns: %w", err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.errorf("list the columns: %w", err)
	}
	for _, col := range s.cfg.Columns {
		if !slices.Contains(have, col) {
			return s.errorf("table %s has no column %q (it has %s)", s.table.Sanitize(), col, strings.Join(have, ", "))
		}
	}
	var insert bool
	if err := s.ctl.QueryRow(ctx, "SELECT has_table_privilege($1, 'INSERT')", s.table.Sanitize()).Scan(&insert); err != nil {
		return s.errorf("check privileges: %w", err)
	}
	if !insert {
		return s.errorf("user %s may not insert into %s", s.conf.User, s.table.Sanitize())
	}
	return nil
}

// Recover ends the sessions an earlier run of this subtask's share left
// on the server, commits txns, and rolls back every other transaction
// of that share still prepared. The share of subtask i of p is every
// subtask j of any earlier run with j % p == i: the subtasks whose
// checkpointed transactions ringflow gives to subtask i after a restore
// at another parallelism. So no prepared transaction is left to no one,
// and the one subtask that commits a transaction is the only one that
// could roll it back.
func (s *sink[T]) Recover(ctx context.Context, txns [][]byte) error {
	if err := s.endStragglers(ctx); err != nil {
		return err
	}
	for _, t := range txns {
		if err := s.Commit(ctx, t); err != nil {
			return err
		}
	}
	rows, err := s.ctl.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", s.scope)
	if err != nil {
		return s.errorf("list prepared transactions: %w", err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.errorf("list prepared transactions: %w", err)
	}
	for _, gid := range gids {
		if j, ok := subtaskOf(s.scope, gid); !ok || j%s.par != s.sub {
			continue
		}
		err := s.exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid))
		if err != nil && !isUndefined(err) {
			return s.errorf("roll back %s: %w", gid, err)
		}
	}
	return nil
}

// endStragglers terminates the sessions of this subtask's share other than
// its own and waits for them to end. A session of a run that crashed, or
// of an attempt that failed, may still be executing a PREPARE
// TRANSACTION the server received before its client went away; once the
// session has ended, its transaction is either prepared, and listed in
// pg_prepared_xacts, or gone.
func (s *sink[T]) endStragglers(ctx context.Context) error {
	const q = `SELECT pid, application_name FROM pg_stat_activity
		WHERE datname = current_database() AND starts_with(application_name, $1) AND pid <> ALL($2)`
	prefix := appPrefixOf(s.scope)
	deadline := time.Now().Add(stragglerWait)
	for {
		rows, err := s.ctl.Query(ctx, q, prefix, s.pids)
		if err != nil {
			return s.errorf("list sessions: %w", err)
		}
		type session struct {
			PID  int32
			Name string
		}
		all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[session])
		if err != nil {
			return s.errorf("list sessions: %w", err)
		}
		var mine []int32
		for _, ss := range all {
			j, err := strconv.Atoi(strings.TrimPrefix(ss.Name, prefix))
			if err == nil && j%s.par == s.sub {
				mine = append(mine, ss.PID)
			}
		}
		if len(mine) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return s.errorf("sessions %v of an earlier run did not end within %v of their termination", mine, stragglerWait)
		}
		if _, err := s.ctl.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM unnest($1::int4[]) AS pid", mine); err != nil {
			return s.errorf("terminate the sessions of an earlier run: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Write adds rec's row to the current batch; a full batch goes to the
// writer. It waits only when the writer is a full batch behind.
func (s *sink[T]) Write(rec T) error {
	if s.batch == nil {
		if err := s.take(); err != nil {
			return err
		}
	}
	b := s.batch
	n := len(b.vals)
	b.vals = s.cfg.Row(b.vals, rec)
	if got := len(b.vals) - n; got != len(s.cfg.Columns) {
		b.vals = b.vals[:n]
		return s.errorf("Row appended %d values for a %T; want %d, one per column (%s)",
			got, rec, len(s.cfg.Columns), strings.Join(s.cfg.Columns, ", "))
	}
	b.rows++
	s.rows++
	if b.rows == s.cfg.BatchSize {
		s.w.work <- b // NB: never blocks: work has room for both batches
		s.batch = nil
	}
	return nil
}

// take takes a batch to fill, waiting for the writer to return one.
func (s *sink[T]) take() error {
	s.batch = <-s.w.free
	if err := s.w.err(); err != nil {
		return s.errorf("%w", err)
	}
	return nil
}

// PreCommit ends the open transaction: its last batch goes to the writer,
// naming the transaction, and the durable function waits for the writer's
// PREPARE TRANSACTION of it.
func (s *sink[T]) PreCommit() ([]byte, func(context.Context) error, error) {
	if err := s.w.err(); err != nil {
		return nil, nil, s.errorf("%w", err)
	}
	if s.rows == 0 {
		return nil, nil, nil
	}
	if s.batch == nil {
		if err := s.take(); err != nil {
			return nil, nil, err
		}
	}
	gid := gidOf(s.scope, s.sub, s.nonce, s.seq)
	s.seq++
	done := make(chan error, 1)
	s.batch.gid, s.batch.done = gid, done
	s.w.work <- s.batch
	s.batch, s.rows = nil, 0
	durable := func(ctx context.Context) error {
		select {
		case err := <-done:
			if err != nil {
				return s.errorf("%w", err)
			}
			return nil
		case <-ctx.Done():
			return s.errorf("prepare %s: %w", gid, context.Cause(ctx))
		}
	}
	return []byte(gid), durable, nil
}

// Commit commits a prepared transaction. A gid the server does not know
// was committed before: the checkpoints list only transactions whose
// PREPARE succeeded, and only Recover rolls one back, never one it is
// given.
func (s *sink[T]) Commit(ctx context.Context, txn []byte) error {
	if s.w != nil {
		if err := s.w.err(); err != nil {
			// NB: a failed PREPARE leaves no transaction behind, which
			// COMMIT PREPARED would take for one committed before.
			return s.errorf("%w", err)
		}
	}
	gid := string(txn)
	err := s.exec(ctx, "COMMIT PREPARED "+quoteLiteral(gid))
	if err != nil && !isUndefined(err) {
		return s.errorf("commit prepared %s: %w", gid, err)
	}
	return nil
}

// exec runs a statement on the control connection in the simple
// protocol: COMMIT PREPARED and ROLLBACK PREPARED each name a gid, and
// would each be a new statement in pgx's cache otherwise.
func (s *sink[T]) exec(ctx context.Context, sql string) error {
	_, err := s.ctl.PgConn().Exec(ctx, sql).ReadAll()
	return err
}

// isUndefined reports whether err says a prepared transaction does not
// exist (SQLSTATE 42704, undefined_object).
func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42704"
}

// Close stops the writer, which rolls back the open transaction by
// closing its connection, and closes the control connection. Prepared
// transactions stay prepared: a checkpoint may hold them.
func (s *sink[T]) Close() error {
	if s.w != nil {
		s.w.stop()
		s.w = nil
	}
	if s.ctl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		s.ctl.Close(ctx)
		s.ctl = nil
	}
	return nil
}

var errStopped = errors.New("the sink is closed")
