package sqlkit

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// RelayStatements are a database's builders of the relay's statements that
// every database runs the same way: one statement, run alone (Relay.Single)
// or read by a plain query.
type RelayStatements struct {
	// DueTypes is the discovery's statement: two columns, the type and 1
	// when one of its PENDING rows is due at now, else 0.
	DueTypes func(now time.Time, after string, limit int) dialects.Query
	// MarkFailed writes each row's new state after a failed send.
	MarkFailed func(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query
	// Release returns a claim's rows to PENDING without an attempt.
	Release func(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query
	// DeleteProcessed deletes a batch of old PROCESSED rows.
	DeleteProcessed func(cutoff time.Time, limit int) dialects.Query
	// LeaseRelease shortens a job lease.
	LeaseRelease func(l dialects.Lease) dialects.Query
	// DLQDeleteResolved deletes a batch of old RESOLVED DLQ rows.
	DLQDeleteResolved func(cutoff time.Time, limit int) dialects.Query
	// InstanceHeartbeat inserts or moves an instance's heartbeat.
	InstanceHeartbeat func(instance string, at time.Time) dialects.Query
	// InstanceEnd deletes an instance's heartbeat.
	InstanceEnd func(instance string) dialects.Query
	// InstancesDeleteBefore deletes the heartbeats older than a cutoff.
	InstancesDeleteBefore func(cutoff time.Time) dialects.Query
}

// Relay runs the relay's statements built by S: it implements those
// methods of dialects.Relay for every database that embeds it. The other
// methods of the role (Claim, MarkProcessed, MoveToDLQ, …) are not one
// statement on every database, and each database implements them itself.
type Relay struct {
	// S builds the statements.
	S RelayStatements
	// Single runs one write statement on its own and returns the rows it
	// affected: in a transaction of its own at the relay's isolation level
	// (Tx.Exec on MySQL and Oracle), or as one autocommitted statement
	// (Autocommit, PostgreSQL, whose default isolation is READ COMMITTED).
	Single func(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error)
}

// Autocommit runs q on db as one statement, its own transaction at the
// server's isolation level, and returns the rows it affected: Relay.Single
// on PostgreSQL.
func Autocommit(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error) {
	return ExecAffected(ctx, db, q)
}

// DueTypes implements dialects.Relay: the discovery's statement, read as
// typed rows.
func (r Relay) DueTypes(ctx context.Context, db wsql.ContextExecutor, now time.Time, after string, limit int) ([]dialects.DueType, error) {
	q := r.S.DueTypes(now, after, limit)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.DueType
	for rows.Next() {
		var t dialects.DueType
		var due int64
		if err := rows.Scan(&t.Name, &due); err != nil {
			return nil, err
		}
		t.Due = due != 0
		out = append(out, t)
	}
	if err := RowsErr(rows); err != nil {
		return nil, err
	}
	return out, nil
}

// MarkFailed implements dialects.Relay.
func (r Relay) MarkFailed(ctx context.Context, db wsql.Beginner, token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) (int64, error) {
	return r.Single(ctx, db, r.S.MarkFailed(token, rows, now))
}

// ReleaseClaims implements dialects.Relay.
func (r Relay) ReleaseClaims(ctx context.Context, db wsql.Beginner, token oncebox.EventID, ids []oncebox.EventID, now time.Time) (int64, error) {
	return r.Single(ctx, db, r.S.Release(token, ids, now))
}

// DeleteProcessed implements dialects.Relay.
func (r Relay) DeleteProcessed(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error) {
	return r.Single(ctx, db, r.S.DeleteProcessed(cutoff, limit))
}

// ReleaseLease implements dialects.Relay.
func (r Relay) ReleaseLease(ctx context.Context, db wsql.Beginner, l dialects.Lease) error {
	_, err := r.Single(ctx, db, r.S.LeaseRelease(l))
	return err
}

// DeleteResolvedDLQ implements dialects.Relay.
func (r Relay) DeleteResolvedDLQ(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error) {
	return r.Single(ctx, db, r.S.DLQDeleteResolved(cutoff, limit))
}

// Heartbeat implements dialects.Relay.
func (r Relay) Heartbeat(ctx context.Context, db wsql.Beginner, instance string, at time.Time) error {
	_, err := r.Single(ctx, db, r.S.InstanceHeartbeat(instance, at))
	return err
}

// EndInstance implements dialects.Relay.
func (r Relay) EndInstance(ctx context.Context, db wsql.Beginner, instance string) error {
	_, err := r.Single(ctx, db, r.S.InstanceEnd(instance))
	return err
}

// DeleteInstancesBefore implements dialects.Relay.
func (r Relay) DeleteInstancesBefore(ctx context.Context, db wsql.Beginner, cutoff time.Time) (int64, error) {
	return r.Single(ctx, db, r.S.InstancesDeleteBefore(cutoff))
}

// QueryNextDue runs q, a read of at most one row of one time column (a
// dialect's NextDue statement), and returns the time in UTC, or false when
// there is no row. scan, when not nil, wraps the destination (a database
// that stores times as numbers); nil scans into a time.Time.
func QueryNextDue(ctx context.Context, db wsql.ContextExecutor, q dialects.Query, scan func(*time.Time) any) (time.Time, bool, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return time.Time{}, false, RowsErr(rows)
	}
	var at time.Time
	var dst any = &at
	if scan != nil {
		dst = scan(&at)
	}
	if err := rows.Scan(dst); err != nil {
		return time.Time{}, false, err
	}
	return at.UTC(), true, RowsErr(rows)
}
