// Package migrate creates and upgrades the oncebox tables.
//
// Run [Migrate] at start-up, or from the command line, before the publisher,
// the poller or the inbox touch the tables. It is idempotent and safe when
// several instances start at once. It is never run implicitly: nothing in
// oncebox creates tables behind your back, and never inside your transaction.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// Migrate applies every migration of d that db has not applied yet, in one
// transaction under the dialect's migration lock. db is a pool: wrap a pgx
// pool with sql.BeginnerFromPgx or a *sql.DB with sql.BeginnerFromStdSQL. A
// transaction is refused with oncebox.ErrNoTransaction's opposite error:
// migrations must not commit inside a caller's transaction.
//
// Instances that start at once queue on the lock; the first applies the
// migrations and the others find them applied and do nothing.
func Migrate(ctx context.Context, db sql.Beginner, d dialects.Dialect) (err error) {
	if db == nil {
		return fmt.Errorf("%w: migrate: db is nil", oncebox.ErrInvalidInput)
	}
	if d == nil {
		return fmt.Errorf("%w: migrate: dialect is nil", oncebox.ErrInvalidInput)
	}
	if isTx(db) {
		return ErrInTransaction
	}
	migrations, err := d.Migrations()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("oncebox: migrate: begin: %w", err)
	}
	locked := false
	defer func() {
		if err != nil {
			if locked {
				// A session-level lock (MySQL's GET_LOCK, Oracle's DBMS_LOCK)
				// outlives the rollback: release it, or the pooled connection
				// keeps it and other instances wait for it in vain.
				for _, q := range d.MigrationUnlock() {
					_ = exec(context.WithoutCancel(ctx), tx, q)
				}
			}
			if rbErr := tx.Rollback(); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("oncebox: migrate: rollback: %w", rbErr))
			}
			return
		}
		if err = tx.Commit(); err != nil {
			err = fmt.Errorf("oncebox: migrate: commit: %w", err)
		}
	}()

	for _, q := range d.MigrationLock() {
		if err := exec(ctx, tx, q); err != nil {
			return fmt.Errorf("oncebox: migrate: take the migration lock: %w", err)
		}
	}
	locked = true
	for _, q := range bootstrap(d) {
		if err := exec(ctx, tx, q); err != nil {
			return fmt.Errorf("oncebox: migrate: create the schema or %s: %w", d.Tables().Migrations, err)
		}
	}
	applied, err := appliedVersions(ctx, tx, d)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		for i, stmt := range m.Statements {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("oncebox: migrate: %s statement %d: %w", m.Name, i+1, err)
			}
		}
		if err := exec(ctx, tx, record(d, m, time.Now().UTC())); err != nil {
			return fmt.Errorf("oncebox: migrate: record %s: %w", m.Name, err)
		}
	}
	for _, q := range d.MigrationUnlock() {
		if err := exec(ctx, tx, q); err != nil {
			return fmt.Errorf("oncebox: migrate: release the migration lock: %w", err)
		}
	}
	return nil
}

// bootstrap returns the statements that create d's schema (when it names
// one) and its migrations table, each only when missing.
func bootstrap(d dialects.Dialect) []dialects.Query {
	return append(d.SchemaCreate(), d.MigrationsTableCreate())
}

// record returns the statement that records m as applied at at.
func record(d dialects.Dialect, m dialects.Migration, at time.Time) dialects.Query {
	return d.MigrationsInsert(m.Version, m.Name, at)
}

// ErrInTransaction is returned when Migrate is given a transaction.
var ErrInTransaction = errors.New("oncebox: migrate: given a transaction; migrations run in their own transaction on a pool (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL)")

// Applied returns the versions db has applied, for status reports.
func Applied(ctx context.Context, db sql.ContextExecutor, d dialects.Dialect) (map[int]bool, error) {
	return appliedVersions(ctx, db, d)
}

func appliedVersions(ctx context.Context, db sql.ContextExecutor, d dialects.Dialect) (map[int]bool, error) {
	q := d.MigrationsSelect()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("oncebox: migrate: read %s: %w", d.Tables().Migrations, err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("oncebox: migrate: read %s: %w", d.Tables().Migrations, err)
		}
		applied[v] = true
	}
	if e, ok := rows.(interface{ Err() error }); ok && e.Err() != nil {
		return nil, fmt.Errorf("oncebox: migrate: read %s: %w", d.Tables().Migrations, e.Err())
	}
	return applied, nil
}

func exec(ctx context.Context, db sql.ContextExecutor, q dialects.Query) error {
	_, err := db.ExecContext(ctx, q.SQL, q.Args...)
	return err
}

func isTx(db any) bool {
	_, ok := db.(interface {
		Commit() error
		Rollback() error
	})
	return ok
}
