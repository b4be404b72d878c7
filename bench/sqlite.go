package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// This file holds the SQLite scenarios: the relay, latency and idle
// scenarios of PostgreSQL (relay.go, latency.go, idle.go) on a SQLite file
// in a temporary directory, through modernc.org/sqlite (pure Go) and the
// DSN docs/sqlite.md asks for. Watermill's forwarder has no SQLite
// adapter in watermill-sql, and ThreeDotsLabs/watermill-sqlite (the
// official SQLite Pub/Sub) is not served by this machine's module proxy, so
// the Watermill anchor of these rows is the PostgreSQL scenarios' forwarder
// of the same run (run them together: -scenarios relay,latency,idle,sqlite-relay,sqlite-latency,sqlite-idle).

// sqliteBenchDSN is the DSN of file.
func sqliteBenchDSN(file string) string {
	return "file:" + file + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_inttotime=1&_time_integer_format=unix_micro"
}

// sqliteFile is a SQLite file in a directory of its own, removed by close.
type sqliteFile struct {
	dir, path string
}

func newSQLiteFile() (*sqliteFile, error) {
	dir, err := os.MkdirTemp("", "oncebox-bench-sqlite-")
	if err != nil {
		return nil, err
	}
	return &sqliteFile{dir: dir, path: filepath.Join(dir, "bench.db")}, nil
}

func (f *sqliteFile) close() { _ = os.RemoveAll(f.dir) }

// connector returns the driver's connector of the file.
func (f *sqliteFile) connector() (driver.Connector, error) {
	probe, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	_ = probe.Close()
	if dc, ok := d.(driver.DriverContext); ok {
		return dc.OpenConnector(sqliteBenchDSN(f.path))
	}
	return dsnConnector{d: d, dsn: sqliteBenchDSN(f.path)}, nil
}

type dsnConnector struct {
	d   driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

// pool opens a pool of conns connections on the file, each connector
// wrapped by wrap (in order) when given.
func (f *sqliteFile) pool(conns int, wrap ...func(driver.Connector) driver.Connector) (*sql.DB, error) {
	c, err := f.connector()
	if err != nil {
		return nil, err
	}
	for _, w := range wrap {
		c = w(c)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// freshSQLite drops oncebox's tables of the file (through db) and migrates
// them again.
func freshSQLite(ctx context.Context, db *sql.DB) (dialects.Dialect, error) {
	d, err := registry.New("sqlite", oncebox.TablesConfig{})
	if err != nil {
		return nil, err
	}
	t := d.Tables()
	for _, table := range []string{t.Events, t.DLQ, t.Inbox, t.Jobs, t.Instances, t.Migrations} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			return nil, fmt.Errorf("drop %s: %w", table, err)
		}
	}
	return d, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(db), d)
}

// runSQLiteRelay is the relay scenario on SQLite: the raw claim-and-mark
// loop (the dialect's Claim and MarkProcessed) and the oncebox poller, one
// and two instances (two pools' worth of claimers on one file: the write
// lock serializes them) and the defaults.
func runSQLiteRelay(ctx context.Context, e *env) ([]row, error) {
	f, err := newSQLiteFile()
	if err != nil {
		return nil, err
	}
	defer f.close()
	k := &sqlCounter{}
	db, err := f.pool(8, func(c driver.Connector) driver.Connector { return countingConnector{Connector: c, k: k} })
	if err != nil {
		return nil, err
	}
	defer db.Close()
	b := wsql.BeginnerFromStdSQL(db)
	r := &relayDB{db: b, claimAndMark: dialectClaimAndMark(b),
		fresh: func(ctx context.Context) (dialects.Dialect, error) { return freshSQLite(ctx, db) }}
	var start, stop sqlCount
	r.clock = func(starting bool) {
		if starting {
			start = k.snapshot()
		} else {
			stop = k.snapshot()
		}
	}
	r.watch = func(context.Context) func() watched {
		return func() watched {
			c := stop.minus(start)
			return watched{stmts: fmt.Sprintf("while the clock ran: %d statements, %d transactions", c.all(), c.transactions())}
		}
	}
	n := e.n(50_000, 2_000)
	cases := []relayCase{
		{name: "SQLite: raw claim-and-mark loop (dialect Claim + MarkProcessed), 1 worker, batch 1000", n: n, baseline: true,
			drain: drainRaw(1000), note: "one file in a temporary directory, WAL, modernc.org/sqlite (pure Go)"},
		{name: "SQLite: oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(1, tunedSettings)},
		{name: "SQLite: oncebox poller, 2 instances, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(2, tunedSettings),
			note: "one writer at a time: a second instance adds no write throughput"},
		{name: "SQLite: oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms)", n: n, drain: drainPollers(1, defaultSettings)},
	}
	return measureRelays(ctx, "sqlite-relay", r, cases)
}

// runSQLiteLatency is the latency scenario on SQLite: one event per
// business transaction at 300 events/s, commit to publish, with the
// in-process wake-up (the *sql.DB opened through package inprocess, the
// default when the publisher and the relay share a process), without it,
// and tuned for polling.
func runSQLiteLatency(ctx context.Context, e *env) ([]row, error) {
	f, err := newSQLiteFile()
	if err != nil {
		return nil, err
	}
	defer f.close()
	hub := inprocess.New()
	db, err := f.pool(8, hub.Connector)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	d, err := freshSQLite(ctx, db)
	if err != nil {
		return nil, err
	}
	n := latencyRate * e.n(10, 3)
	cases := []struct {
		name     string
		s        oncebox.EventSettings
		wake     bool
		baseline bool
	}{
		{"SQLite: oncebox poller, defaults (in-process wake-up on commit, batch 200, 250ms–1m, ×1.5)", defaultSettings, true, true},
		{"SQLite: oncebox poller, defaults without wake-up (polling only)", defaultSettings, false, false},
		{"SQLite: oncebox poller, tuned, polling only (batch 1000, 1ms–50ms, ×2)", tunedSettings, false, false},
	}
	var p99, p50 []row
	for _, c := range cases {
		fmt.Fprintf(stderr, "bench: sqlite-latency: %s, %d events…\n", c.name, n)
		lat, polls, err := measureSQLiteLatency(ctx, db, d, c.s, c.wake, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		note := fmt.Sprintf("%d events at %d/s", n, latencyRate)
		if k := polls.polls.Load(); k > 0 {
			note += fmt.Sprintf("; %d polls, %.0f events a poll on average", k, float64(polls.claimed.Load())/float64(k))
		}
		p99 = append(p99, row{Case: c.name + ": p99", Value: ms(percentile(lat, 0.99)), Unit: "ms", Baseline: c.baseline, Note: note})
		p50 = append(p50, row{Case: c.name + ": p50", Value: ms(percentile(lat, 0.50)), Unit: "ms", Baseline: c.baseline})
	}
	return append(withRatios(p99), withRatios(p50)...), nil
}

// measureSQLiteLatency is measureLatency on db.
func measureSQLiteLatency(ctx context.Context, db *sql.DB, d dialects.Dialect, s oncebox.EventSettings, wake bool, n int) ([]time.Duration, *pollHooks, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n/latencyRate)*time.Second+90*time.Second)
	defer cancel()
	run := watermill.NewUUID()
	rec := newLatencies(n, run)
	out := newSink(n, rec.record)
	polls := &pollHooks{}
	cfg := pollerConfig(d, 0, latencyEventType, s, polls)
	cfg.DisableWakeOnCommit = !wake
	stop, err := startPollers(ctx, wsql.BeginnerFromStdSQL(db), out, cfg)
	if err != nil {
		return nil, nil, err
	}
	period := time.Second / latencyRate
	begin := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < n && err == nil; i++ {
		timer.Reset(time.Until(begin.Add(time.Duration(i) * period)))
		select {
		case <-timer.C:
		case <-ctx.Done():
			err = fmt.Errorf("produced %d of %d events: %w", i, n, ctx.Err())
			continue
		}
		err = sqliteProduceOne(ctx, db, d, wake, run)
	}
	if err == nil {
		err = rec.unique.wait(ctx, "events published")
	}
	if err := errors.Join(err, stop(), rec.err()); err != nil {
		return nil, nil, err
	}
	lat := rec.sorted()
	if len(lat) != n {
		return nil, nil, fmt.Errorf("%d events produced, %d published", n, len(lat))
	}
	return lat, polls, nil
}

// sqliteProduceOne commits one business transaction writing one event.
func sqliteProduceOne(ctx context.Context, db *sql.DB, d dialects.Dialect, wake bool, run string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	pub, err := publisher.NewPublisher(wsql.TxFromStdSQL(tx), publisher.Config{Dialect: d, DisableWakeOnCommit: !wake}, watermill.NopLogger{})
	if err == nil {
		msg := message.NewMessage(watermill.NewUUID(), orderPayload)
		msg.Metadata.Set(latencyKey, time.Now().UTC().Format(time.RFC3339Nano))
		msg.Metadata.Set(latencyRunKey, run)
		err = pub.Publish(latencyEventType, msg)
	}
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// runSQLiteIdle is the idle scenario on SQLite: the oncebox poller with its
// defaults through one simulated hour on an empty table (idleHour), its
// statements counted by a counting database/sql driver. The pool is opened
// through package inprocess, as the demo's is: the wake-up costs no
// statement while nothing is published.
func runSQLiteIdle(ctx context.Context, _ *env) ([]row, error) {
	f, err := newSQLiteFile()
	if err != nil {
		return nil, err
	}
	defer f.close()
	k := &sqlCounter{}
	hub := inprocess.New()
	db, err := f.pool(8, func(c driver.Connector) driver.Connector { return countingConnector{Connector: c, k: k} }, hub.Connector)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	d, err := freshSQLite(ctx, db)
	if err != nil {
		return nil, err
	}
	start := k.snapshot()
	var end sqlCount
	if err := idleHour(ctx, wsql.BeginnerFromStdSQL(db), d, func() { end = k.snapshot() }); err != nil {
		return nil, err
	}
	c := end.minus(start)
	return []row{
		{Case: "SQLite: oncebox poller, defaults: all statements", Value: float64(c.all()), Unit: "statements/h", Baseline: true,
			Note: "goal ≤ 100; " + c.String()},
		{Case: "SQLite: oncebox poller, defaults: transactions", Value: float64(c.transactions()), Unit: "transactions/h", Baseline: true,
			Note: "a baseline of its own: the ratios of this scenario compare nothing"},
	}, nil
}
