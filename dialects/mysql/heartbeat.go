package mysql

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// instanceHeartbeat is Relay.Heartbeat's statement: insert the instance's row
// or move its heartbeat. VALUES() rather than MySQL 8.0.19's row alias, which
// MariaDB does not have. Locks: the instance's own row. Index: the primary
// key.
func (d *Dialect) instanceHeartbeat(instance string, at time.Time) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Instances + ` (instance_id, heartbeat_at) VALUES (?, ?)
ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)`,
		Args: []any{instance, sqlkit.MicroUTC(at)},
	}
}

// instanceEnd is Relay.EndInstance's statement.
func (d *Dialect) instanceEnd(instance string) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE instance_id = ?", Args: []any{instance}}
}

// instancesDeleteBefore is Relay.DeleteInstancesBefore's statement. The table
// holds one row per instance (a handful), so it is read whole.
func (d *Dialect) instancesDeleteBefore(cutoff time.Time) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.Instances + " WHERE heartbeat_at < ?", Args: []any{sqlkit.MicroUTC(cutoff)}}
}

// eventsInProcessProbe tells, without locking, whether any row is
// IN_PROCESS (an idle recovery run stops there), and reads the database's
// clock in passing, for the relay's clock check: one row, always. Index:
// (status, claimed_at), covering; EXISTS stops at the first row.
func (d *Dialect) eventsInProcessProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT " + sqlkit.MysqlNowUTC + ", EXISTS (SELECT 1 FROM " + d.tables.Events + " WHERE status = 'IN_PROCESS')"}
}

// eventsRecoverStale is RecoverStale's update: eventsRecover's derived table
// (LIMIT and SKIP LOCKED, which MySQL refuses in an IN subquery and on an
// UPDATE) with the heartbeat bound added. Every row it recovers was claimed
// before StaleBefore, so the (status, claimed_at) index bounds the scan to
// the claims older than the heartbeat timeout; each is checked against its
// instance's row by primary key. Locks: FOR UPDATE SKIP LOCKED locks the
// outbox rows it selects; the NOT EXISTS subquery is a plain consistent read
// (a locking clause does not reach into a nested subquery), so the recovery
// never waits on a heartbeat being written.
func (d *Dialect) eventsRecoverStale(p dialects.RecoverParams) dialects.Query {
	stale := sqlkit.MicroUTC(p.StaleBefore)
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` AS e
  JOIN (SELECT s.id FROM ` + d.tables.Events + ` s
         WHERE s.status = 'IN_PROCESS' AND s.claimed_at < ?
           AND (s.claimed_at < ?
                OR (s.claimed_by IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM ` + d.tables.Instances + ` i
                                     WHERE i.instance_id = s.claimed_by AND i.heartbeat_at >= ?)))
         ORDER BY s.claimed_at, s.id
         LIMIT ?
           FOR UPDATE SKIP LOCKED) AS stuck ON e.id = stuck.id
   SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.claimed_by = NULL, e.updated_at = ?
 WHERE e.status = 'IN_PROCESS'`,
		Args: []any{stale, sqlkit.MicroUTC(p.ClaimedBefore), stale, p.Limit, sqlkit.MicroUTC(p.Now)},
	}
}

// RecoverStale implements dialects.Relay: eventsInProcessProbe, then, when a
// row is IN_PROCESS, eventsRecoverStale in its own READ COMMITTED
// transaction.
func (d *Dialect) RecoverStale(ctx context.Context, db wsql.Beginner, p dialects.RecoverParams) (int, bool, time.Time, error) {
	dbNow, found, err := sqlkit.ProbeWithClock(ctx, db, d.Name(), d.eventsInProcessProbe())
	if err != nil || !found {
		return 0, false, dbNow, err
	}
	n, err := relayTx.Exec(ctx, db, d.eventsRecoverStale(p))
	return int(n), true, dbNow, err
}
