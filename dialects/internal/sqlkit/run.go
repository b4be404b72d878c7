package sqlkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// ReadCommitted are the options of the relay's transactions on MySQL and
// Oracle: READ COMMITTED, whatever the server's default, so that locking
// reads take record locks only, never gap locks, and see rows committed by
// other instances since the transaction began.
var ReadCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// deadlockAttempts is how many times Tx.Run runs a transaction that the
// database chose as a deadlock victim.
const deadlockAttempts = 3

// Tx is how a database runs its relay's transactions: the options that
// begin them (READ COMMITTED on MySQL whatever the server's default; none
// on Oracle, where it is the default and go-ora refuses an explicit level)
// and how it tells a deadlock victim.
type Tx struct {
	// Options begin the transaction.
	Options *sql.TxOptions
	// IsDeadlock reports whether err says the transaction was chosen as a
	// deadlock victim (MySQL error 1213, Oracle ORA-00060); nil for never.
	IsDeadlock func(err error) bool
}

// Run runs fn in a transaction and commits it, or rolls it back when fn
// fails. A transaction the database rolled back as a deadlock victim is run
// again, up to deadlockAttempts times in all: it changed nothing, and
// InnoDB's manual asks applications to retry. fn must start from scratch on
// every call.
func (c Tx) Run(ctx context.Context, db wsql.Beginner, fn func(tx wsql.Tx) error) (err error) {
	for attempt := 1; ; attempt++ {
		err = inTxOnce(ctx, db, c.Options, fn)
		if err == nil || attempt == deadlockAttempts || c.IsDeadlock == nil || !c.IsDeadlock(err) || ctx.Err() != nil {
			return err
		}
	}
}

// Exec runs q alone in a transaction of its own, as Run does, and returns
// the rows it affected: Relay.Single on MySQL and Oracle.
func (c Tx) Exec(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error) {
	var n int64
	err := c.Run(ctx, db, func(tx wsql.Tx) error {
		var err error
		n, err = ExecAffected(ctx, tx, q)
		return err
	})
	return n, err
}

func inTxOnce(ctx context.Context, db wsql.Beginner, opts *sql.TxOptions, fn func(tx wsql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// ExecAffected runs q and returns the rows it affected.
func ExecAffected(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) (int64, error) {
	res, err := db.ExecContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// RowsErr returns the iteration error of rows, for drivers whose rows report
// one.
func RowsErr(rows wsql.Rows) error {
	if e, ok := rows.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

// QueryClaimed runs q and scans up to limit rows of ClaimedEvent columns;
// limit 0 reads every row. Stopping at limit matters on Oracle, where a
// FOR UPDATE SKIP LOCKED cursor locks rows as they are fetched.
func QueryClaimed(ctx context.Context, db wsql.ContextExecutor, q dialects.Query, limit int) ([]dialects.ClaimedEvent, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.ClaimedEvent
	for (limit == 0 || len(out) < limit) && rows.Next() {
		var e dialects.ClaimedEvent
		if err := rows.Scan(e.ScanTargets()...); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, e)
	}
	return out, RowsErr(rows)
}

// QueryIDs runs q and scans one event id per row.
func QueryIDs(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) ([]oncebox.EventID, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []oncebox.EventID
	for rows.Next() {
		var id oncebox.EventID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, id)
	}
	return out, RowsErr(rows)
}

// QueryStrings runs q and scans one text column per row.
func QueryStrings(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) ([]string, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, s)
	}
	return out, RowsErr(rows)
}

// ids returns the event ids of claimed rows.
func ClaimedIDs(events []dialects.ClaimedEvent) []oncebox.EventID {
	out := make([]oncebox.EventID, len(events))
	for i := range events {
		out[i] = events[i].ID
	}
	return out
}

// chunks calls fn with consecutive slices of at most n elements of s.
func Chunks[T any](s []T, n int, fn func([]T) error) error {
	if n <= 0 {
		n = len(s)
	}
	for len(s) > 0 {
		k := min(n, len(s))
		if err := fn(s[:k]); err != nil {
			return err
		}
		s = s[k:]
	}
	return nil
}

// errStaleFinalize ends the fast path of markProcessed: some ids were not
// this claim's to mark any more.
var errStaleFinalize = errors.New("stale finalize")

// markProcessed is MarkProcessed for the dialects without RETURNING (MySQL,
// Oracle). The fast path is one UPDATE per chunk of ids under the claim
// token in one transaction: when it changes every row, every id was marked.
// When it changes fewer (a stale finalize: the recovery re-armed some rows,
// or they were finalized before), the transaction is rolled back and run
// again lock-first: lock the rows still IN_PROCESS under the token (lock),
// mark exactly those (update), and report them — never a row an earlier
// finalize marked.
func MarkProcessed(ctx context.Context, db wsql.Beginner, txc Tx, chunk int, ids []oncebox.EventID,
	update func([]oncebox.EventID) dialects.Query, lock func([]oncebox.EventID) dialects.Query) ([]oncebox.EventID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	err := txc.Run(ctx, db, func(tx wsql.Tx) error { return markAll(ctx, tx, chunk, ids, update) })
	if err == nil {
		return ids, nil
	}
	if !errors.Is(err, errStaleFinalize) {
		return nil, err
	}
	var out []oncebox.EventID
	err = txc.Run(ctx, db, func(tx wsql.Tx) error {
		out = out[:0]
		return Chunks(ids, chunk, func(part []oncebox.EventID) error {
			locked, err := QueryIDs(ctx, tx, lock(part))
			if err != nil || len(locked) == 0 {
				return err
			}
			if _, err := ExecAffected(ctx, tx, update(locked)); err != nil {
				return err
			}
			out = append(out, locked...)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// markAll is the fast path of markProcessed in tx: update marks ids, a
// chunk at a time, and every row must change, or it fails with
// errStaleFinalize.
func markAll(ctx context.Context, tx wsql.Tx, chunk int, ids []oncebox.EventID, update func([]oncebox.EventID) dialects.Query) error {
	return Chunks(ids, chunk, func(part []oncebox.EventID) error {
		n, err := ExecAffected(ctx, tx, update(part))
		if err == nil && int(n) != len(part) {
			err = errStaleFinalize
		}
		return err
	})
}

// MarkProcessedClaims is MarkProcessedClaims for the dialects without
// RETURNING (MySQL, Oracle): the fast path of markProcessed for every claim
// in one transaction, so one commit for several batches. When a claim's
// rows are not all marked (a stale finalize), that transaction is rolled
// back and each claim is marked by mark (its dialect's MarkProcessed, which
// finds exactly the rows still its own). Should mark fail for a claim, the
// claims before it stay marked but the error is returned alone: the relay
// then reports none of them as sent (Hooks.Sent), and marks nothing again.
func MarkProcessedClaims(ctx context.Context, db wsql.Beginner, txc Tx, chunk int, claims []dialects.ClaimIDs,
	update func(token oncebox.EventID, ids []oncebox.EventID) dialects.Query,
	mark func(token oncebox.EventID, ids []oncebox.EventID) ([]oncebox.EventID, error)) ([]oncebox.EventID, error) {
	var all []oncebox.EventID
	err := txc.Run(ctx, db, func(tx wsql.Tx) error {
		all = all[:0]
		for _, c := range claims {
			err := markAll(ctx, tx, chunk, c.IDs, func(ids []oncebox.EventID) dialects.Query { return update(c.Token, ids) })
			if err != nil {
				return err
			}
			all = append(all, c.IDs...)
		}
		return nil
	})
	if err == nil {
		return all, nil
	}
	if !errors.Is(err, errStaleFinalize) {
		return nil, err
	}
	var out []oncebox.EventID
	for _, c := range claims {
		marked, err := mark(c.Token, c.IDs)
		if err != nil {
			return nil, err
		}
		out = append(out, marked...)
	}
	return out, nil
}

// exists runs q, a plain read, and reports whether it returned a row: the
// probe that spares an idle job or poll its locking transaction.
func Exists(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) (bool, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := rows.Next()
	return found, RowsErr(rows)
}
