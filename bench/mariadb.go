package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// This file holds the MariaDB scenarios' database: MariaDB through
// database/sql and go-sql-driver/mysql, with the MySQL dialect and
// watermill-sql's MySQL adapters. The relay and idle cases themselves are
// the PostgreSQL scenarios' (relay.go, relays.go, idle.go).

// sqlTarget is a database reached through database/sql.
type sqlTarget struct {
	// name is how the database is called in rows and errors.
	name string
	// connector connects to the database of the DSN (not the bench schema).
	connector func() (driver.Connector, error)
	// dialect is the dialect's name for dialects.New.
	dialect string
	// createSchema and dropSchema create and drop the bench schema (on
	// MariaDB a database) with everything in it.
	createSchema, dropSchema []string
	// wm is watermill-sql's adapters for this database over db.
	wm func(db wsql.Beginner) wmDB
	// isolationStatement: the driver sends a transaction's isolation level
	// as a statement of its own before START TRANSACTION.
	isolationStatement bool
	// serverCounters: the server keeps MariaDB's status counters.
	serverCounters bool
}

// mariadbTarget is the MariaDB of dsn, e.g.
// root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC.
func mariadbTarget(dsn string) sqlTarget {
	return sqlTarget{
		name: "MariaDB",
		connector: func() (driver.Connector, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return nil, fmt.Errorf("parse MariaDB DSN: %w", err)
			}
			return mysql.NewConnector(cfg)
		},
		dialect:            "mysql",
		createSchema:       []string{"DROP DATABASE IF EXISTS " + benchSchema, "CREATE DATABASE " + benchSchema},
		dropSchema:         []string{"DROP DATABASE IF EXISTS " + benchSchema},
		wm:                 mysqlWM,
		isolationStatement: true,
		serverCounters:     true,
	}
}

// mysqlWM is watermill-sql's MySQL adapters over db, with the tables in the
// bench database.
func mysqlWM(db wsql.Beginner) wmDB {
	return wmDB{
		db: db,
		schema: func(batch int) wsql.SchemaAdapter {
			return wsql.DefaultMySQLSchema{SubscribeBatchSize: batch,
				GenerateMessagesTableName: func(topic string) string { return "`" + benchSchema + "`.`watermill_" + topic + "`" }}
		},
		offsets: wsql.DefaultMySQLOffsetsAdapter{GenerateMessagesOffsetsTableName: func(topic string) string {
			return "`" + benchSchema + "`.`watermill_offsets_" + topic + "`"
		}},
	}
}

// sqlEnv is a sqlTarget connected: an admin pool on the DSN's database that
// creates and drops the bench schema.
type sqlEnv struct {
	t     sqlTarget
	admin *sql.DB
}

// connect opens the admin pool; close drops the bench schema and closes it.
func (t sqlTarget) connect(ctx context.Context) (*sqlEnv, error) {
	admin, err := t.pool(ctx, 2, nil)
	if err != nil {
		return nil, err
	}
	return &sqlEnv{t: t, admin: admin}, nil
}

// pool opens a pool of at most conns connections, all kept open while idle,
// its connector wrapped by wrap unless wrap is nil.
func (t sqlTarget) pool(ctx context.Context, conns int, wrap func(driver.Connector) driver.Connector) (*sql.DB, error) {
	c, err := t.connector()
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		c = wrap(c)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	return db, nil
}

func (s *sqlEnv) close() {
	s.dropSchema()
	s.admin.Close()
}

// dropSchema drops the bench schema and everything in it.
func (s *sqlEnv) dropSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range s.t.dropSchema {
		_, _ = s.admin.ExecContext(ctx, q)
	}
}

// fresh drops and re-creates the bench schema, migrates it through db and
// returns the dialect.
func (s *sqlEnv) fresh(ctx context.Context, db *sql.DB) (dialects.Dialect, error) {
	for _, q := range s.t.createSchema {
		if _, err := s.admin.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	d, err := registry.New(s.t.dialect, oncebox.TablesConfig{Schema: benchSchema})
	if err != nil {
		return nil, err
	}
	return d, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(db), d)
}

// relayDB is the relay cases' database on db: the raw loop runs the
// dialect's Claim and MarkProcessed. k counts db's statements: each case's
// note says how many it sent while its clock ran. With server counters, own
// holds the connection ids of db, and each case watches for other clients.
func (s *sqlEnv) relayDB(db *sql.DB, k *sqlCounter, own *connIDs) *relayDB {
	b := wsql.BeginnerFromStdSQL(db)
	r := &relayDB{db: b, wm: s.t.wm(b), claimAndMark: dialectClaimAndMark(b),
		fresh: func(ctx context.Context) (dialects.Dialect, error) { return s.fresh(ctx, db) }}
	var mu sync.Mutex
	var start, stop sqlCount
	r.clock = func(starting bool) {
		mu.Lock()
		defer mu.Unlock()
		if starting {
			start = k.snapshot()
		} else {
			stop = k.snapshot()
		}
	}
	r.watch = func(ctx context.Context) func() watched {
		var others func() (string, bool)
		if s.t.serverCounters {
			others = watchOthers(ctx, s.admin, own)
		}
		return func() watched {
			mu.Lock()
			c := stop.minus(start)
			mu.Unlock()
			w := watched{stmts: fmt.Sprintf("while the clock ran: %d statements, %d transactions (%s)",
				c.all(), c.transactions(), c)}
			if others != nil {
				w.others, w.noisy = others()
			}
			return w
		}
	}
	return r
}

// runMariaDBRelay is the relay scenario on MariaDB.
func runMariaDBRelay(ctx context.Context, e *env) ([]row, error) {
	return runSQLRelay(ctx, e, mariadbTarget(e.mariadbDSN))
}

// runSQLRelay measures on t what runRelay measures on PostgreSQL, with the
// same code, on a backlog of 50,000 events: the raw loop (here the
// dialect's Claim and MarkProcessed, see dialectClaimAndMark; batch 1,000
// as on PostgreSQL, and 100), the poller tuned (one and two instances; the
// defaults' pace is by design, measured on PostgreSQL) and Watermill's
// forwarder with its defaults and tuned, over watermill-sql's adapters for
// t. Each case's note gives the statements it sent, counted client-side.
func runSQLRelay(ctx context.Context, e *env, t sqlTarget) ([]row, error) {
	s, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	// 8 connections, as the PostgreSQL pool, counting statements, their
	// server-side connection ids known.
	own := &connIDs{}
	k := &sqlCounter{isolationStatement: t.isolationStatement}
	db, err := t.pool(ctx, 8, func(c driver.Connector) driver.Connector {
		if t.serverCounters {
			c = idConnector{Connector: c, ids: own}
		}
		return countingConnector{Connector: c, k: k}
	})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// Half the PostgreSQL backlog: MariaDB drains it several times slower
	// (each claim and each mark is a transaction of its own, committed with
	// a log flush), and the scenario should stay within about two minutes.
	n := e.n(50_000, 2_000)
	const (
		caseRaw = iota
		caseRaw100
		casePoller1
		casePoller2
		caseForwarderDefaults
		caseForwarderTuned
	)
	cases := []relayCase{
		caseRaw: {name: "raw claim-and-mark loop (dialect Claim + MarkProcessed), 1 worker, batch 1000", n: n, baseline: true,
			drain: drainRaw(1000),
			note:  "the limit of any relay: claim 1,000, mark PROCESSED, repeat; the batch of the tuned poller and of the PostgreSQL raw loop"},
		caseRaw100: {name: "raw claim-and-mark loop (dialect Claim + MarkProcessed), 1 worker, batch 100", n: n,
			drain: drainRaw(100)},
		casePoller1: {name: "oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(1, tunedSettings)},
		casePoller2: {name: "oncebox poller, 2 instances, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(2, tunedSettings)},
		caseForwarderDefaults: {name: "watermill forwarder, defaults", n: n, drain: drainForwarder(forwarderDefaults),
			note: "watermill-sql's MySQL adapters, defaults: 100 rows a SERIALIZABLE transaction, 1s poll when empty; messages go through the router one at a time"},
		caseForwarderTuned: {name: "watermill forwarder, tuned (poll 10ms, batch 1000)", n: n, drain: drainForwarder(forwarderTuned)},
	}
	rows, err := measureRelays(ctx, "mariadb-relay", s.relayDB(db, k, own), cases)
	if err != nil {
		return nil, err
	}
	rows[casePoller1].Note += "; " + relayGoals(rows[casePoller1], rows[caseForwarderTuned], rows[caseForwarderDefaults]) +
		" (the goals of PostgreSQL, applied as they are)"
	return rows, nil
}

// serverCount is a set of MariaDB status counters, by name.
type serverCount map[string]int64

// statusCounters are the counters the idle scenario reads.
var statusCounters = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin",
	"Com_commit", "Com_rollback", "Com_set_option", "Com_stmt_prepare", "Com_stmt_execute", "Com_stmt_close"}

func (c serverCount) minus(o serverCount) serverCount {
	out := serverCount{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

// sessionStatus reads the status counters of conn's own session and its
// connection id, in one statement.
func sessionStatus(ctx context.Context, conn *sql.Conn) (id int64, c serverCount, err error) {
	q := "SELECT CONNECTION_ID(), VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME IN ("
	for i, n := range statusCounters {
		if i > 0 {
			q += ","
		}
		q += "'" + n + "'"
	}
	rows, err := conn.QueryContext(ctx, q+")")
	if err != nil {
		return 0, nil, fmt.Errorf("session status: %w", err)
	}
	defer rows.Close()
	c = serverCount{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&id, &name, &v); err != nil {
			return 0, nil, err
		}
		c[canonicalCounter(name)] = v
	}
	return id, c, rows.Err()
}

// globalStatus reads the server-wide status counters: SHOW GLOBAL STATUS,
// which every client of the server adds to.
func globalStatus(ctx context.Context, db *sql.DB) (serverCount, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, fmt.Errorf("global status: %w", err)
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, n := range statusCounters {
		want[n] = true
	}
	c := serverCount{}
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		if name = canonicalCounter(name); want[name] {
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				return nil, fmt.Errorf("global status %s = %q: %w", name, v, err)
			}
			c[name] = n
		}
	}
	return c, rows.Err()
}

// canonicalCounter spells a counter name as statusCounters does (the
// information_schema tables write them in capitals).
func canonicalCounter(name string) string {
	for _, n := range statusCounters {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return name
}

// connIDs is the set of server connection ids of a pool's connections. It
// is safe for concurrent use.
type connIDs struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (c *connIDs) add(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[int64]bool{}
	}
	c.ids[id] = true
}

func (c *connIDs) has(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// idConnector records the connection id of each connection it makes, so
// that the watch of other clients can tell them from the bench's own.
type idConnector struct {
	driver.Connector
	ids *connIDs
}

// Connect implements driver.Connector.
func (c idConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id, err := connectionID(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.ids.add(id)
	return conn, nil
}

// connectionID runs SELECT CONNECTION_ID() on a new connection.
func connectionID(ctx context.Context, conn driver.Conn) (int64, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return 0, fmt.Errorf("connection id: %T runs no queries", conn)
	}
	rows, err := q.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, fmt.Errorf("connection id: %w", err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return 0, fmt.Errorf("connection id: %w", err)
	}
	switch v := dest[0].(type) {
	case int64:
		return v, nil
	case uint64:
		return int64(v), nil
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	}
	return 0, fmt.Errorf("connection id: unexpected %T", dest[0])
}

// Watching other clients of the server: the relay's figures depend on the
// server's load, and the tests of other work run on the same MariaDB.
const (
	watchEvery = 250 * time.Millisecond
	quietFor   = 4                // samples without another client's statement
	quietWait  = 10 * time.Second // at most, before a case
)

// othersActive counts the statements of other clients running on the
// server: threads of PROCESSLIST not sleeping, neither the reading
// connection nor one of own.
func othersActive(ctx context.Context, admin *sql.DB, own *connIDs) (int, error) {
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST"+
		" WHERE COMMAND NOT IN ('Sleep', 'Daemon') AND ID <> CONNECTION_ID()")
	if err != nil {
		return 0, fmt.Errorf("processlist: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		if !own.has(id) {
			n++
		}
	}
	return n, rows.Err()
}

// watchOthers waits up to quietWait for quietFor samples in a row without
// another client's statement, then samples every watchEvery until stop,
// which says how busy the server was with other clients, and calls that
// noisy when the wait ran out or a quarter of the samples or more saw
// another client's statement.
func watchOthers(ctx context.Context, admin *sql.DB, own *connIDs) (stop func() (note string, noisy bool)) {
	start := time.Now()
	for quiet := 0; quiet < quietFor && time.Since(start) < quietWait; {
		n, err := othersActive(ctx, admin, own)
		if err != nil {
			return func() (string, bool) { return err.Error(), false }
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if sleepCtx(ctx, watchEvery) != nil {
			break
		}
	}
	waited := time.Since(start)
	var (
		mu            sync.Mutex
		samples, busy int
	)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(wctx, watchEvery) == nil {
			n, err := othersActive(wctx, admin, own)
			if err != nil {
				return
			}
			mu.Lock()
			samples++
			if n > 0 {
				busy++
			}
			mu.Unlock()
		}
	}()
	return func() (string, bool) {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		s := fmt.Sprintf("other clients' statements running on the server in %d of %d samples", busy, samples)
		noisy := busy > 0 && busy*4 >= samples
		if waited >= quietWait {
			noisy = true
			s += fmt.Sprintf(" (busy for %s before the case, which then ran anyway)", quietWait)
		} else if waited > time.Duration(quietFor+1)*watchEvery {
			s += fmt.Sprintf(" (%.0fs waited for a quiet server first)", waited.Seconds())
		}
		return s, noisy
	}
}
