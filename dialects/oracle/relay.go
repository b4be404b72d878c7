package oracle

import (
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// eventsFailedProbe tells, without locking, whether a FAILED row waits: an
// idle MoveToDLQ run stops there.
func (d *Dialect) eventsFailedProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.Events + " WHERE status = 'FAILED' AND ROWNUM = 1"}
}

// eventsMarkProcessed marks ids PROCESSED under the claim-token guard (a row
// recovered and claimed again has a new token, so a late finalize changes
// nothing). Without RETURNING, MarkProcessed reads back which ids it marked
// when fewer rows than ids were affected.
func (d *Dialect) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	var b binder
	if d.deleteConfirmed {
		return b.Query("DELETE FROM " + d.tables.Events +
			"\n WHERE " + idIn(&b, "id", ids, d) + " AND claim_token = " + b.P(d.EncodeID(token)) +
			" AND status = 'IN_PROCESS'")
	}
	return b.Query("UPDATE " + d.tables.Events + " SET status = 'PROCESSED', updated_at = " + b.T(now) +
		"\n WHERE " + idIn(&b, "id", ids, d) + " AND claim_token = " + b.P(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'")
}

// eventsLockClaimed locks which of ids are still IN_PROCESS under token:
// the rows a finalize of that claim may mark. MarkProcessed's slow path.
func (d *Dialect) eventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT id FROM " + d.tables.Events + "\n WHERE " + idIn(&b, "id", ids, d) +
		" AND claim_token = " + b.P(d.EncodeID(token)) + " AND status = 'IN_PROCESS' FOR UPDATE")
}

// eventsMarkFailed is Relay.MarkFailed's statement: one UPDATE whose new
// status, retry count, next retry time and error come from a CASE id WHEN …
// per column, under the claim-token guard. Each row binds nine values (its id
// five times: no placeholder is reused on Oracle).
//
// Beyond 7,281 rows (9 × rows + 3 > 65,535 binds) it is one MERGE over a
// UNION ALL of DUAL rows instead, five binds a row, which holds the largest
// batch (10,000): see eventsMarkFailedMerge.
func (d *Dialect) eventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	if 9*len(rows)+3 > oracleMaxBindParams {
		return d.eventsMarkFailedMerge(token, rows, now)
	}
	var b binder
	cases := func(col string, val func(dialects.FailedEvent) string) string {
		var s strings.Builder
		s.WriteString(col + " = CASE id")
		for _, r := range rows {
			s.WriteString(" WHEN " + b.P(d.EncodeID(r.ID)) + " THEN " + val(r))
		}
		s.WriteString(" END")
		return s.String()
	}
	sql := "UPDATE " + d.tables.Events + "\n   SET " +
		cases("status", func(r dialects.FailedEvent) string { return b.P(string(r.Status)) }) + ",\n       " +
		cases("retry_count", func(r dialects.FailedEvent) string { return b.P(r.RetryCount) }) + ",\n       " +
		cases("next_retry_at", func(r dialects.FailedEvent) string { return b.T(r.NextRetryAt) }) + ",\n       " +
		cases("last_error", func(r dialects.FailedEvent) string { return "TO_CLOB(" + b.P(sqlkit.ErrorText(r.Error)) + ")" }) + ",\n       " +
		"first_failed_at = COALESCE(first_failed_at, " + b.T(now) + "),\n       " +
		"claim_token = NULL, claimed_at = NULL, updated_at = " + b.T(now)
	ids := make([]oncebox.EventID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	sql += "\n WHERE " + idIn(&b, "id", ids, d) + " AND claim_token = " + b.P(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'"
	return b.Query(sql)
}

// eventsMarkFailedMerge is eventsMarkFailed for batches too large for the
// CASE form: MERGE INTO events USING (SELECT :id, :status, :retry_count,
// :next_retry_at, :last_error FROM DUAL UNION ALL …) ON (id) WHEN MATCHED
// THEN UPDATE … WHERE claim_token = :t AND status = 'IN_PROCESS'. The
// affected count is the rows updated, as the UPDATE's.
func (d *Dialect) eventsMarkFailedMerge(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	var b binder
	var s strings.Builder
	s.WriteString("MERGE INTO " + d.tables.Events + " e\nUSING (")
	for i, r := range rows {
		if i == 0 {
			s.WriteString("SELECT " + b.P(d.EncodeID(r.ID)) + " AS id, " + b.P(string(r.Status)) + " AS status, " +
				b.P(r.RetryCount) + " AS retry_count, " + b.T(r.NextRetryAt) + " AS next_retry_at, " +
				b.P(sqlkit.ErrorText(r.Error)) + " AS last_error FROM DUAL")
			continue
		}
		s.WriteString("\n       UNION ALL SELECT " + b.P(d.EncodeID(r.ID)) + ", " + b.P(string(r.Status)) + ", " +
			b.P(r.RetryCount) + ", " + b.T(r.NextRetryAt) + ", " + b.P(sqlkit.ErrorText(r.Error)) + " FROM DUAL")
	}
	s.WriteString(`) u
   ON (e.id = u.id)
 WHEN MATCHED THEN UPDATE SET e.status = u.status, e.retry_count = u.retry_count, e.next_retry_at = u.next_retry_at,
      e.last_error = TO_CLOB(u.last_error), e.first_failed_at = COALESCE(e.first_failed_at, ` + b.T(now) + `),
      e.claim_token = NULL, e.claimed_at = NULL, e.updated_at = ` + b.T(now) + `
      WHERE e.claim_token = ` + b.P(d.EncodeID(token)) + " AND e.status = 'IN_PROCESS'")
	return b.Query(s.String())
}

// eventsRelease is Relay.ReleaseClaims's statement: rows of a claim go back
// to PENDING without counting an attempt.
func (d *Dialect) eventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Events + " SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = " +
		b.T(now) + "\n WHERE " + idIn(&b, "id", ids, d) + " AND claim_token = " + b.P(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'")
}

// eventsRecover returns up to limit rows IN_PROCESS since before cutoff to
// PENDING and clears their token. No run method runs it: the relay recovers
// with eventsRecoverStale, this statement with the heartbeat bound added. It
// is kept, with its golden file, as the plain form of the recovery. ROWNUM
// without FOR UPDATE: the batch is bounded, and a row a finalizing claimer
// changes in between fails the outer predicate (Oracle re-checks it on the
// current row, restarting the statement if needed), so nothing finalized is
// recovered. No SKIP LOCKED fairness is needed here: one leased instance runs
// the job. Index: (status, claimed_at).
func (d *Dialect) eventsRecover(cutoff, now time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Events + " SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = " +
		b.T(now) + "\n WHERE status = 'IN_PROCESS' AND claimed_at < " + b.T(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.Events +
		"\n                  WHERE status = 'IN_PROCESS' AND claimed_at < " + b.T(cutoff) +
		" AND ROWNUM <= " + b.P(limit) + ")")
}

// eventsMoveLock is MoveToDLQ's cursor over the FAILED rows, oldest first,
// FOR UPDATE SKIP LOCKED, fetched up to the limit.
func (d *Dialect) eventsMoveLock() dialects.Query {
	return dialects.Query{SQL: "SELECT id FROM " + d.tables.Events +
		"\n WHERE status = 'FAILED'\n ORDER BY updated_at\n   FOR UPDATE SKIP LOCKED"}
}

// eventsMoveCopy copies the locked FAILED rows into the DLQ (status MOVED,
// source publisher, handler_name ' ' for "", the DLQ row's id is the event
// id).
func (d *Dialect) eventsMoveCopy(ids []oncebox.EventID, now time.Time) dialects.Query {
	var b binder
	return b.Query("INSERT INTO " + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', ' ', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ` + b.T(now) + ", " + b.T(now) +
		"\n  FROM " + d.tables.Events + "\n WHERE " + idIn(&b, "id", ids, d) + " AND status = 'FAILED'")
}

// eventsMoveDelete deletes the moved rows from the outbox.
func (d *Dialect) eventsMoveDelete(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Events + " WHERE " + idIn(&b, "id", ids, d) + " AND status = 'FAILED'")
}

// eventsDeleteProcessed is Relay.DeleteProcessed's statement: up to limit
// PROCESSED rows last updated before cutoff, through a ROWNUM-bounded ROWID
// subquery (no SKIP LOCKED fairness needed: one leased instance runs the
// clean-up; PROCESSED rows are not updated any more). Index: (status,
// updated_at).
func (d *Dialect) eventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Events + "\n WHERE status = 'PROCESSED' AND updated_at < " + b.T(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.Events +
		"\n                  WHERE status = 'PROCESSED' AND updated_at < " + b.T(cutoff) +
		" AND ROWNUM <= " + b.P(limit) + ")")
}

// leaseAcquire is AcquireLease's statement: one MERGE that inserts the
// lease or takes it over when the holder's has run out; one affected row
// means taken.
func (d *Dialect) leaseAcquire(l dialects.Lease) dialects.Query {
	var b binder
	return b.Query("MERGE INTO " + d.tables.Jobs + " j\nUSING (SELECT " + b.P(l.Name) + " AS name, " + b.P(l.Owner) +
		" AS locked_by, " + b.T(l.LockedAt) + " AS locked_at, " + b.T(l.Until) + ` AS lock_until FROM DUAL) s
   ON (j.name = s.name)
 WHEN MATCHED THEN UPDATE SET j.locked_by = s.locked_by, j.locked_at = s.locked_at, j.lock_until = s.lock_until
      WHERE j.lock_until <= s.locked_at
 WHEN NOT MATCHED THEN INSERT (name, locked_by, locked_at, lock_until)
      VALUES (s.name, s.locked_by, s.locked_at, s.lock_until)`)
}

// leaseRelease is Relay.ReleaseLease's statement: shorten the lease held by
// l.Owner since l.LockedAt to end at l.Until.
func (d *Dialect) leaseRelease(l dialects.Lease) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Jobs + " SET lock_until = " + b.T(l.Until) + " WHERE name = " + b.P(l.Name) +
		" AND locked_by = " + b.P(l.Owner) + " AND locked_at = " + b.T(l.LockedAt))
}

// eventsDueTypes is Relay.DueTypes's statement: a recursive WITH (11gR2+)
// that jumps from one event type to the next through the claim index (status,
// event_type, next_retry_at, id), MIN() taking the first entry after the
// previous type (an INDEX RANGE SCAN (MIN/MAX): one probe), n stopping it
// after limit types; then, per type, one probe for its first entry due at
// now. As on PostgreSQL, the due test stays out of the jump, where MIN()
// would pass every entry of a type waiting for a retry. Oracle reads an empty
// string as NULL, so no lower bound is written when after is "".
func (d *Dialect) eventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	var b binder
	from := ""
	if after != "" {
		from = " AND event_type > " + b.P(after)
	}
	return b.Query("WITH t (event_type, n) AS (" +
		"\n    SELECT MIN(event_type), 1 FROM " + d.tables.Events +
		"\n     WHERE status = 'PENDING'" + from +
		"\n  UNION ALL" +
		"\n    SELECT (SELECT MIN(e.event_type) FROM " + d.tables.Events + " e" +
		"\n             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1" +
		"\n      FROM t" +
		"\n     WHERE t.event_type IS NOT NULL AND t.n < " + b.P(limit) +
		"\n)\nSELECT t.event_type," +
		"\n       CASE WHEN EXISTS (SELECT 1 FROM " + d.tables.Events + " e" +
		"\n                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= " + b.T(now) + ")" +
		"\n            THEN 1 ELSE 0 END" +
		"\n  FROM t" +
		"\n WHERE t.event_type IS NOT NULL" +
		"\n ORDER BY t.event_type")
}
