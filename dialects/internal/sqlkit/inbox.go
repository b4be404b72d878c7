package sqlkit

import (
	"context"
	"database/sql"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// InboxStatements are a database's builders of the inbox's and the poison
// queue's statements.
type InboxStatements struct {
	// Insert builds the insert of (consumer, id) unless present: one
	// affected row means new.
	Insert func(consumer, id string, now time.Time) dialects.Query
	// DeleteBefore builds the delete of up to limit ids processed before
	// cutoff.
	DeleteBefore func(cutoff time.Time, limit int) dialects.Query
	// PoisonUpsert builds the insert of a consumer-side DLQ row, or the
	// count of one more attempt on the row of the same message and handler.
	PoisonUpsert func(r dialects.DLQRow) dialects.Query
	// PoisonPayload builds the select of the payload (one binary column) of
	// the consumer-side row of eventID and handler; no row when there is
	// none.
	PoisonPayload func(eventID oncebox.EventID, handler string) dialects.Query
}

// Inbox runs the inbox's and the poison queue's statements built by S: it
// implements all of dialects.Inbox but InboxRecordMany, which each
// database writes itself, for every database that embeds it.
type Inbox struct {
	S InboxStatements
	// Single runs the clean-up's delete on its own, at the relay's
	// isolation: the database's Relay.Single.
	Single func(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error)
	// TxOptions begin the inbox's transactions (InboxTxOptions).
	TxOptions *sql.TxOptions
}

// InboxRecord implements dialects.Inbox with the one statement of Insert.
func (r Inbox) InboxRecord(ctx context.Context, tx wsql.ContextExecutor, consumer, id string, now time.Time) (bool, error) {
	n, err := ExecAffected(ctx, tx, r.S.Insert(consumer, id, now))
	return n == 1, err
}

// InboxDeleteBefore implements dialects.Inbox with the one statement of
// DeleteBefore, run by Single.
func (r Inbox) InboxDeleteBefore(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error) {
	return r.Single(ctx, db, r.S.DeleteBefore(cutoff, limit))
}

// InboxTxOptions implements dialects.Inbox.
func (r Inbox) InboxTxOptions() *sql.TxOptions { return r.TxOptions }

// PoisonUpsert implements dialects.Inbox with the one statement of
// PoisonUpsert; its affected count (1 or 2 on MySQL, 1 elsewhere) is not
// read.
func (r Inbox) PoisonUpsert(ctx context.Context, db wsql.ContextExecutor, row dialects.DLQRow) error {
	q := r.S.PoisonUpsert(row)
	_, err := db.ExecContext(ctx, q.SQL, q.Args...)
	return err
}

// PoisonPayload implements dialects.Inbox with the one statement of
// PoisonPayload.
func (r Inbox) PoisonPayload(ctx context.Context, db wsql.ContextExecutor, eventID oncebox.EventID, handler string) ([]byte, bool, error) {
	q := r.S.PoisonPayload(eventID, handler)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		return nil, false, RowsErr(rows)
	}
	var payload []byte
	if err := rows.Scan(&payload); err != nil {
		return nil, false, err
	}
	return payload, true, nil
}
