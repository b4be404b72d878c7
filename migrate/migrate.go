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
				_ = d.UnlockMigrations(context.WithoutCancel(ctx), tx)
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

	if err := d.LockMigrations(ctx, tx); err != nil {
		return fmt.Errorf("oncebox: migrate: take the migration lock: %w", err)
	}
	locked = true
	if err := d.EnsureMigrationsTable(ctx, tx); err != nil {
		return fmt.Errorf("oncebox: migrate: create the schema or %s: %w", d.Tables().Migrations, err)
	}
	applied, err := appliedVersions(ctx, tx, d)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		if err := d.ApplyMigration(ctx, tx, m, time.Now().UTC()); err != nil {
			return fmt.Errorf("oncebox: migrate: %w", err)
		}
	}
	if err := d.UnlockMigrations(ctx, tx); err != nil {
		return fmt.Errorf("oncebox: migrate: release the migration lock: %w", err)
	}
	return nil
}

// ErrInTransaction is returned when Migrate is given a transaction.
var ErrInTransaction = errors.New("oncebox: migrate: given a transaction; migrations run in their own transaction on a pool (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL)")

// Applied returns the versions db has applied, for status reports.
func Applied(ctx context.Context, db sql.ContextExecutor, d dialects.Dialect) (map[int]bool, error) {
	return appliedVersions(ctx, db, d)
}

func appliedVersions(ctx context.Context, db sql.ContextExecutor, d dialects.Dialect) (map[int]bool, error) {
	versions, err := d.AppliedMigrations(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("oncebox: migrate: read %s: %w", d.Tables().Migrations, err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

func isTx(db any) bool {
	_, ok := db.(interface {
		Commit() error
		Rollback() error
	})
	return ok
}
