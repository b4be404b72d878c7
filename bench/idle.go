package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/poller"
)

// idleDatabase is created for the idle scenario and dropped after it, so
// that PostgreSQL's per-database transaction counters see only the relay
// under test. It is named after the run's bench schema, unique to the run.
var idleDatabase = benchSchema + "_idle"

// idleDeadline bounds each idle measurement in real time.
const idleDeadline = 3 * time.Minute

// runIdle measures what one idle event type costs the database in an hour:
// SQL statements, counted client-side by a pgx tracer, and transactions,
// counted by PostgreSQL in pg_stat_database (xact_commit + xact_rollback).
//
// The oncebox poller runs with its default configuration on a fake clock
// through one simulated hour (the adaptive delay grows from 250ms to 1m, so
// the claims are about 72; the recovery and clean-up jobs add a few
// statements). Watermill's forwarder polls every second by default; it idles
// for real seconds and its counts are extrapolated to an hour. The forwarder
// is the baseline.
//
// Each relay runs on a pool of one connection with pgxpool's liveness pings
// off, in a database of its own. The database also counts connecting, the
// pool's ping and the forwarder's start-up (which creates its tables if
// missing and inserts its offsets row), so a control run of each is
// measured the same way and subtracted: what is left is the relay's own.
func runIdle(ctx context.Context, e *env) ([]row, error) {
	db, err := createIdleDatabase(ctx, e)
	if err != nil {
		return nil, err
	}
	defer db.drop()
	window := time.Duration(e.n(20, 5)) * time.Second
	forwarderFor := func(window time.Duration) idleRun {
		return func(ctx context.Context, pool *pgxpool.Pool, tr *stmtCounter) (stmtCount, error) {
			return idleForwarder(ctx, pool, tr, window)
		}
	}
	obControl, err := db.measure(ctx, "control run (connect, ping, close)", connectOnly)
	if err != nil {
		return nil, err
	}
	ob, err := db.measure(ctx, "oncebox", db.idleOncebox)
	if err != nil {
		return nil, err
	}
	fwControl, err := db.measure(ctx, "forwarder control run (start, first poll, stop)", forwarderFor(0))
	if err != nil {
		return nil, err
	}
	fw, err := db.measure(ctx, "forwarder", forwarderFor(window))
	if err != nil {
		return nil, err
	}
	return idleRows(ob, ob.xacts-obControl.xacts, fw, fw.xacts-fwControl.xacts, window), nil
}

// idleRun is what an idle measurement runs on its pool; it returns the
// statements it counted.
type idleRun func(ctx context.Context, pool *pgxpool.Pool, tr *stmtCounter) (stmtCount, error)

// connectOnly is the control run of the oncebox measurement: the pool
// connects and pings, and closes.
func connectOnly(context.Context, *pgxpool.Pool, *stmtCounter) (stmtCount, error) {
	return stmtCount{}, nil
}

// idleRows turns the counts into rows of statements and rows of
// transactions, each against the forwarder. obXacts and fwXacts are the
// transactions the database counted beyond the control runs.
func idleRows(ob idleCount, obXacts int64, fw idleCount, fwXacts int64, window time.Duration) []row {
	perHour := 3600 / window.Seconds()
	obTotal := float64(ob.stmts.all)
	goal := "met"
	if obTotal > 100 {
		goal = "NOT met"
	}
	statements := withRatios([]row{
		{Case: "watermill forwarder, defaults (poll 1s): statements", Value: float64(fw.stmts.all) * perHour,
			Unit: "statements/h", Baseline: true, Note: fmt.Sprintf(
				"%d statements in %s of real time once running, extrapolated ×%.0f; each poll is BEGIN, SELECT, COMMIT",
				fw.stmts.all, window, perHour)},
		{Case: "oncebox poller, defaults: all statements", Value: obTotal, Unit: "statements/h",
			Note: fmt.Sprintf("no event type configured (the forwarder's case); one simulated hour on a fake clock; the goal, ≤ 100 an hour: %s", goal)},
		{Case: "oncebox poller, defaults: poll statements (discovery, WITH RECURSIVE …)", Value: float64(ob.stmts.claims), Unit: "statements/h",
			Note: "one per poll of the discovery, for every type at once: the adaptive delay grows from 250ms by ×1.5 to 1m"},
		{Case: "oncebox poller, defaults: job statements (recovery, clean-up)", Value: float64(ob.stmts.all - ob.stmts.claims),
			Unit: "statements/h", Note: "recovery: one statement a run, every 60s growing to 5m; clean-up: lease, delete, release, every 5m growing to 1h"},
	})
	// What the client side predicts: the forwarder's polls are one
	// transaction each; each oncebox statement is its own transaction, and
	// so is pgx's first preparation of each distinct statement run outside a
	// transaction.
	fwPolls := fw.stmts.all / 3
	obExpected := ob.stmts.all + ob.stmts.prepared
	transactions := withRatios([]row{
		{Case: "watermill forwarder, defaults (poll 1s): transactions", Value: float64(fwXacts) * perHour,
			Unit: "transactions/h", Baseline: true, Note: fmt.Sprintf(
				"counted by PostgreSQL: %d in %s beyond a control run (start-up, first poll, stop), extrapolated ×%.0f; %s",
				fwXacts, window, perHour, agreement(fwXacts, fwPolls, "one per poll"))},
		{Case: "oncebox poller, defaults: transactions", Value: float64(obXacts), Unit: "transactions/h",
			Note: fmt.Sprintf("counted by PostgreSQL beyond a control run (connect, ping, close); %s", agreement(obXacts, obExpected,
				fmt.Sprintf("%d statements, each its own transaction, + %d first-time statement preparations by pgx",
					ob.stmts.all, ob.stmts.prepared)))},
	})
	return append(statements, transactions...)
}

// agreement compares a transaction count of the database with what the
// client side predicts.
func agreement(counted, predicted int64, why string) string {
	if counted == predicted {
		return fmt.Sprintf("matches the client side's %d (%s)", predicted, why)
	}
	return fmt.Sprintf("the client side predicts %d (%s): the database's count is off by %+d", predicted, why, counted-predicted)
}

// idleOncebox runs one poller with the default configuration for one idle
// event type through one hour of a fake clock (idleHour) and returns the
// statements counted by then.
func (db *idleDB) idleOncebox(ctx context.Context, pool *pgxpool.Pool, tr *stmtCounter) (stmtCount, error) {
	var counts stmtCount
	err := idleHour(ctx, wsql.BeginnerFromPgx(pool), db.dialect, func() { counts = tr.snapshot() })
	return counts, err
}

// idleHour runs one poller with the default configuration and no event type
// configured — a drop-in for the forwarder, which relays whatever is
// published: its discovery polls for every type at once — on db through one
// hour of a fake clock: whenever its three goroutines (the discovery,
// recovery, clean-up) all wait on the clock, the clock moves 250ms. atEnd runs once the polls due at the end of the hour
// have run (or the hour failed), before the poller stops.
func idleHour(ctx context.Context, db wsql.Beginner, d dialects.Dialect, atEnd func()) error {
	fake := clockwork.NewFakeClockAt(time.Now())
	stop, err := startPollers(ctx, db, newSink(0, nil),
		poller.Config{Dialect: d, Clock: fake})
	if err != nil {
		return err
	}
	begin := fake.Now()
	var runErr error
	for runErr == nil && fake.Since(begin) < time.Hour {
		if runErr = fake.BlockUntilContext(ctx, 3); runErr == nil {
			fake.Advance(250 * time.Millisecond)
		}
	}
	if runErr == nil {
		// The polls due at the end of the hour have run.
		runErr = fake.BlockUntilContext(ctx, 3)
	}
	atEnd()
	if runErr != nil {
		runErr = fmt.Errorf("simulated %s of the hour: %w", fake.Since(begin), runErr)
	}
	return errors.Join(runErr, stop())
}

// idleForwarder runs Watermill's forwarder with its defaults on an empty
// table and counts the statements it sends in window (forwarderWindow).
func idleForwarder(ctx context.Context, pool *pgxpool.Pool, tr *stmtCounter, window time.Duration) (stmtCount, error) {
	var before, after stmtCount
	err := forwarderWindow(ctx, pgWM(pool), window, func() { before = tr.snapshot() }, func() { after = tr.snapshot() })
	return stmtCount{all: after.all - before.all, claims: after.claims - before.claims,
		prepared: after.prepared - before.prepared}, err
}

// forwarderWindow runs Watermill's forwarder with its defaults on w's empty
// table, calling atOpen and atClose window apart. The window opens half a
// second after the forwarder is running: its start-up (which creates the
// tables if missing) and its first poll, made at once, are done by then, and
// its later polls, a second apart, are half a second away from either end of
// the window, so that stopping never cuts one short. A zero window is the
// control run: start-up and first poll only. atClose runs on an error too.
func forwarderWindow(ctx context.Context, w wmDB, window time.Duration, atOpen, atClose func()) error {
	stop, err := startForwarder(ctx, w, newSink(0, nil), forwarderDefaults)
	if err != nil {
		return err
	}
	err = sleepCtx(ctx, 500*time.Millisecond)
	if err == nil {
		atOpen()
		err = sleepCtx(ctx, window)
	}
	atClose()
	return errors.Join(err, stop())
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stmtCount is what a stmtCounter counted.
type stmtCount struct {
	all      int64
	claims   int64 // oncebox polls: claims ("WITH due") and discoveries ("WITH RECURSIVE")
	prepared int64 // distinct statements with arguments, which pgx prepares once per connection
}

// stmtCounter is a pgx.QueryTracer counting the statements of the pool it
// is installed on (BEGIN and COMMIT included, pgx sends them as statements).
type stmtCounter struct {
	mu       sync.Mutex
	count    stmtCount
	withArgs map[string]bool
}

var _ pgx.QueryTracer = (*stmtCounter)(nil)

// TraceQueryStart implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count.all++
	if strings.HasPrefix(data.SQL, "WITH due") || strings.HasPrefix(data.SQL, "WITH RECURSIVE") {
		c.count.claims++
	}
	if len(data.Args) > 0 && !c.withArgs[data.SQL] {
		if c.withArgs == nil {
			c.withArgs = map[string]bool{}
		}
		c.withArgs[data.SQL] = true
		c.count.prepared++
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) snapshot() stmtCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// idleDB is the database of the idle scenario, with the oncebox tables and
// the forwarder's in its bench schema.
type idleDB struct {
	e       *env
	dialect *postgres.Dialect
}

// createIdleDatabase creates the idle database (dropping a leftover) and
// its tables.
func createIdleDatabase(ctx context.Context, e *env) (*idleDB, error) {
	db := &idleDB{e: e}
	db.drop()
	if _, err := e.pool.Exec(ctx, "CREATE DATABASE "+idleDatabase); err != nil {
		return nil, err
	}
	pool, err := newPool(ctx, e.dsn, onDatabase(idleDatabase))
	if err != nil {
		db.drop()
		return nil, err
	}
	if db.dialect, err = freshSchemaOn(ctx, pool); err == nil {
		err = initForwarderSchema(pgWM(pool))
	}
	pool.Close()
	if err != nil {
		db.drop()
		return nil, err
	}
	return db, nil
}

// drop removes the idle database, disconnecting whatever is left on it.
func (db *idleDB) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = db.e.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+idleDatabase+" WITH (FORCE)")
}

// idleCount is what one idle measurement counted.
type idleCount struct {
	stmts stmtCount
	xacts int64 // transactions PostgreSQL counted in the database meanwhile
}

// measure runs fn on a fresh traced pool of one connection to the idle
// database, without pgxpool's liveness pings, and returns what fn counted
// with the transactions the database counted from before the pool opened to
// after it closed. Errors are prefixed with what.
func (db *idleDB) measure(ctx context.Context, what string, fn idleRun) (_ idleCount, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, idleDeadline)
	defer cancel()
	before, err := db.xacts(ctx)
	if err != nil {
		return idleCount{}, err
	}
	tr := &stmtCounter{}
	pool, err := newPool(ctx, db.e.dsn, onDatabase(idleDatabase), withTracer(tr), func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	if err != nil {
		return idleCount{}, err
	}
	counts, err := fn(ctx, pool, tr)
	// Closing the pool ends its backends, which flush their statistics.
	pool.Close()
	if err != nil {
		return idleCount{}, err
	}
	after, err := db.xacts(ctx)
	if err != nil {
		return idleCount{}, err
	}
	return idleCount{stmts: counts, xacts: after - before}, nil
}

// xacts returns xact_commit + xact_rollback of the idle database once no
// backend is connected to it and the figure has held still for 300ms: a
// backend flushes its statistics when it exits, shortly after it leaves the
// count of backends. Each read is a new transaction on the bench pool, so it
// sees a new statistics snapshot.
func (db *idleDB) xacts(ctx context.Context) (int64, error) {
	const settle = 3
	deadline := time.Now().Add(15 * time.Second)
	var last int64 = -1
	stable := 0
	for time.Now().Before(deadline) {
		var backends, n int64
		err := db.e.pool.QueryRow(ctx, `SELECT numbackends, xact_commit + xact_rollback
  FROM pg_stat_database WHERE datname = $1`, idleDatabase).Scan(&backends, &n)
		if err != nil {
			return 0, fmt.Errorf("read pg_stat_database: %w", err)
		}
		if backends == 0 && n == last {
			stable++
			if stable == settle {
				return n, nil
			}
		} else {
			stable = 0
		}
		last = n
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return 0, errors.New("the transaction count of the idle database did not settle in 15s")
}
