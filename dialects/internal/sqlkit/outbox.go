package sqlkit

import (
	"context"
	"errors"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// OutboxStatements are a database's builders of the publisher's
// statements.
type OutboxStatements struct {
	// Insert builds the insert of rows, at most MaxRows of them, in one
	// statement.
	Insert func(rows []dialects.EventRow) dialects.Query
	// MaxRows is the most rows one Insert takes, bounded by the database's
	// limit on bind parameters.
	MaxRows int
	// ReleaseSavepoint tells whether the database has RELEASE SAVEPOINT
	// (Oracle has not: a savepoint lasts until its transaction ends).
	ReleaseSavepoint bool
}

// NotifyStatements are the builders of the wake-up on commit, for the
// databases that have one (PostgreSQL).
type NotifyStatements struct {
	// Notify builds the notification of payload on channel, delivered when
	// the transaction it runs in commits.
	Notify func(channel, payload string) dialects.Query
	// QueueUsage builds the reading of the notification queue's usage, one
	// row of one number from 0 to 1.
	QueueUsage func() dialects.Query
	// Listen builds the statement that makes a session listen on channel.
	Listen func(channel string) dialects.Query
}

// Outbox runs the publisher's statements built by S, and those of the
// wake-up on commit built by N (nil: the database cannot notify): it
// implements dialects.OutboxWriter for every database that embeds it.
type Outbox struct {
	S OutboxStatements
	N *NotifyStatements
}

// errNoNotify is the error of the wake-up's methods on a database that has
// no notification on commit.
var errNoNotify = fmt.Errorf("the database has no notification on commit: %w", errors.ErrUnsupported)

// InsertEvents implements dialects.OutboxWriter: one Insert per MaxRows
// rows, each checked against its affected count.
func (r Outbox) InsertEvents(ctx context.Context, db wsql.ContextExecutor, rows []dialects.EventRow) error {
	return Chunks(rows, r.S.MaxRows, func(chunk []dialects.EventRow) error {
		q := r.S.Insert(chunk)
		res, err := db.ExecContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n != int64(len(chunk)) {
			return &dialects.InsertCountError{Inserted: n, Want: int64(len(chunk))}
		}
		return nil
	})
}

// CanNotify implements dialects.OutboxWriter.
func (r Outbox) CanNotify() bool { return r.N != nil }

// Notify implements dialects.OutboxWriter.
func (r Outbox) Notify(ctx context.Context, db wsql.ContextExecutor, channel, payload string) error {
	if r.N == nil {
		return nil
	}
	q := r.N.Notify(channel, payload)
	_, err := db.ExecContext(ctx, q.SQL, q.Args...)
	return err
}

// NotifyQueueUsage implements dialects.OutboxWriter: a read-only function,
// no lock, no write.
func (r Outbox) NotifyQueueUsage(ctx context.Context, db wsql.ContextExecutor) (float64, error) {
	if r.N == nil {
		return 0, errNoNotify
	}
	q := r.N.QueueUsage()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }()
	var usage float64
	if !rows.Next() {
		if err := RowsErr(rows); err != nil {
			return 0, err
		}
		return 0, errors.New("pg_notification_queue_usage() returned no row")
	}
	if err := rows.Scan(&usage); err != nil {
		return 0, err
	}
	return usage, rows.Close()
}

// Listen implements dialects.OutboxWriter.
func (r Outbox) Listen(ctx context.Context, db wsql.ContextExecutor, channel string) error {
	if r.N == nil {
		return errNoNotify
	}
	q := r.N.Listen(channel)
	_, err := db.ExecContext(ctx, q.SQL, q.Args...)
	return err
}

// Savepoint implements dialects.OutboxWriter with the SQL standard's
// SAVEPOINT, ROLLBACK TO SAVEPOINT and, where the database has it, RELEASE
// SAVEPOINT: two statements more than fn's when fn succeeds.
func (r Outbox) Savepoint(ctx context.Context, tx wsql.ContextExecutor, name string, fn func() error) (fnErr, err error) {
	if !plainIdentifier(name) {
		return nil, fmt.Errorf("savepoint name %q is not a plain identifier", name)
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	if fnErr = fn(); fnErr != nil {
		_, err = tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name)
		return fnErr, err
	}
	if r.S.ReleaseSavepoint {
		if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// plainIdentifier reports whether s is a letter or underscore followed by
// letters, digits and underscores (ASCII), at most 30 bytes (Oracle's
// limit before 12.2): safe to write into SQL text unquoted on every
// database.
func plainIdentifier(s string) bool {
	if s == "" || len(s) > 30 {
		return false
	}
	for i, c := range []byte(s) {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
