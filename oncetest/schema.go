package oncetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// NewSchema creates a schema (PostgreSQL) or database (MySQL/MariaDB) with a
// fresh random name, "oncetest_" and 12 hex digits, on the server of db,
// migrates the oncebox tables into it and returns the dialect over them; the
// schema and everything in it are dropped when the test ends (t.Cleanup).
// Build the publisher, the inbox, the poison queue, the relay or Drain with
// that dialect, and each test has tables of its own.
//
// db is a pool, not a transaction: sql.BeginnerFromPgx(pool) or
// sql.BeginnerFromStdSQL(db), whose user may create schemas (databases).
// dialect is "postgres" or "mysql"; a MySQL DSN needs parseTime=true and
// loc=UTC, as for the MySQL dialect everywhere. Oracle creates a schema
// with a user, which a test account rarely may: give it a table prefix of
// its own instead (dialects.NewOracle with TablesConfig.Prefix, then
// migrate.Migrate). A failure ends the test with t.Fatalf naming the step.
func NewSchema(t testing.TB, db wsql.Beginner, dialect string) dialects.Dialect {
	t.Helper()
	if db == nil {
		t.Fatalf("oncetest: NewSchema: db is nil")
	}
	var create, drop string
	name := "oncetest_" + randomSuffix(t)
	switch dialect {
	case "postgres":
		create, drop = "CREATE SCHEMA "+name, "DROP SCHEMA "+name+" CASCADE"
	case "mysql":
		create, drop = "CREATE DATABASE "+name, "DROP DATABASE "+name
	default:
		t.Fatalf("oncetest: NewSchema: dialect %q: want postgres or mysql (for oracle, use a table prefix; see the doc)", dialect)
	}
	d, err := registry.New(dialect, oncebox.TablesConfig{Schema: name})
	if err != nil {
		t.Fatalf("oncetest: NewSchema: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.Fatalf("oncetest: NewSchema: %s: %v", create, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, drop); err != nil {
			t.Errorf("oncetest: NewSchema's clean-up: %s: %v", drop, err)
		}
	})
	if err := migrate.Migrate(ctx, db, d); err != nil {
		t.Fatalf("oncetest: NewSchema: migrate %s schema %s: %v", dialect, name, err)
	}
	return d
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("oncetest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
