package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
)

// This file holds a database/sql driver wrapper that counts, client-side,
// the SQL statements a pool sends: what the idle scenario on MariaDB
// reports, where no tracer like pgx's exists.

// sqlCount is what a sqlCounter counted. Every field but prepares and
// closes is a SQL statement the server runs.
type sqlCount struct {
	claims     int64 // SELECT … SKIP LOCKED: the oncebox claim's locking read
	probes     int64 // other SELECTs of PENDING rows: the MySQL claim's probe (SELECT 1 … LIMIT 1)
	selects    int64 // other SELECTs
	inserts    int64
	updates    int64
	deletes    int64
	others     int64 // any other statement
	setTx      int64 // SET TRANSACTION ISOLATION LEVEL …, sent by the driver before START TRANSACTION
	begins     int64 // START TRANSACTION
	commits    int64
	rollbacks  int64
	autocommit int64 // data statements run outside a transaction, each its own transaction
	prepares   int64 // server-side preparations (COM_STMT_PREPARE), not statements
	closes     int64 // prepared statements closed (COM_STMT_CLOSE), not statements
}

// all is the number of SQL statements.
func (c sqlCount) all() int64 {
	return c.data() + c.control()
}

// data is the number of data statements (SELECT, INSERT, UPDATE, DELETE, …).
func (c sqlCount) data() int64 {
	return c.claims + c.probes + c.selects + c.inserts + c.updates + c.deletes + c.others
}

// control is the number of transaction-control statements.
func (c sqlCount) control() int64 {
	return c.setTx + c.begins + c.commits + c.rollbacks
}

// transactions is the number of transactions: explicit ones and data
// statements run in autocommit.
func (c sqlCount) transactions() int64 {
	return c.begins + c.autocommit
}

func (c sqlCount) minus(o sqlCount) sqlCount {
	return sqlCount{claims: c.claims - o.claims, probes: c.probes - o.probes, selects: c.selects - o.selects,
		inserts: c.inserts - o.inserts,
		updates: c.updates - o.updates, deletes: c.deletes - o.deletes, others: c.others - o.others,
		setTx: c.setTx - o.setTx, begins: c.begins - o.begins, commits: c.commits - o.commits,
		rollbacks: c.rollbacks - o.rollbacks, autocommit: c.autocommit - o.autocommit,
		prepares: c.prepares - o.prepares, closes: c.closes - o.closes}
}

// String lists the non-zero statement counts.
func (c sqlCount) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"SET TRANSACTION", c.setTx}, {"START TRANSACTION", c.begins}, {"claim probe SELECT", c.probes},
		{"SELECT … SKIP LOCKED", c.claims},
		{"SELECT", c.selects}, {"INSERT", c.inserts}, {"UPDATE", c.updates}, {"DELETE", c.deletes},
		{"other", c.others}, {"COMMIT", c.commits}, {"ROLLBACK", c.rollbacks},
	} {
		if f.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", f.n, f.name))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// sqlCounter counts the statements of the connections of a
// countingConnector. It is safe for concurrent use.
type sqlCounter struct {
	mu sync.Mutex
	c  sqlCount
	// isolationStatement: the driver sends the isolation level of a
	// transaction as a statement of its own (go-sql-driver/mysql's SET
	// TRANSACTION ISOLATION LEVEL), not within the BEGIN (pgx's BEGIN
	// ISOLATION LEVEL …).
	isolationStatement bool
}

func (k *sqlCounter) snapshot() sqlCount {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.c
}

func (k *sqlCounter) add(f func(c *sqlCount)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f(&k.c)
}

// statement counts one statement of text query, run inside a transaction
// or not.
func (k *sqlCounter) statement(query string, inTx bool) {
	verb, _, _ := strings.Cut(strings.TrimSpace(query), " ")
	verb = strings.ToUpper(strings.TrimSpace(verb))
	k.add(func(c *sqlCount) {
		switch verb {
		case "SELECT", "WITH":
			switch upper := strings.ToUpper(query); {
			case strings.Contains(upper, "SKIP LOCKED"):
				c.claims++
			case strings.Contains(upper, "'PENDING'"):
				c.probes++
			default:
				c.selects++
			}
		case "INSERT":
			c.inserts++
		case "UPDATE":
			c.updates++
		case "DELETE":
			c.deletes++
		default:
			c.others++
		}
		if !inTx {
			c.autocommit++
		}
	})
}

// countingConnector wraps a driver.Connector and counts what its
// connections send.
type countingConnector struct {
	driver.Connector
	k *sqlCounter
}

// Connect implements driver.Connector.
func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{inner: conn, k: cc.k}, nil
}

// countingConn is a connection of a countingConnector. The interfaces it
// implements are those of go-sql-driver/mysql's and pgx's connections; it
// returns driver.ErrSkip where its connection lacks one, so that
// database/sql falls back as it would without the wrapper.
type countingConn struct {
	inner driver.Conn
	k     *sqlCounter
	inTx  bool // database/sql uses a connection from one goroutine at a time
}

var (
	_ driver.Conn               = (*countingConn)(nil)
	_ driver.ConnBeginTx        = (*countingConn)(nil)
	_ driver.ConnPrepareContext = (*countingConn)(nil)
	_ driver.ExecerContext      = (*countingConn)(nil)
	_ driver.QueryerContext     = (*countingConn)(nil)
	_ driver.Pinger             = (*countingConn)(nil)
	_ driver.SessionResetter    = (*countingConn)(nil)
	_ driver.Validator          = (*countingConn)(nil)
	_ driver.NamedValueChecker  = (*countingConn)(nil)
)

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.inner.Prepare(query)
	}
	c.k.add(func(n *sqlCount) { n.prepares++ })
	if err != nil {
		return nil, err
	}
	return &countingStmt{inner: st, conn: c, query: query}, nil
}

func (c *countingConn) Close() error { return c.inner.Close() }

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var tx driver.Tx
	var err error
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		tx, err = c.inner.Begin() //nolint:staticcheck // database/sql's own fallback
	}
	c.k.add(func(n *sqlCount) {
		if c.k.isolationStatement && sql.IsolationLevel(opts.Isolation) != sql.LevelDefault {
			n.setTx++
		}
		n.begins++
	})
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &countingTx{inner: tx, conn: c}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	if err != driver.ErrSkip {
		c.k.statement(query, c.inTx)
	}
	return res, err
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if err != driver.ErrSkip {
		c.k.statement(query, c.inTx)
	}
	return rows, err
}

func (c *countingConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingTx counts the end of a transaction.
type countingTx struct {
	inner driver.Tx
	conn  *countingConn
}

func (t *countingTx) Commit() error {
	t.conn.inTx = false
	t.conn.k.add(func(n *sqlCount) { n.commits++ })
	return t.inner.Commit()
}

func (t *countingTx) Rollback() error {
	t.conn.inTx = false
	t.conn.k.add(func(n *sqlCount) { n.rollbacks++ })
	return t.inner.Rollback()
}

// countingStmt is a prepared statement; each execution is a statement.
type countingStmt struct {
	inner driver.Stmt
	conn  *countingConn
	query string
}

var (
	_ driver.StmtExecContext   = (*countingStmt)(nil)
	_ driver.StmtQueryContext  = (*countingStmt)(nil)
	_ driver.NamedValueChecker = (*countingStmt)(nil)
)

func (s *countingStmt) Close() error {
	s.conn.k.add(func(n *sqlCount) { n.closes++ })
	return s.inner.Close()
}

func (s *countingStmt) NumInput() int { return s.inner.NumInput() }

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.conn.k.statement(s.query, s.conn.inTx)
	return s.inner.Exec(args) //nolint:staticcheck // the interface's
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.conn.k.statement(s.query, s.conn.inTx)
	return s.inner.Query(args) //nolint:staticcheck // the interface's
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.inner.(driver.StmtExecContext)
	if !ok {
		return s.Exec(values(args))
	}
	s.conn.k.statement(s.query, s.conn.inTx)
	return e.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.inner.(driver.StmtQueryContext)
	if !ok {
		return s.Query(values(args))
	}
	s.conn.k.statement(s.query, s.conn.inTx)
	return q.QueryContext(ctx, args)
}

// values drops the names of args, for a statement without the Context
// methods (whose driver then supports no named arguments).
func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}
