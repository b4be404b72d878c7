package postgres

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// MarkProcessed implements dialects.Relay with the one statement of
// eventsMarkProcessed.
func (d *Dialect) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.QueryIDs(ctx, db, d.eventsMarkProcessed(token, ids, now))
}

// MarkProcessedClaims implements ClaimsFinalizer with the one statement of
// eventsMarkProcessedClaims.
func (d *Dialect) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []dialects.ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.QueryIDs(ctx, db, d.eventsMarkProcessedClaims(claims, now))
}

// MoveToDLQ implements dialects.Relay with the one statement of eventsMoveToDLQ.
func (d *Dialect) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.eventsMoveToDLQ(now, limit))
	return int(n), err
}

// AcquireLease implements dialects.Relay with the one statement of leaseAcquire.
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseAcquire(l))
	return n == 1, err
}
