package postgres

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// instanceHeartbeat is Relay.Heartbeat's statement: insert the instance's row
// or move its heartbeat. Locks: the instance's own row only; no other
// instance writes it (except the clean-up, once it is older than
// max-batch-processing-time). Index: the primary key.
func (d *Dialect) instanceHeartbeat(instance string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Instances + ` (instance_id, heartbeat_at) VALUES ($1, $2)
ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at`,
		Args: []any{instance, at},
	}
}

// instanceEnd is Relay.EndInstance's statement.
func (d *Dialect) instanceEnd(instance string) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE instance_id = $1", Args: []any{instance}}
}

// instancesDeleteBefore is Relay.DeleteInstancesBefore's statement. The table
// holds one row per instance (a handful), so it is read whole.
func (d *Dialect) instancesDeleteBefore(cutoff time.Time) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE heartbeat_at < $1", Args: []any{cutoff}}
}

// eventsRecoverStale is RecoverStale's statement: the recovery of
// eventsRecover with the heartbeat bound added, and, in the same statement,
// whether any row is IN_PROCESS and the database's clock (three columns: rows
// recovered, in process, clock_timestamp() for the relay's clock check). The
// EXISTS reads the statement's snapshot, so a row it recovered counts as in
// process: the caller then looks again soon, which it would anyway.
//
// Every row it recovers was claimed before StaleBefore (which is after
// ClaimedBefore), so the range scan of the partial index (claimed_at) WHERE
// status = 'IN_PROCESS' bounds the work to the claims older than the
// heartbeat timeout, normally none; each is checked against its instance's
// row by primary key. Locks: FOR UPDATE OF e SKIP LOCKED locks the outbox
// rows only, never the instances' rows, and passes over rows a finalizing
// claimer is updating right now (they are no longer stuck).
func (d *Dialect) eventsRecoverStale(p dialects.RecoverParams) dialects.Query {
	return dialects.Query{
		SQL: `WITH recovered AS (
    UPDATE ` + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, claimed_by = NULL, updated_at = $1
     WHERE id IN (SELECT e.id FROM ` + d.tables.Events + ` e
                   WHERE e.status = 'IN_PROCESS' AND e.claimed_at < $2
                     AND (e.claimed_at < $3
                          OR (e.claimed_by IS NOT NULL
                              AND NOT EXISTS (SELECT 1 FROM ` + d.tables.Instances + ` i
                                               WHERE i.instance_id = e.claimed_by AND i.heartbeat_at >= $2)))
                   LIMIT $4
                     FOR UPDATE OF e SKIP LOCKED)
    RETURNING 1
)
SELECT (SELECT count(*) FROM recovered),
       EXISTS (SELECT 1 FROM ` + d.tables.Events + ` WHERE status = 'IN_PROCESS'),
       ` + sqlkit.PostgresNow,
		Args: []any{p.Now, p.StaleBefore, p.ClaimedBefore, p.Limit},
	}
}

// RecoverStale implements dialects.Relay with the one statement of
// eventsRecoverStale.
func (d *Dialect) RecoverStale(ctx context.Context, db wsql.Beginner, p dialects.RecoverParams) (int, bool, time.Time, error) {
	q := d.eventsRecoverStale(p)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, false, time.Time{}, err
	}
	defer rows.Close()
	var n int64
	var inProcess bool
	var dbNow time.Time
	if rows.Next() {
		if err := rows.Scan(&n, &inProcess, &dbNow); err != nil {
			return 0, false, time.Time{}, fmt.Errorf("scan: %w", err)
		}
	}
	return int(n), inProcess, dbNow.UTC(), sqlkit.RowsErr(rows)
}
