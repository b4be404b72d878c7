package inprocess_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/inprocess"
)

// base is a database/sql driver that records what reaches it, so that the
// tests can see when a wake-up is delivered relative to the driver's own
// commit. It stands for the driver (modernc's SQLite, MySQL's) that the Hub
// wraps; the Hub itself is the real one.
type base struct {
	mu        sync.Mutex
	log       []string
	commitErr error
}

func (b *base) add(s string) { b.mu.Lock(); b.log = append(b.log, s); b.mu.Unlock() }
func (b *base) events() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}
func (b *base) Connect(context.Context) (driver.Conn, error) { return &baseConn{b: b}, nil }
func (b *base) Driver() driver.Driver                        { return nil }

type baseConn struct{ b *base }

func (c *baseConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (c *baseConn) Close() error                        { return nil }
func (c *baseConn) Begin() (driver.Tx, error)           { c.b.add("begin"); return baseTx{c.b}, nil }
func (c *baseConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	if q == "fail" {
		return nil, errors.New("refused")
	}
	c.b.add("exec " + q)
	return driver.RowsAffected(1), nil
}

type baseTx struct{ b *base }

func (t baseTx) Commit() error {
	t.b.mu.Lock()
	err := t.b.commitErr
	t.b.mu.Unlock()
	t.b.add("commit")
	return err
}
func (t baseTx) Rollback() error { t.b.add("rollback"); return nil }

func open(t *testing.T) (*base, *sql.DB, *inprocess.Hub, func() []string) {
	t.Helper()
	b := &base{}
	hub := inprocess.New()
	db := sql.OpenDB(hub.Connector(b))
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- hub.Listen(ctx, "ch", func() { close(ready) }, func(p string) { b.add("wake " + p) })
	}()
	<-ready
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	got, ok := inprocess.HubOf(db)
	require.True(t, ok)
	require.Same(t, hub, got)
	return b, db, hub, b.events
}

func TestWakeUpComesAfterTheCommitAndOncePerPayload(t *testing.T) {
	_, db, _, events := open(t)
	ctx := inprocess.OnCommit(context.Background(), "ch", "a")
	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "insert 1")
	require.NoError(t, err)
	_, err = tx.ExecContext(inprocess.OnCommit(ctx, "other", "b"), "insert 2")
	require.NoError(t, err)
	_, err = tx.ExecContext(context.Background(), "unmarked")
	require.NoError(t, err)
	require.Equal(t, []string{"begin", "exec insert 1", "exec insert 2", "exec unmarked"}, events(), "nothing woken before the commit")
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{"begin", "exec insert 1", "exec insert 2", "exec unmarked", "commit", "wake a"}, events(),
		"one wake-up per payload and channel listened to, after the driver's commit")
}

func TestRollbackFailedCommitAndFailedStatementWakeNothing(t *testing.T) {
	b, db, _, events := open(t)
	ctx := inprocess.OnCommit(context.Background(), "ch", "a")

	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "insert")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())

	b.mu.Lock()
	b.commitErr = errors.New("disk I/O error")
	b.mu.Unlock()
	tx, err = db.Begin()
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "insert")
	require.NoError(t, err)
	require.Error(t, tx.Commit())

	b.mu.Lock()
	b.commitErr = nil
	b.mu.Unlock()
	tx, err = db.Begin()
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "fail")
	require.Error(t, err)
	require.NoError(t, tx.Commit())

	for _, e := range events() {
		require.NotContains(t, e, "wake", "events: %v", events())
	}
}

func TestAutocommitStatementWakesAtOnce(t *testing.T) {
	_, db, _, events := open(t)
	_, err := db.ExecContext(inprocess.OnCommit(context.Background(), "ch", "a"), "insert")
	require.NoError(t, err)
	require.Equal(t, []string{"exec insert", "wake a"}, events())
}

func TestListenEndsWithItsContextAndStopsReceiving(t *testing.T) {
	hub := inprocess.New()
	b := &base{}
	db := sql.OpenDB(hub.Connector(b))
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- hub.Listen(ctx, "ch", func() { close(ready) }, func(p string) { b.add("wake " + p) }) }()
	<-ready
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not return when its context ended")
	}
	_, err := db.ExecContext(inprocess.OnCommit(context.Background(), "ch", "a"), "insert")
	require.NoError(t, err)
	require.Equal(t, []string{"exec insert"}, b.events())
}

func TestOpenDBNamesAnUnknownDriver(t *testing.T) {
	_, err := inprocess.OpenDB("no-such-driver", "x")
	require.ErrorContains(t, err, `"no-such-driver"`)
}

func TestBaseDriverIsTheWrappedDriver(t *testing.T) {
	db, err := inprocess.OpenDB("mysql", "root@tcp(127.0.0.1:3306)/test")
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, "*mysql.MySQLDriver", fmt.Sprintf("%T", inprocess.BaseDriver(db)))
	require.NotEqual(t, "*mysql.MySQLDriver", fmt.Sprintf("%T", db.Driver()))
}
