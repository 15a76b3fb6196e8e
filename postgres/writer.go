package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// batch is up to Config.BatchSize rows, flattened: row i is
// vals[i*columns : (i+1)*columns]. The last batch of a transaction names
// it (gid) and carries the channel its PREPARE's result is sent on.
type batch struct {
	vals []any
	rows int
	gid  string
	done chan error // buffered: the writer never waits on it
}

// writer owns the data connection. Its goroutine takes batches in the
// order the task thread sends them, copies each into the open
// transaction (beginning one when none is open) and, at a batch that
// names a gid, prepares the transaction. Exactly two batches exist: the
// task thread fills one while the writer copies the other, so a
// subtask's rows in memory never exceed two batches.
type writer struct {
	conn    *pgx.Conn
	table   pgx.Identifier
	columns []string
	work    chan *batch // to the writer
	free    chan *batch // back to the task thread
	cancel  context.CancelFunc
	exited  chan struct{}
	inTxn   bool

	mu struct {
		sync.Mutex
		err error // the first failure; every later batch fails with it
	}
}

func newWriter(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, columns []string, batchRows int) *writer {
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{conn: conn, table: table, columns: columns,
		work: make(chan *batch, 2), free: make(chan *batch, 2), cancel: cancel, exited: make(chan struct{})}
	for range 2 {
		w.free <- &batch{vals: make([]any, 0, batchRows*len(columns))}
	}
	go w.run(ctx)
	return w
}

// run serves batches until work is closed, then closes the connection:
// a transaction left open (never prepared) is rolled back by the server.
func (w *writer) run(ctx context.Context) {
	defer close(w.exited)
	for b := range w.work {
		err := w.err()
		if err == nil {
			err = w.serve(ctx, b)
			w.fail(err)
		}
		if b.done != nil {
			b.done <- err
		}
		clear(b.vals) // NB: drop the references to the records' values
		b.vals, b.rows, b.gid, b.done = b.vals[:0], 0, "", nil
		w.free <- b
	}
	w.conn.Close(context.WithoutCancel(ctx))
}

// serve copies b into the open transaction and prepares it if b is its
// last batch.
func (w *writer) serve(ctx context.Context, b *batch) error {
	if b.rows > 0 {
		if !w.inTxn {
			if _, err := w.conn.PgConn().Exec(ctx, "BEGIN").ReadAll(); err != nil {
				return fmt.Errorf("begin: %w", err)
			}
			w.inTxn = true
		}
		n, err := w.conn.CopyFrom(ctx, w.table, w.columns, &rowSource{vals: b.vals, columns: len(w.columns), rows: b.rows})
		if err != nil {
			return fmt.Errorf("copy %d rows: %w", b.rows, err)
		}
		if n != int64(b.rows) {
			return fmt.Errorf("copy %d rows: the server took %d", b.rows, n)
		}
	}
	if b.gid == "" {
		return nil
	}
	if !w.inTxn {
		return fmt.Errorf("prepare %s: no transaction is open", b.gid) // the task thread never sends this
	}
	w.inTxn = false
	if _, err := w.conn.PgConn().Exec(ctx, "PREPARE TRANSACTION "+quoteLiteral(b.gid)).ReadAll(); err != nil {
		return fmt.Errorf("prepare transaction %s: %w", b.gid, err)
	}
	if commitAtBarrier {
		if _, err := w.conn.PgConn().Exec(ctx, "COMMIT PREPARED "+quoteLiteral(b.gid)).ReadAll(); err != nil {
			return fmt.Errorf("commit prepared %s: %w", b.gid, err)
		}
	}
	return nil
}

func (w *writer) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err == nil {
		w.mu.err = err
	}
}

// stop ends the writer: an in-flight statement is cancelled, queued
// batches fail, and the connection is closed. It returns once the
// writer's goroutine has, so that nothing this instance sends reaches
// the server afterwards.
func (w *writer) stop() {
	w.cancel()
	w.fail(errStopped)
	close(w.work)
	<-w.exited
}

// rowSource hands the rows of a batch to CopyFrom.
type rowSource struct {
	vals          []any
	columns, rows int
	i             int // rows handed out
}

func (r *rowSource) Next() bool { r.i++; return r.i <= r.rows }

func (r *rowSource) Values() ([]any, error) {
	return r.vals[(r.i-1)*r.columns : r.i*r.columns], nil
}

func (r *rowSource) Err() error { return nil }
