package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// Heartbeats and the recovery of a dead instance's claims (migration 3).

// InstanceHeartbeat implements Dialect: one MERGE that inserts the
// instance's row or moves its heartbeat. Locks: the instance's own row.
// Index: the primary key.
func (d *Oracle) InstanceHeartbeat(instance string, at time.Time) Query {
	var b binder
	return b.query("MERGE INTO " + d.tables.Instances + " i\nUSING (SELECT " + b.p(instance) + " AS instance_id, " +
		b.t(at) + ` AS heartbeat_at FROM DUAL) s
   ON (i.instance_id = s.instance_id)
 WHEN MATCHED THEN UPDATE SET i.heartbeat_at = s.heartbeat_at
 WHEN NOT MATCHED THEN INSERT (instance_id, heartbeat_at) VALUES (s.instance_id, s.heartbeat_at)`)
}

// InstanceEnd implements Dialect.
func (d *Oracle) InstanceEnd(instance string) Query {
	var b binder
	return b.query("DELETE FROM " + d.tables.Instances + " WHERE instance_id = " + b.p(instance))
}

// InstancesDeleteBefore implements Dialect. The table holds one row per
// instance (a handful), so it is read whole.
func (d *Oracle) InstancesDeleteBefore(cutoff time.Time) Query {
	var b binder
	return b.query("DELETE FROM " + d.tables.Instances + " WHERE heartbeat_at < " + b.t(cutoff))
}

// eventsInProcessProbe tells, without locking, whether any row is
// IN_PROCESS (an idle recovery run stops there; the scalar subquery is
// NULL when none is), and reads the database's clock in passing, for the
// relay's clock check: one row, always. A plain read, so ROWNUM is safe.
// Index: (status, claimed_at).
func (d *Oracle) eventsInProcessProbe() Query {
	return Query{SQL: "SELECT " + oracleNowUTC + ", (SELECT 1 FROM " + d.tables.Events +
		" WHERE status = 'IN_PROCESS' AND ROWNUM = 1) FROM DUAL"}
}

// EventsRecoverStale implements Dialect: EventsRecover's shape (a
// ROWNUM-bounded ROWID subquery, the predicate repeated outside so that a
// row a finalizing claimer changes in between fails it when Oracle
// re-checks the current row) with the heartbeat bound added. The
// (status, claimed_at) index bounds the scan to the claims older than the
// heartbeat timeout; each is checked against its instance's row by primary
// key. No placeholder is reused: each bound is bound once per use.
func (d *Oracle) EventsRecoverStale(p RecoverParams) Query {
	var b binder
	where := func(alias string) string {
		return alias + "status = 'IN_PROCESS' AND " + alias + "claimed_at < " + b.t(p.StaleBefore) +
			"\n   AND (" + alias + "claimed_at < " + b.t(p.ClaimedBefore) +
			"\n        OR (" + alias + "claimed_by IS NOT NULL" +
			"\n            AND NOT EXISTS (SELECT 1 FROM " + d.tables.Instances + " i" +
			"\n                             WHERE i.instance_id = " + alias + "claimed_by AND i.heartbeat_at >= " + b.t(p.StaleBefore) + ")))"
	}
	sql := "UPDATE " + d.tables.Events + " e SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.claimed_by = NULL," +
		" e.updated_at = " + b.t(p.Now) +
		"\n WHERE " + where("e.")
	sql += "\n   AND e.ROWID IN (SELECT s.ROWID FROM " + d.tables.Events + " s\n WHERE " + where("s.") +
		"\n   AND ROWNUM <= " + b.p(p.Limit) + ")"
	return b.query(sql)
}

// RecoverStale implements Dialect: eventsInProcessProbe, then, when a row
// is IN_PROCESS, EventsRecoverStale in its own transaction.
func (d *Oracle) RecoverStale(ctx context.Context, db wsql.Beginner, p RecoverParams) (int, bool, time.Time, error) {
	dbNow, found, err := probeWithClock(ctx, db, d.Name(), d.eventsInProcessProbe())
	if err != nil || !found {
		return 0, false, dbNow, err
	}
	n, err := d.Exec(ctx, db, d.EventsRecoverStale(p))
	return int(n), true, dbNow, err
}
