package oracle

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// instanceHeartbeat is Relay.Heartbeat's statement: one MERGE that inserts
// the instance's row or moves its heartbeat. Locks: the instance's own row.
// Index: the primary key.
func (d *Dialect) instanceHeartbeat(instance string, at time.Time) dialects.Query {
	var b binder
	return b.Query("MERGE INTO " + d.tables.Instances + " i\nUSING (SELECT " + b.P(instance) + " AS instance_id, " +
		b.T(at) + ` AS heartbeat_at FROM DUAL) s
   ON (i.instance_id = s.instance_id)
 WHEN MATCHED THEN UPDATE SET i.heartbeat_at = s.heartbeat_at
 WHEN NOT MATCHED THEN INSERT (instance_id, heartbeat_at) VALUES (s.instance_id, s.heartbeat_at)`)
}

// instanceEnd is Relay.EndInstance's statement.
func (d *Dialect) instanceEnd(instance string) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Instances + " WHERE instance_id = " + b.P(instance))
}

// instancesDeleteBefore is Relay.DeleteInstancesBefore's statement. The table
// holds one row per instance (a handful), so it is read whole.
func (d *Dialect) instancesDeleteBefore(cutoff time.Time) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Instances + " WHERE heartbeat_at < " + b.T(cutoff))
}

// eventsInProcessProbe tells, without locking, whether any row is
// IN_PROCESS (an idle recovery run stops there; the scalar subquery is
// NULL when none is), and reads the database's clock in passing, for the
// relay's clock check: one row, always. A plain read, so ROWNUM is safe.
// Index: (status, claimed_at).
func (d *Dialect) eventsInProcessProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT " + sqlkit.OracleNowUTC + ", (SELECT 1 FROM " + d.tables.Events +
		" WHERE status = 'IN_PROCESS' AND ROWNUM = 1) FROM DUAL"}
}

// eventsRecoverStale is RecoverStale's update: eventsRecover's shape (a
// ROWNUM-bounded ROWID subquery, the predicate repeated outside so that a row
// a finalizing claimer changes in between fails it when Oracle re-checks the
// current row) with the heartbeat bound added. The (status, claimed_at) index
// bounds the scan to the claims older than the heartbeat timeout; each is
// checked against its instance's row by primary key. No placeholder is
// reused: each bound is bound once per use.
func (d *Dialect) eventsRecoverStale(p dialects.RecoverParams) dialects.Query {
	var b binder
	where := func(alias string) string {
		return alias + "status = 'IN_PROCESS' AND " + alias + "claimed_at < " + b.T(p.StaleBefore) +
			"\n   AND (" + alias + "claimed_at < " + b.T(p.ClaimedBefore) +
			"\n        OR (" + alias + "claimed_by IS NOT NULL" +
			"\n            AND NOT EXISTS (SELECT 1 FROM " + d.tables.Instances + " i" +
			"\n                             WHERE i.instance_id = " + alias + "claimed_by AND i.heartbeat_at >= " + b.T(p.StaleBefore) + ")))"
	}
	sql := "UPDATE " + d.tables.Events + " e SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.claimed_by = NULL," +
		" e.updated_at = " + b.T(p.Now) +
		"\n WHERE " + where("e.")
	sql += "\n   AND e.ROWID IN (SELECT s.ROWID FROM " + d.tables.Events + " s\n WHERE " + where("s.") +
		"\n   AND ROWNUM <= " + b.P(p.Limit) + ")"
	return b.Query(sql)
}

// RecoverStale implements dialects.Relay: eventsInProcessProbe, then, when a
// row is IN_PROCESS, eventsRecoverStale in its own transaction.
func (d *Dialect) RecoverStale(ctx context.Context, db wsql.Beginner, p dialects.RecoverParams) (int, bool, time.Time, error) {
	dbNow, found, err := sqlkit.ProbeWithClock(ctx, db, d.Name(), d.eventsInProcessProbe())
	if err != nil || !found {
		return 0, false, dbNow, err
	}
	n, err := oracleTx.Exec(ctx, db, d.eventsRecoverStale(p))
	return int(n), true, dbNow, err
}
