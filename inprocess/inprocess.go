// Package inprocess wakes the relay when a transaction that wrote events
// commits, for the databases that have no LISTEN/NOTIFY (SQLite, MySQL)
// when the publisher and the relay run in one process: the quick start, the
// demo, a single-node service.
//
// Open the database through it, and hand that *sql.DB to the publisher and
// to the relay as usual:
//
//	db, err := inprocess.OpenDB("sqlite", "file:app.db?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
//
// It wraps the driver's connections. The publisher marks the context of the
// statement that inserts the events (OnCommit); the wrapped connection
// remembers the mark while its transaction is open and, once Commit has
// returned without error, wakes the relay's loop of each event type written
// (the poller finds the Hub through the *sql.DB, HubOf). A rollback, or a
// Commit that fails, wakes nothing; nothing is woken before the commit. A
// statement run outside a transaction (autocommit) wakes once it returned
// without error.
//
// Across processes (another process wrote the events) nothing is woken and
// the relay polls at its pace, as without this package. Nothing here runs
// a statement of its own: an idle relay costs nothing more.
package inprocess

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// markKey is the context key of the wake-ups a statement asks for.
type markKey struct{}

// mark is one wake-up: the payload (an event type) on a channel.
type mark struct{ channel, payload string }

// OnCommit returns ctx marked so that a statement run with it through a
// connection of a Hub wakes the listeners of channel with payload once its
// transaction commits. Marks add up: a statement can carry several. Without
// a Hub the mark does nothing. The publisher calls it for every insert of
// events on a database that cannot notify (dialects.OutboxWriter.CanNotify).
func OnCommit(ctx context.Context, channel, payload string) context.Context {
	prev, _ := ctx.Value(markKey{}).([]mark)
	next := make([]mark, len(prev), len(prev)+1)
	copy(next, prev)
	return context.WithValue(ctx, markKey{}, append(next, mark{channel, payload}))
}

func marksOf(ctx context.Context) []mark {
	if ctx == nil {
		return nil
	}
	m, _ := ctx.Value(markKey{}).([]mark)
	return m
}

// Hub routes the wake-ups of its connections' commits to the listeners of
// the process. Its zero value is not usable: use New.
type Hub struct {
	mu        sync.Mutex
	listeners map[string]map[*listener]struct{}
}

type listener struct{ notify func(string) }

// New returns an empty Hub.
func New() *Hub { return &Hub{listeners: map[string]map[*listener]struct{}{}} }

// Listen implements the relay's Listener (poller.Listener): it calls ready
// at once, then notify with the payload of each wake-up on channel until
// ctx ends, and returns nil. notify is called from the goroutine that
// committed, so it must not block (the poller's does not).
func (h *Hub) Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error {
	l := &listener{notify: notify}
	h.mu.Lock()
	if h.listeners[channel] == nil {
		h.listeners[channel] = map[*listener]struct{}{}
	}
	h.listeners[channel][l] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.listeners[channel], l)
		if len(h.listeners[channel]) == 0 {
			delete(h.listeners, channel)
		}
		h.mu.Unlock()
	}()
	ready()
	<-ctx.Done()
	return nil
}

// Listening reports whether a listener of this process listens on channel
// now (the DLQ store tells an operator whether its retry woke a relay).
func (h *Hub) Listening(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.listeners[channel]) > 0
}

// wake delivers marks to the listeners, each payload once per channel.
func (h *Hub) wake(marks []mark) {
	if len(marks) == 0 {
		return
	}
	seen := make(map[mark]bool, len(marks))
	var calls []func()
	h.mu.Lock()
	for _, m := range marks {
		if seen[m] {
			continue
		}
		seen[m] = true
		for l := range h.listeners[m.channel] {
			notify, payload := l.notify, m.payload
			calls = append(calls, func() { notify(payload) })
		}
	}
	h.mu.Unlock()
	for _, call := range calls {
		call()
	}
}

// Connector wraps c: every connection it opens reports its commits to h.
func (h *Hub) Connector(c driver.Connector) driver.Connector {
	return &connector{base: c, hub: h}
}

// OpenDB opens a *sql.DB on the registered database/sql driver driverName
// (e.g. "sqlite" for modernc.org/sqlite, "mysql") with dsn, whose commits
// wake the relay's listeners of a new Hub (HubOf returns it). The driver
// must be registered: import it.
func OpenDB(driverName, dsn string) (*sql.DB, error) {
	probe, err := sql.Open(driverName, "")
	if err != nil {
		return nil, fmt.Errorf("inprocess: open %q: %w (import the driver's package)", driverName, err)
	}
	d := probe.Driver()
	_ = probe.Close()
	var base driver.Connector
	if dc, ok := d.(driver.DriverContext); ok {
		if base, err = dc.OpenConnector(dsn); err != nil {
			return nil, fmt.Errorf("inprocess: open %q: %w", driverName, err)
		}
	} else {
		base = dsnConnector{dsn: dsn, d: d}
	}
	return sql.OpenDB(New().Connector(base)), nil
}

// HubOf returns the Hub whose connections db uses, when db was opened
// through OpenDB or a Hub's Connector; nil, false otherwise.
func HubOf(db *sql.DB) (*Hub, bool) {
	if db == nil {
		return nil, false
	}
	if d, ok := db.Driver().(*drv); ok {
		return d.hub, true
	}
	return nil, false
}

// HubFor is HubOf for the shapes a *sql.DB is handed around in: the
// *sql.DB itself or watermill-sql's StdSQLBeginner (by value or pointer)
// around one. Anything else (a transaction, a pgx pool) has no Hub.
func HubFor(db any) (*Hub, bool) {
	switch b := db.(type) {
	case *sql.DB:
		return HubOf(b)
	case wsql.StdSQLBeginner:
		sdb, _ := b.SQLBeginner.(*sql.DB)
		return HubOf(sdb)
	case *wsql.StdSQLBeginner:
		if b == nil {
			return nil, false
		}
		sdb, _ := b.SQLBeginner.(*sql.DB)
		return HubOf(sdb)
	}
	return nil, false
}

// BaseDriver returns the driver under db's connections: the driver's own
// when db was opened through a Hub (db.Driver() is then this package's),
// db.Driver() otherwise. Code that recognises a database by its driver
// (the service does) reads it here.
func BaseDriver(db *sql.DB) driver.Driver {
	if d, ok := db.Driver().(*drv); ok {
		return d.base
	}
	return db.Driver()
}

// dsnConnector is database/sql's own fallback for a driver without
// DriverContext.
type dsnConnector struct {
	dsn string
	d   driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

type connector struct {
	base driver.Connector
	hub  *Hub
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{base: cn, hub: c.hub}, nil
}

func (c *connector) Driver() driver.Driver { return &drv{base: c.base.Driver(), hub: c.hub, c: c} }

// drv is what db.Driver() returns: HubOf reads the Hub from it. Open is
// database/sql's legacy path; OpenConnector keeps the wrapping.
type drv struct {
	base driver.Driver
	hub  *Hub
	c    *connector
}

func (d *drv) Open(name string) (driver.Conn, error) {
	cn, err := d.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &conn{base: cn, hub: d.hub}, nil
}

// conn forwards everything to the driver's connection and keeps the marks
// of its open transaction. database/sql uses a connection from one
// goroutine at a time; the mutex only guards against a driver that does not.
type conn struct {
	base driver.Conn
	hub  *Hub

	mu      sync.Mutex
	inTx    bool
	pending []mark
}

// noted records the marks of ctx after a statement succeeded: kept until
// the transaction ends, or delivered at once outside one.
func (c *conn) noted(ctx context.Context) {
	m := marksOf(ctx)
	if len(m) == 0 {
		return
	}
	c.mu.Lock()
	if c.inTx {
		c.pending = append(c.pending, m...)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.hub.wake(m)
}

func (c *conn) endTx(committed bool) {
	c.mu.Lock()
	m := c.pending
	c.pending, c.inTx = nil, false
	c.mu.Unlock()
	if committed {
		c.hub.wake(m)
	}
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		s   driver.Stmt
		err error
	)
	if p, ok := c.base.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, query)
	} else {
		s, err = c.base.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &stmt{base: s, c: c}, nil
}

func (c *conn) Close() error { return c.base.Close() }

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var (
		t   driver.Tx
		err error
	)
	if b, ok := c.base.(driver.ConnBeginTx); ok {
		t, err = b.BeginTx(ctx, opts)
	} else {
		if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) || opts.ReadOnly {
			return nil, errors.New("inprocess: the driver supports neither isolation levels nor read-only transactions")
		}
		t, err = c.base.Begin() //nolint:staticcheck // the driver has no BeginTx
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.inTx, c.pending = true, nil
	c.mu.Unlock()
	return &tx{base: t, c: c}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.base.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip // database/sql prepares the statement: stmt reports it
	}
	r, err := e.ExecContext(ctx, query, args)
	if err == nil {
		c.noted(ctx)
	}
	return r, err
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := q.QueryContext(ctx, query, args)
	if err == nil {
		c.noted(ctx)
	}
	return r, err
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.base.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	c.mu.Lock()
	c.inTx, c.pending = false, nil
	c.mu.Unlock()
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type tx struct {
	base driver.Tx
	c    *conn
}

func (t *tx) Commit() error {
	err := t.base.Commit()
	t.c.endTx(err == nil)
	return err
}

func (t *tx) Rollback() error {
	err := t.base.Rollback()
	t.c.endTx(false)
	return err
}

type stmt struct {
	base driver.Stmt
	c    *conn
}

func (s *stmt) Close() error  { return s.base.Close() }
func (s *stmt) NumInput() int { return s.base.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.base.Exec(args) //nolint:staticcheck // the driver's legacy path, no context to read
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.base.Query(args) //nolint:staticcheck // as Exec
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	var (
		r   driver.Result
		err error
	)
	if e, ok := s.base.(driver.StmtExecContext); ok {
		r, err = e.ExecContext(ctx, args)
	} else {
		vals, cerr := values(args)
		if cerr != nil {
			return nil, cerr
		}
		r, err = s.base.Exec(vals) //nolint:staticcheck // no StmtExecContext
	}
	if err == nil {
		s.c.noted(ctx)
	}
	return r, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	var (
		r   driver.Rows
		err error
	)
	if q, ok := s.base.(driver.StmtQueryContext); ok {
		r, err = q.QueryContext(ctx, args)
	} else {
		vals, cerr := values(args)
		if cerr != nil {
			return nil, cerr
		}
		r, err = s.base.Query(vals) //nolint:staticcheck // no StmtQueryContext
	}
	if err == nil {
		s.c.noted(ctx)
	}
	return r, err
}

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, fmt.Errorf("inprocess: the driver does not support named parameters (%q)", a.Name)
		}
		out[i] = a.Value
	}
	return out, nil
}
