package postgres

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// Claim implements Dialect with the one statement of eventsClaim; an
// ordered claim's rows in id order.
func (d *Dialect) Claim(ctx context.Context, db wsql.Beginner, p dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	events, err := sqlkit.QueryClaimed(ctx, db, d.eventsClaim(p), 0)
	if p.ByKey {
		sqlkit.SortByID(events)
	}
	return events, err
}

// MarkProcessed implements Dialect with the one statement of
// eventsMarkProcessed.
func (d *Dialect) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.QueryIDs(ctx, db, d.eventsMarkProcessed(token, ids, now))
}

// MarkProcessedClaims implements ClaimsFinalizer with the one statement of
// eventsMarkProcessedClaims.
func (d *Dialect) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []dialects.ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	return sqlkit.QueryIDs(ctx, db, d.eventsMarkProcessedClaims(claims, now))
}

// MoveToDLQ implements Dialect with the one statement of eventsMoveToDLQ.
func (d *Dialect) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.eventsMoveToDLQ(now, limit))
	return int(n), err
}

// TransferDLQToOutbox implements Dialect with the one statement of
// dLQTransferToOutbox.
func (d *Dialect) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.dLQTransferToOutbox(now, limit))
	return int(n), err
}

// AcquireLease implements Dialect with the one statement of leaseAcquire.
func (d *Dialect) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error) {
	n, err := sqlkit.ExecAffected(ctx, db, d.leaseAcquire(l))
	return n == 1, err
}

// InboxRecordMany implements Dialect with the one statement of
// inboxInsertMany: ON CONFLICT DO NOTHING RETURNING gives the new ids, and a
// concurrent insert of the same id makes the statement wait for the other
// transaction, then skip the id if it committed.
func (d *Dialect) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	return sqlkit.QueryStrings(ctx, tx, d.inboxInsertMany(consumer, ids, now))
}

// Exec implements Dialect: the statement runs on its own (its own
// transaction at the server's isolation, READ COMMITTED by default on
// PostgreSQL).
func (d *Dialect) Exec(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error) {
	return sqlkit.ExecAffected(ctx, db, q)
}

// Backlog implements Dialect.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "NULL::timestamptz")}
}
