package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// This file holds what the dialects share to run the operations whose number
// of statements differs between databases (Dialect.Claim and the other
// methods taking a database handle). The statements themselves are built by
// each dialect's pure methods, which the golden files test.

// readCommitted are the options of the relay's transactions on MySQL and
// Oracle: READ COMMITTED, whatever the server's default, so that locking
// reads take record locks only, never gap locks, and see rows committed by
// other instances since the transaction began.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// deadlockAttempts is how many times inTx runs a transaction that the
// database chose as a deadlock victim.
const deadlockAttempts = 3

// inTx runs fn in a transaction begun with opts and commits it, or rolls it
// back when fn fails. A transaction the database rolled back as a deadlock
// victim (MySQL error 1213, Oracle ORA-00060) is run again, up to
// deadlockAttempts times in all: it changed nothing, and InnoDB's manual
// asks applications to retry. fn must start from scratch on every call.
func inTx(ctx context.Context, db wsql.Beginner, opts *sql.TxOptions, fn func(tx wsql.Tx) error) (err error) {
	for attempt := 1; ; attempt++ {
		err = inTxOnce(ctx, db, opts, fn)
		if err == nil || attempt == deadlockAttempts || !isDeadlock(err) || ctx.Err() != nil {
			return err
		}
	}
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

// isDeadlock reports whether err says the transaction was chosen as a
// deadlock victim: MySQL/MariaDB error 1213, Oracle ORA-00060.
func isDeadlock(err error) bool {
	if number, ok := mysqlErrorNumber(err); ok {
		return number == 1213
	}
	return strings.Contains(err.Error(), "ORA-00060")
}

// execAffected runs q and returns the rows it affected.
func execAffected(ctx context.Context, db wsql.ContextExecutor, q Query) (int64, error) {
	res, err := db.ExecContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// rowsErr returns the iteration error of rows, for drivers whose rows report
// one.
func rowsErr(rows wsql.Rows) error {
	if e, ok := rows.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

// queryClaimed runs q and scans up to limit rows of ClaimedEvent columns;
// limit 0 reads every row. Stopping at limit matters on Oracle, where a
// FOR UPDATE SKIP LOCKED cursor locks rows as they are fetched.
func queryClaimed(ctx context.Context, db wsql.ContextExecutor, q Query, limit int) ([]ClaimedEvent, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ClaimedEvent
	for (limit == 0 || len(out) < limit) && rows.Next() {
		var e ClaimedEvent
		if err := rows.Scan(e.ScanTargets()...); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, e)
	}
	return out, rowsErr(rows)
}

// queryIDs runs q and scans one event id per row.
func queryIDs(ctx context.Context, db wsql.ContextExecutor, q Query) ([]oncebox.EventID, error) {
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
	return out, rowsErr(rows)
}

// queryStrings runs q and scans one text column per row.
func queryStrings(ctx context.Context, db wsql.ContextExecutor, q Query) ([]string, error) {
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
	return out, rowsErr(rows)
}

// ids returns the event ids of claimed rows.
func claimedIDs(events []ClaimedEvent) []oncebox.EventID {
	out := make([]oncebox.EventID, len(events))
	for i := range events {
		out[i] = events[i].ID
	}
	return out
}

// chunks calls fn with consecutive slices of at most n elements of s.
func chunks[T any](s []T, n int, fn func([]T) error) error {
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
func markProcessed(ctx context.Context, db wsql.Beginner, opts *sql.TxOptions, chunk int, ids []oncebox.EventID,
	update func([]oncebox.EventID) Query, lock func([]oncebox.EventID) Query) ([]oncebox.EventID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	err := inTx(ctx, db, opts, func(tx wsql.Tx) error { return markAll(ctx, tx, chunk, ids, update) })
	if err == nil {
		return ids, nil
	}
	if !errors.Is(err, errStaleFinalize) {
		return nil, err
	}
	var out []oncebox.EventID
	err = inTx(ctx, db, opts, func(tx wsql.Tx) error {
		out = out[:0]
		return chunks(ids, chunk, func(part []oncebox.EventID) error {
			locked, err := queryIDs(ctx, tx, lock(part))
			if err != nil || len(locked) == 0 {
				return err
			}
			if _, err := execAffected(ctx, tx, update(locked)); err != nil {
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
func markAll(ctx context.Context, tx wsql.Tx, chunk int, ids []oncebox.EventID, update func([]oncebox.EventID) Query) error {
	return chunks(ids, chunk, func(part []oncebox.EventID) error {
		n, err := execAffected(ctx, tx, update(part))
		if err == nil && int(n) != len(part) {
			err = errStaleFinalize
		}
		return err
	})
}

// markProcessedClaims is MarkProcessedClaims for the dialects without
// RETURNING (MySQL, Oracle): the fast path of markProcessed for every claim
// in one transaction, so one commit for several batches. When a claim's
// rows are not all marked (a stale finalize), that transaction is rolled
// back and each claim is marked by mark (its dialect's MarkProcessed, which
// finds exactly the rows still its own). Should mark fail for a claim, the
// claims before it stay marked but the error is returned alone: the relay
// then reports none of them as sent (Hooks.Sent), and marks nothing again.
func markProcessedClaims(ctx context.Context, db wsql.Beginner, opts *sql.TxOptions, chunk int, claims []ClaimIDs,
	update func(token oncebox.EventID, ids []oncebox.EventID) Query,
	mark func(token oncebox.EventID, ids []oncebox.EventID) ([]oncebox.EventID, error)) ([]oncebox.EventID, error) {
	var all []oncebox.EventID
	err := inTx(ctx, db, opts, func(tx wsql.Tx) error {
		all = all[:0]
		for _, c := range claims {
			err := markAll(ctx, tx, chunk, c.IDs, func(ids []oncebox.EventID) Query { return update(c.Token, ids) })
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
func exists(ctx context.Context, db wsql.ContextExecutor, q Query) (bool, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := rows.Next()
	return found, rowsErr(rows)
}
