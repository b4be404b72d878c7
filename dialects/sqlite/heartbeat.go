package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// instanceHeartbeat is Relay.Heartbeat's statement: insert the instance's
// row or move its heartbeat. Index: the primary key.
func (d *Dialect) instanceHeartbeat(instance string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Instances + ` (instance_id, heartbeat_at) VALUES (?1, ?2)
ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
		Args: []any{instance, us(at)},
	}
}

// instanceEnd is Relay.EndInstance's statement.
func (d *Dialect) instanceEnd(instance string) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE instance_id = ?1", Args: []any{instance}}
}

// instancesDeleteBefore is Relay.DeleteInstancesBefore's statement. The
// table holds one row per instance (a handful), so it is read whole.
func (d *Dialect) instancesDeleteBefore(cutoff time.Time) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE heartbeat_at < ?1", Args: []any{us(cutoff)}}
}

// eventsInProcessProbe is the first statement of RecoverStale, a plain
// read: the database's clock, and 1 when a row is IN_PROCESS (NULL when
// none). An idle recovery stops here, without the write lock. Index: the
// partial index (claimed_at) WHERE status = 'IN_PROCESS'.
func (d *Dialect) eventsInProcessProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT " + nowMicros + ", (SELECT 1 FROM " + d.tables.Events + " WHERE status = 'IN_PROCESS' LIMIT 1)"}
}

// eventsRecoverStale is the second statement of RecoverStale: up to
// Limit rows IN_PROCESS since before StaleBefore whose claim is older
// than ClaimedBefore, or whose instance's heartbeat is older than
// StaleBefore (or gone), go back to PENDING without counting an attempt;
// their claim token is cleared so that the stuck claimer's late finalize
// matches nothing. One UPDATE: under the write lock, so a finalize that
// committed first has left its rows PROCESSED, and one that comes after
// finds a new token. Index: (claimed_at) WHERE status = 'IN_PROCESS',
// then the instances' primary key.
func (d *Dialect) eventsRecoverStale(p dialects.RecoverParams) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, claimed_by = NULL, updated_at = ?1
 WHERE id IN (SELECT e.id FROM ` + d.tables.Events + ` e
               WHERE e.status = 'IN_PROCESS' AND e.claimed_at < ?2
                 AND (e.claimed_at < ?3
                      OR (e.claimed_by IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM ` + d.tables.Instances + ` i
                                           WHERE i.instance_id = e.claimed_by AND i.heartbeat_at >= ?2)))
               LIMIT ?4)`,
		Args: []any{us(p.Now), us(p.StaleBefore), us(p.ClaimedBefore), p.Limit},
	}
}

// RecoverStale implements dialects.Relay: eventsInProcessProbe, then,
// when a row is IN_PROCESS, eventsRecoverStale on its own. inProcess is
// the probe's answer: a row the update recovered counts as in process, so
// the caller looks again soon, which it would anyway.
func (d *Dialect) RecoverStale(ctx context.Context, db wsql.Beginner, p dialects.RecoverParams) (int, bool, time.Time, error) {
	q := d.eventsInProcessProbe()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, false, time.Time{}, err
	}
	var dbNow time.Time
	var hit sql.NullInt64
	if rows.Next() {
		err = rows.Scan(microTime{&dbNow}, &hit)
	}
	if err == nil {
		err = sqlkit.RowsErr(rows)
	}
	_ = rows.Close()
	if err != nil {
		return 0, false, time.Time{}, fmt.Errorf("scan: %w", err)
	}
	if !hit.Valid {
		return 0, false, dbNow, nil
	}
	n, err := sqlkit.ExecAffected(ctx, db, d.eventsRecoverStale(p))
	if err != nil {
		return 0, true, dbNow, err
	}
	return int(n), true, dbNow, nil
}
