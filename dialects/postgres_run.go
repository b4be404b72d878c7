package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// PostgreSQL runs each operation as one statement outside any transaction:
// data-modifying CTEs and RETURNING make every operation atomic on its own.

// Claim implements Dialect with the one statement of eventsClaim; an
// ordered claim's rows in id order.
func (d *PostgreSQL) Claim(ctx context.Context, db wsql.Beginner, p ClaimParams) ([]ClaimedEvent, error) {
	events, err := queryClaimed(ctx, db, d.eventsClaim(p), 0)
	if p.ByKey {
		sortByID(events)
	}
	return events, err
}

// MarkProcessed implements Dialect with the one statement of
// eventsMarkProcessed.
func (d *PostgreSQL) MarkProcessed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) ([]oncebox.EventID, error) {
	return queryIDs(ctx, db, d.eventsMarkProcessed(token, ids, now))
}

// MarkProcessedClaims implements ClaimsFinalizer with the one statement of
// eventsMarkProcessedClaims.
func (d *PostgreSQL) MarkProcessedClaims(ctx context.Context, db wsql.Beginner, claims []ClaimIDs, now time.Time) ([]oncebox.EventID, error) {
	return queryIDs(ctx, db, d.eventsMarkProcessedClaims(claims, now))
}

// MoveToDLQ implements Dialect with the one statement of eventsMoveToDLQ.
func (d *PostgreSQL) MoveToDLQ(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := execAffected(ctx, db, d.eventsMoveToDLQ(now, limit))
	return int(n), err
}

// TransferDLQToOutbox implements Dialect with the one statement of
// dLQTransferToOutbox.
func (d *PostgreSQL) TransferDLQToOutbox(ctx context.Context, db wsql.Beginner, now time.Time, limit int) (int, error) {
	n, err := execAffected(ctx, db, d.dLQTransferToOutbox(now, limit))
	return int(n), err
}

// AcquireLease implements Dialect with the one statement of leaseAcquire.
func (d *PostgreSQL) AcquireLease(ctx context.Context, db wsql.ContextExecutor, l Lease) (bool, error) {
	n, err := execAffected(ctx, db, d.leaseAcquire(l))
	return n == 1, err
}

// InboxRecordMany implements Dialect with the one statement of
// inboxInsertMany: ON CONFLICT DO NOTHING RETURNING gives the new ids, and a
// concurrent insert of the same id makes the statement wait for the other
// transaction, then skip the id if it committed.
func (d *PostgreSQL) InboxRecordMany(ctx context.Context, tx wsql.ContextExecutor, consumer string, ids []string, now time.Time) ([]string, error) {
	return queryStrings(ctx, tx, d.inboxInsertMany(consumer, ids, now))
}

// Exec implements Dialect: the statement runs on its own (its own
// transaction at the server's isolation, READ COMMITTED by default on
// PostgreSQL).
func (d *PostgreSQL) Exec(ctx context.Context, db wsql.Beginner, q Query) (int64, error) {
	return execAffected(ctx, db, q)
}

// Backlog implements Dialect.
func (d *PostgreSQL) Backlog() Query {
	return Query{SQL: backlogSQL(d.tables, "NULL::timestamptz")}
}

// backlogSQL is the backlog count of every dialect; nullTime is a NULL of
// the timestamp type.
func backlogSQL(t Tables, nullTime string) string {
	return "SELECT 'outbox', event_type, status, count(*), min(created_at) FROM " + t.Events +
		" GROUP BY event_type, status" +
		" UNION ALL SELECT 'dlq', source, status, count(*), " + nullTime + " FROM " + t.DLQ +
		" GROUP BY source, status"
}
