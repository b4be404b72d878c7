package main

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
)

// writesRounds is how many times the writes scenario runs each case; the
// figures are the medians.
const writesRounds = 5

// writesBatch is the claim's batch size in the writes scenario.
const writesBatch = 1000

// writesCase is one way of taking an event out of the outbox: step takes
// up to limit due events and finalizes them, returning how many it took;
// after, unless nil, runs once the backlog is drained and is counted in the
// case's time and WAL (the clean-up's delete of PROCESSED rows).
type writesCase struct {
	name     string
	baseline bool
	note     string
	step     func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error)
	after    func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect) error
}

// runWrites measures the writes each event costs on PostgreSQL (issue 28,
// item 2): today's claim + mark PROCESSED (+ the clean-up's delete), claim +
// DELETE on finalize, and one DELETE … FOR UPDATE SKIP LOCKED … RETURNING in
// a transaction held open during an in-memory send and committed at confirm.
// Each round drains a fresh backlog per case, in the same order, against the
// raw claim-and-mark loop of the relay scenario; the figures are medians of
// the rounds, in rows per second and in bytes of WAL per event (the
// difference of pg_current_wal_lsn() around the drain: the server's WAL, so
// other clients' writes count too; the median damps them).
func runWrites(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(100_000, 2_000)
	cases := []writesCase{
		{name: "raw SQL claim + mark PROCESSED (relay scenario's loop)", baseline: true,
			step: func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error) {
				return claimAndMark(ctx, pool, d, limit)
			},
			note: "two row versions per event; the clean-up's delete not counted"},
		{name: "(a) dialect Claim + MarkProcessed + clean-up DeleteProcessed",
			step: dialectClaimThen(func(ctx context.Context, db wsql.Beginner, d *postgres.Dialect, token oncebox.EventID, ids []oncebox.EventID) error {
				_, err := d.MarkProcessed(ctx, db, token, ids, time.Now().UTC())
				return err
			}),
			after: func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect) error {
				db := wsql.BeginnerFromPgx(pool)
				cutoff := time.Now().UTC().Add(time.Hour)
				for {
					k, err := d.DeleteProcessed(ctx, db, cutoff, writesBatch)
					if err != nil {
						return fmt.Errorf("delete processed: %w", err)
					}
					if k == 0 {
						return nil
					}
				}
			},
			note: "today: claim, mark, and the clean-up's delete (1,000 a statement, counted in time and WAL)"},
		{name: "(b) dialect Claim + DELETE by id and claim token",
			step: dialectClaimThen(func(ctx context.Context, db wsql.Beginner, d *postgres.Dialect, token oncebox.EventID, ids []oncebox.EventID) error {
				strs := make([]string, len(ids))
				for i, id := range ids {
					strs[i] = id.String()
				}
				_, err := db.ExecContext(ctx, "DELETE FROM "+d.Tables().Events+
					" WHERE id = ANY($1::uuid[]) AND claim_token = $2 AND status = 'IN_PROCESS'", strs, token.String())
				return err
			}),
			note: "delete on finalize: no PROCESSED history, nothing for the clean-up"},
		{name: "(c) one DELETE … FOR UPDATE SKIP LOCKED … RETURNING, transaction held during the send",
			step: deleteReturningInTx,
			note: "one write per event; a connection and an open transaction per batch in flight; the send is in memory"},
	}
	took := make([][]time.Duration, len(cases))
	wal := make([][]float64, len(cases))
	for round := 0; round < writesRounds; round++ {
		for i, c := range cases {
			fmt.Fprintf(stderr, "bench: writes: round %d: %s, %d events…\n", round+1, c.name, n)
			d, err := e.freshSchema(ctx)
			if err != nil {
				return nil, err
			}
			if err := insertBacklog(ctx, wsql.BeginnerFromPgx(e.pool), d, relayEventType, n); err != nil {
				return nil, err
			}
			if _, err := e.pool.Exec(ctx, "CHECKPOINT"); err != nil {
				return nil, fmt.Errorf("checkpoint: %w", err)
			}
			var before string
			if err := e.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&before); err != nil {
				return nil, err
			}
			start := time.Now()
			done := 0
			for {
				k, err := c.step(ctx, e.pool, d, writesBatch)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", c.name, err)
				}
				if k == 0 {
					break
				}
				done += k
			}
			if c.after != nil {
				if err := c.after(ctx, e.pool, d); err != nil {
					return nil, fmt.Errorf("%s: %w", c.name, err)
				}
			}
			elapsed := time.Since(start)
			var bytes float64
			if err := e.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", before).Scan(&bytes); err != nil {
				return nil, err
			}
			if done != n {
				return nil, fmt.Errorf("%s: took %d events of %d", c.name, done, n)
			}
			var left int
			if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+d.Tables().Events+" WHERE status <> 'PROCESSED'").Scan(&left); err != nil {
				return nil, err
			}
			if left != 0 {
				return nil, fmt.Errorf("%s: %d rows left not PROCESSED", c.name, left)
			}
			took[i] = append(took[i], elapsed)
			wal[i] = append(wal[i], bytes/float64(n))
			fmt.Fprintf(stderr, "bench: writes:   %.0f rows/s, %.0f bytes of WAL per event\n", float64(n)/elapsed.Seconds(), bytes/float64(n))
		}
	}
	rows := make([]row, len(cases))
	for i, c := range cases {
		rates := make([]float64, len(took[i]))
		for j, t := range took[i] {
			rates[j] = float64(n) / t.Seconds()
		}
		rows[i] = row{Case: c.name, Value: median(rates), Unit: "rows/s", Baseline: c.baseline,
			Note: fmt.Sprintf("%s; median of %d rounds of %d events, batch %d; rounds %s rows/s; WAL per event median %.0f bytes (rounds %s)",
				c.note, writesRounds, n, writesBatch, joinFloats(rates), median(wal[i]), joinFloats(wal[i]))}
	}
	return withRatios(rows), nil
}

// joinFloats formats v as "a, b, c" with no decimals.
func joinFloats(v []float64) string {
	s := ""
	for i, f := range v {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", f)
	}
	return s
}

// dialectClaimThen is a step through the dialect's Claim, then finalize of
// every id claimed, each in its own statement (autocommit), as the poller.
func dialectClaimThen(finalize func(ctx context.Context, db wsql.Beginner, d *postgres.Dialect, token oncebox.EventID, ids []oncebox.EventID) error) func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error) {
	return func(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error) {
		token, err := oncebox.NewEventID()
		if err != nil {
			return 0, err
		}
		db := wsql.BeginnerFromPgx(pool)
		evs, err := d.Claim(ctx, db, dialects.ClaimParams{EventType: relayEventType, Limit: limit, Token: token, Now: time.Now().UTC()})
		if err != nil || len(evs) == 0 {
			return 0, err
		}
		ids := make([]oncebox.EventID, len(evs))
		for i, ev := range evs {
			ids[i] = ev.ID
		}
		if err := finalize(ctx, db, d, token, ids); err != nil {
			return 0, fmt.Errorf("finalize: %w", err)
		}
		return len(evs), nil
	}
}

// deleteReturningInTx is case (c): one transaction per batch that deletes
// the due rows and returns them (the row locks FOR UPDATE SKIP LOCKED takes
// keep other claimers off them), hands them to an in-memory send, and
// commits at confirm. A relay that dies rolls back and the rows are due
// again; no IN_PROCESS, no claim token, no recovery.
func deleteReturningInTx(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error) {
	events := d.Tables().Events
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	rows, err := tx.Query(ctx, `DELETE FROM `+events+` WHERE id IN (
    SELECT id FROM `+events+`
     WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at <= $2
     ORDER BY next_retry_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED)
RETURNING id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at`,
		relayEventType, time.Now().UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete returning: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dialects.ClaimedEvent, error) {
		var ev dialects.ClaimedEvent
		err := r.Scan(ev.ScanTargets()...)
		return ev, err
	})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	// The send: in memory, a no-op over each event's bytes.
	var sent int
	for _, ev := range evs {
		sent += len(ev.Payload)
	}
	_ = sent
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return len(evs), nil
}
