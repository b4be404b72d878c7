package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver: pure Go, no cgo

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/inprocess"
)

// demoDB is the database the demo runs on: the handle of the business
// statements (whose transactions the publisher joins), the handle oncebox's
// service is given, and how to name and bind on it.
type demoDB struct {
	name     string  // the database's name in the registry: sqlite, postgres, mysql
	db       *sql.DB // the business statements and their transactions
	beginner wsql.Beginner
	tables   oncebox.TablesConfig
	schema   string // "" on SQLite: one file, one namespace
	ph       func(n int) string
	where    string // what the first line says
	close    func()
}

// table is t qualified by the demo's schema.
func (d *demoDB) table(t string) string {
	if d.schema == "" {
		return t
	}
	return d.schema + "." + t
}

// openDatabase opens the demo's database: SQLite in a temporary file when
// rawURL is empty (nothing installed, nothing started), else the server of
// a postgres://… or mysql://… URL, in a schema of its own that is dropped
// first and at the end. Either way it creates the business tables.
func openDatabase(ctx context.Context, rawURL string) (*demoDB, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	var (
		d   *demoDB
		err error
	)
	switch {
	case rawURL == "":
		d, err = openSQLite()
	case scheme == "postgres" || scheme == "postgresql":
		d, err = openPostgres(ctx, rawURL)
	case scheme == "mysql" || scheme == "mariadb":
		d, err = openMySQL(ctx, rawURL)
	default:
		return nil, fmt.Errorf("DATABASE_URL: unknown scheme %q: use postgres://…, mysql://…, or leave it empty for SQLite in a temporary file", scheme)
	}
	if err != nil {
		return nil, err
	}
	db, ok := registry.Lookup(d.name)
	if !ok {
		d.close()
		return nil, fmt.Errorf("no dialect %q in the registry", d.name)
	}
	d.ph = db.Placeholder
	for _, stmt := range []string{
		"CREATE TABLE " + d.table("orders") + " (id VARCHAR(64) PRIMARY KEY, total INT NOT NULL)",
		"CREATE TABLE " + d.table("shipments") + " (event_id VARCHAR(64) NOT NULL, order_id VARCHAR(64) NOT NULL)",
	} {
		if _, err := d.db.ExecContext(ctx, stmt); err != nil {
			d.close()
			return nil, fmt.Errorf("create the demo's tables: %w", err)
		}
	}
	return d, nil
}

// sqliteDSN is the connection string oncebox wants on SQLite
// (docs/sqlite.md): every transaction begins IMMEDIATE (the write lock is
// taken at BEGIN, so two writers wait for each other instead of failing
// with SQLITE_BUSY at their first write), a busy timeout, WAL (readers do
// not block the writer), and times stored and read as INTEGER
// microseconds.
func sqliteDSN(file string) string {
	return "file:" + file + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_inttotime=1&_time_integer_format=unix_micro"
}

func openSQLite() (*demoDB, error) {
	dir, err := os.MkdirTemp("", "oncebox-demo-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "demo.db")
	// Through inprocess, a commit of events wakes the relay of this process
	// at once: SQLite has no LISTEN/NOTIFY.
	db, err := inprocess.OpenDB("sqlite", sqliteDSN(file))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &demoDB{name: "sqlite", db: db, beginner: wsql.BeginnerFromStdSQL(db),
		where: "SQLite " + file,
		close: func() { _ = db.Close(); _ = os.RemoveAll(dir) }}, nil
}

func openPostgres(ctx context.Context, rawURL string) (*demoDB, error) {
	pool, err := pgxpool.New(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at DATABASE_URL: %w (is it running? make services SERVICES=postgres; or leave DATABASE_URL empty for SQLite)", err)
	}
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	// The relay gets the pgx pool: it listens for the publisher's
	// notifications on one of its connections (wake-up on commit).
	return &demoDB{name: "postgres", db: db, beginner: wsql.BeginnerFromPgx(pool),
		tables: oncebox.TablesConfig{Schema: schema}, schema: schema, where: "PostgreSQL schema " + schema,
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = db.Close()
			pool.Close()
		}}, nil
}

// mysqlConfig reads mysql://user:password@host:port/database?… into
// go-sql-driver's configuration, with what the MySQL dialect needs
// (parseTime, UTC).
func mysqlConfig(rawURL string) (*mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("DATABASE_URL: not a URL (escape the special characters of the password)")
	}
	c := mysql.NewConfig()
	c.Net, c.Addr = "tcp", u.Host
	if u.Port() == "" {
		c.Addr = u.Host + ":3306"
	}
	if u.User != nil {
		c.User = u.User.Username()
		c.Passwd, _ = u.User.Password()
	}
	c.DBName = strings.TrimPrefix(u.Path, "/")
	c.ParseTime, c.Loc = true, time.UTC
	return c, nil
}

func openMySQL(ctx context.Context, rawURL string) (*demoDB, error) {
	c, err := mysqlConfig(rawURL)
	if err != nil {
		return nil, err
	}
	// Through inprocess, a commit of events wakes the relay of this process
	// at once: MySQL has no LISTEN/NOTIFY.
	db, err := inprocess.OpenDB("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("MySQL at DATABASE_URL: %w (is it running? make services SERVICES=mariadb)", err)
	}
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + schema, "CREATE DATABASE " + schema} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return &demoDB{name: "mysql", db: db, beginner: wsql.BeginnerFromStdSQL(db),
		tables: oncebox.TablesConfig{Schema: schema}, schema: schema, where: "MySQL database " + schema,
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+schema)
			_ = db.Close()
		}}, nil
}
