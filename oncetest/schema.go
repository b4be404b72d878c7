package oncetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
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
// dialect names a database whose dialects.Database in package
// dialects/registry has TestSchema set ("postgres", "mysql"); a MySQL DSN
// needs parseTime=true and loc=UTC, as for the MySQL dialect everywhere.
// Oracle creates a schema with a user, which a test account rarely may:
// give it a table prefix of its own instead (oracle.New with
// TablesConfig.Prefix, then migrate.Migrate). A failure ends the test with
// t.Fatalf naming the step.
func NewSchema(t testing.TB, db wsql.Beginner, dialect string) dialects.Dialect {
	t.Helper()
	if db == nil {
		t.Fatalf("oncetest: NewSchema: db is nil")
	}
	database, ok := registry.Lookup(dialect)
	if !ok || !database.TestSchema {
		t.Fatalf("oncetest: NewSchema: dialect %q: %s", dialect, supported())
	}
	name := "oncetest_" + randomSuffix(t)
	d, err := database.New(oncebox.TablesConfig{Schema: name})
	if err != nil {
		t.Fatalf("oncetest: NewSchema: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := d.CreateTestSchema(ctx, db); err != nil {
		t.Fatalf("oncetest: NewSchema: create %s schema %s: %v", dialect, name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := d.DropTestSchema(ctx, db); err != nil {
			t.Errorf("oncetest: NewSchema's clean-up: drop %s schema %s: %v", dialect, name, err)
		}
	})
	if err := migrate.Migrate(ctx, db, d); err != nil {
		t.Fatalf("oncetest: NewSchema: migrate %s schema %s: %v", dialect, name, err)
	}
	return d
}

// supported says which databases NewSchema serves, and what to do on the
// others, from the registry: "want postgres or mysql (for oracle, use a
// table prefix; see the doc)".
func supported() string {
	var with, without []string
	for _, db := range registry.All() {
		if db.TestSchema {
			with = append(with, db.Name)
		} else {
			without = append(without, db.Name)
		}
	}
	s := "want " + orList(with)
	if len(without) > 0 {
		s += " (for " + orList(without) + ", use a table prefix; see the doc)"
	}
	return s
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("oncetest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}

// TablesOf returns the tables configuration d was built with (the schema
// NewSchema made, or a table prefix), for the code under test that takes
// one: a service's oncebox.Config.Tables (service.New over the test
// schema), a configuration file's tables, or the name of the schema in a
// statement of the test's own (TablesOf(d).Schema).
func TablesOf(d dialects.Dialect) oncebox.TablesConfig {
	events := d.Tables().Events
	var cfg oncebox.TablesConfig
	if i := strings.LastIndex(events, "."); i >= 0 {
		cfg.Schema, events = events[:i], events[i+1:]
	}
	cfg.Prefix = strings.TrimSuffix(events, "outbox_events")
	return cfg
}
