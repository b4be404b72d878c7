package dialects

import (
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// oracleClaimColumns is the select list of the claim cursor, in the order of
// ClaimedEvent.ScanTargets.
const oracleClaimColumns = "id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at"

// eventsClaimLock is the claim's cursor: every due PENDING row of the type
// in (next_retry_at, id) order, FOR UPDATE SKIP LOCKED. With SKIP LOCKED Oracle
// locks rows as they are fetched, so Claim fetches Limit rows and closes the
// cursor; no FETCH FIRST (ORA-02014 with FOR UPDATE) and no ROWNUM (it cuts
// the rows before the locked ones are skipped, so concurrent claimers would
// all get the same first rows, minus those locked: mostly nothing). Index:
// (status, event_type, next_retry_at, id) (migration 2) gives the rows in
// order.
func (d *Oracle) eventsClaimLock(p ClaimParams) Query {
	var b binder
	return b.query("SELECT " + oracleClaimColumns + "\n  FROM " + d.tables.Events +
		"\n WHERE status = 'PENDING' AND event_type = " + b.p(p.EventType) +
		" AND next_retry_at <= " + b.t(p.Now) +
		"\n ORDER BY next_retry_at, id\n   FOR UPDATE SKIP LOCKED")
}

// eventsClaimCandidates is the first statement of an ordered claim
// (p.ByKey): a plain read, without locks, of the candidates of
// orderedCandidates (id, partition_key, next_retry_at) in (next_retry_at,
// id) order. A plain read sees the committed state whatever the locks, so
// a row another claimer holds still stops its key; ROWNUM is safe outside
// FOR UPDATE. One statement, one snapshot. It doubles as the idle probe.
// Indexes: (status, event_type, next_retry_at, id) for the window and the
// busy keys, (event_type, partition_key, status, id) (migration 4) for the
// stop probes.
func (d *Oracle) eventsClaimCandidates(p ClaimParams) Query {
	var b binder
	ctes, cand := orderedCandidates(d.tables, &b, p, oracleFirstRows, false, "", "")
	return b.query(candidatesRead(p, ctes, cand, windowCut(d.tables, &b, p, oracleFirstRows)))
}

// eventsClaimWalk is the third statement of an ordered claim, run only
// when eventsClaimCandidates reported its window cut and found fewer
// candidates than p.Limit: the walk of the type's keys (orderedWalk), a
// recursive WITH jumping from key to key through (event_type,
// partition_key, status, id) with MIN() (an INDEX RANGE SCAN (MIN/MAX)
// per step), then one MIN() probe per key for its first PENDING row. A
// plain read, so ROWNUM is safe.
func (d *Oracle) eventsClaimWalk(p ClaimParams) Query {
	var b binder
	return b.query(walkRead(d.tables, &b, p, oracleFirstRows, false, ""))
}

// oracleFirstRows is "the first n rows of query": ROWNUM over the ordered
// query, in a plain read.
func oracleFirstRows(query, n string) string {
	return "SELECT * FROM (" + query + ")\n                        WHERE ROWNUM <= " + n
}

// eventsClaimLockCandidates is the ordered claim's cursor: the candidates
// eventsClaimCandidates found that are still PENDING and due on their
// current version, in (next_retry_at, id) order, FOR UPDATE SKIP LOCKED;
// Claim fetches them all and keeps a locked row only when every candidate
// of its key before it was locked too (keepKeyPrefixes).
func (d *Oracle) eventsClaimLockCandidates(p ClaimParams, ids []oncebox.EventID) Query {
	var b binder
	return b.query("SELECT " + oracleClaimColumns + "\n  FROM " + d.tables.Events +
		"\n WHERE " + b.idIn("id", ids, d) + " AND status = 'PENDING' AND next_retry_at <= " + b.t(p.Now) +
		"\n ORDER BY next_retry_at, id\n   FOR UPDATE SKIP LOCKED")
}

// eventsClaimProbe tells, without locking, whether a row of the type is
// due: the one statement of an idle poll (no transaction, no cursor of
// locks). A plain read, so ROWNUM is safe here.
func (d *Oracle) eventsClaimProbe(p ClaimParams) Query {
	var b binder
	return b.query("SELECT 1 FROM " + d.tables.Events + "\n WHERE status = 'PENDING' AND event_type = " + b.p(p.EventType) +
		" AND next_retry_at <= " + b.t(p.Now) + " AND ROWNUM = 1")
}

// eventsFailedProbe tells, without locking, whether a FAILED row waits: an
// idle MoveToDLQ run stops there.
func (d *Oracle) eventsFailedProbe() Query {
	return Query{SQL: "SELECT 1 FROM " + d.tables.Events + " WHERE status = 'FAILED' AND ROWNUM = 1"}
}

// eventsClaimUpdate flips the rows the claim's cursor locked to IN_PROCESS
// with the claim's token and instance (claimed_by).
func (d *Oracle) eventsClaimUpdate(p ClaimParams, ids []oncebox.EventID) Query {
	var b binder
	return b.query("UPDATE " + d.tables.Events + " SET status = 'IN_PROCESS', claim_token = " +
		b.p(d.EncodeID(p.Token)) + ", claimed_at = " + b.t(p.Now) + ", claimed_by = " + b.p(nullable(p.Instance)) +
		", updated_at = " + b.t(p.Now) +
		"\n WHERE " + b.idIn("id", ids, d))
}

// eventsMarkProcessed marks ids PROCESSED under the claim-token guard (a row
// recovered and claimed again has a new token, so a late finalize changes
// nothing). Without RETURNING, MarkProcessed reads back which ids it marked
// when fewer rows than ids were affected.
func (d *Oracle) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query {
	var b binder
	return b.query("UPDATE " + d.tables.Events + " SET status = 'PROCESSED', updated_at = " + b.t(now) +
		"\n WHERE " + b.idIn("id", ids, d) + " AND claim_token = " + b.p(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'")
}

// eventsLockClaimed locks which of ids are still IN_PROCESS under token:
// the rows a finalize of that claim may mark. MarkProcessed's slow path.
func (d *Oracle) eventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) Query {
	var b binder
	return b.query("SELECT id FROM " + d.tables.Events + "\n WHERE " + b.idIn("id", ids, d) +
		" AND claim_token = " + b.p(d.EncodeID(token)) + " AND status = 'IN_PROCESS' FOR UPDATE")
}

// EventsMarkFailed implements Dialect: one UPDATE whose new status, retry
// count, next retry time and error come from a CASE id WHEN … per column,
// under the claim-token guard. Each row binds nine values (its id five
// times: no placeholder is reused on Oracle).
//
// Beyond 7,281 rows (9 × rows + 3 > 65,535 binds) it is one MERGE over a
// UNION ALL of DUAL rows instead, five binds a row, which holds the largest
// batch (10,000): see eventsMarkFailedMerge.
func (d *Oracle) EventsMarkFailed(token oncebox.EventID, rows []FailedEvent, now time.Time) Query {
	if 9*len(rows)+3 > oracleMaxBindParams {
		return d.eventsMarkFailedMerge(token, rows, now)
	}
	var b binder
	cases := func(col string, val func(FailedEvent) string) string {
		var s strings.Builder
		s.WriteString(col + " = CASE id")
		for _, r := range rows {
			s.WriteString(" WHEN " + b.p(d.EncodeID(r.ID)) + " THEN " + val(r))
		}
		s.WriteString(" END")
		return s.String()
	}
	sql := "UPDATE " + d.tables.Events + "\n   SET " +
		cases("status", func(r FailedEvent) string { return b.p(string(r.Status)) }) + ",\n       " +
		cases("retry_count", func(r FailedEvent) string { return b.p(r.RetryCount) }) + ",\n       " +
		cases("next_retry_at", func(r FailedEvent) string { return b.t(r.NextRetryAt) }) + ",\n       " +
		cases("last_error", func(r FailedEvent) string { return "TO_CLOB(" + b.p(errorText(r.Error)) + ")" }) + ",\n       " +
		"first_failed_at = COALESCE(first_failed_at, " + b.t(now) + "),\n       " +
		"claim_token = NULL, claimed_at = NULL, updated_at = " + b.t(now)
	ids := make([]oncebox.EventID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	sql += "\n WHERE " + b.idIn("id", ids, d) + " AND claim_token = " + b.p(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'"
	return b.query(sql)
}

// eventsMarkFailedMerge is EventsMarkFailed for batches too large for the
// CASE form: MERGE INTO events USING (SELECT :id, :status, :retry_count,
// :next_retry_at, :last_error FROM DUAL UNION ALL …) ON (id) WHEN MATCHED
// THEN UPDATE … WHERE claim_token = :t AND status = 'IN_PROCESS'. The
// affected count is the rows updated, as the UPDATE's.
func (d *Oracle) eventsMarkFailedMerge(token oncebox.EventID, rows []FailedEvent, now time.Time) Query {
	var b binder
	var s strings.Builder
	s.WriteString("MERGE INTO " + d.tables.Events + " e\nUSING (")
	for i, r := range rows {
		if i == 0 {
			s.WriteString("SELECT " + b.p(d.EncodeID(r.ID)) + " AS id, " + b.p(string(r.Status)) + " AS status, " +
				b.p(r.RetryCount) + " AS retry_count, " + b.t(r.NextRetryAt) + " AS next_retry_at, " +
				b.p(errorText(r.Error)) + " AS last_error FROM DUAL")
			continue
		}
		s.WriteString("\n       UNION ALL SELECT " + b.p(d.EncodeID(r.ID)) + ", " + b.p(string(r.Status)) + ", " +
			b.p(r.RetryCount) + ", " + b.t(r.NextRetryAt) + ", " + b.p(errorText(r.Error)) + " FROM DUAL")
	}
	s.WriteString(`) u
   ON (e.id = u.id)
 WHEN MATCHED THEN UPDATE SET e.status = u.status, e.retry_count = u.retry_count, e.next_retry_at = u.next_retry_at,
      e.last_error = TO_CLOB(u.last_error), e.first_failed_at = COALESCE(e.first_failed_at, ` + b.t(now) + `),
      e.claim_token = NULL, e.claimed_at = NULL, e.updated_at = ` + b.t(now) + `
      WHERE e.claim_token = ` + b.p(d.EncodeID(token)) + " AND e.status = 'IN_PROCESS'")
	return b.query(s.String())
}

// EventsRelease implements Dialect: rows of a claim go back to PENDING
// without counting an attempt.
func (d *Oracle) EventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query {
	var b binder
	return b.query("UPDATE " + d.tables.Events + " SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = " +
		b.t(now) + "\n WHERE " + b.idIn("id", ids, d) + " AND claim_token = " + b.p(d.EncodeID(token)) +
		" AND status = 'IN_PROCESS'")
}

// EventsRecover implements Dialect: up to limit rows IN_PROCESS since
// before cutoff go back to PENDING and lose their token. ROWNUM without FOR
// UPDATE: the batch is bounded, and a row a finalizing claimer changes in
// between fails the outer predicate (Oracle re-checks it on the current row,
// restarting the statement if needed), so nothing finalized is recovered. No
// SKIP LOCKED fairness is needed here: one leased instance runs the job.
// Index: (status, claimed_at).
func (d *Oracle) EventsRecover(cutoff, now time.Time, limit int) Query {
	var b binder
	return b.query("UPDATE " + d.tables.Events + " SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = " +
		b.t(now) + "\n WHERE status = 'IN_PROCESS' AND claimed_at < " + b.t(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.Events +
		"\n                  WHERE status = 'IN_PROCESS' AND claimed_at < " + b.t(cutoff) +
		" AND ROWNUM <= " + b.p(limit) + ")")
}

// eventsMoveLock is MoveToDLQ's cursor over the FAILED rows, oldest first,
// FOR UPDATE SKIP LOCKED, fetched up to the limit.
func (d *Oracle) eventsMoveLock() Query {
	return Query{SQL: "SELECT id FROM " + d.tables.Events +
		"\n WHERE status = 'FAILED'\n ORDER BY updated_at\n   FOR UPDATE SKIP LOCKED"}
}

// eventsMoveCopy copies the locked FAILED rows into the DLQ (status MOVED,
// source publisher, handler_name ' ' for "", the DLQ row's id is the event
// id).
func (d *Oracle) eventsMoveCopy(ids []oncebox.EventID, now time.Time) Query {
	var b binder
	return b.query("INSERT INTO " + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', ' ', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ` + b.t(now) + ", " + b.t(now) +
		"\n  FROM " + d.tables.Events + "\n WHERE " + b.idIn("id", ids, d) + " AND status = 'FAILED'")
}

// eventsMoveDelete deletes the moved rows from the outbox.
func (d *Oracle) eventsMoveDelete(ids []oncebox.EventID) Query {
	var b binder
	return b.query("DELETE FROM " + d.tables.Events + " WHERE " + b.idIn("id", ids, d) + " AND status = 'FAILED'")
}

// EventsDeleteProcessed implements Dialect: up to limit PROCESSED rows last
// updated before cutoff, through a ROWNUM-bounded ROWID subquery (no SKIP
// LOCKED fairness needed: one leased instance runs the clean-up; PROCESSED
// rows are not updated any more). Index: (status, updated_at).
func (d *Oracle) EventsDeleteProcessed(cutoff time.Time, limit int) Query {
	var b binder
	return b.query("DELETE FROM " + d.tables.Events + "\n WHERE status = 'PROCESSED' AND updated_at < " + b.t(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.Events +
		"\n                  WHERE status = 'PROCESSED' AND updated_at < " + b.t(cutoff) +
		" AND ROWNUM <= " + b.p(limit) + ")")
}

// leaseAcquire is AcquireLease's statement: one MERGE that inserts the
// lease or takes it over when the holder's has run out; one affected row
// means taken.
func (d *Oracle) leaseAcquire(l Lease) Query {
	var b binder
	return b.query("MERGE INTO " + d.tables.Jobs + " j\nUSING (SELECT " + b.p(l.Name) + " AS name, " + b.p(l.Owner) +
		" AS locked_by, " + b.t(l.LockedAt) + " AS locked_at, " + b.t(l.Until) + ` AS lock_until FROM DUAL) s
   ON (j.name = s.name)
 WHEN MATCHED THEN UPDATE SET j.locked_by = s.locked_by, j.locked_at = s.locked_at, j.lock_until = s.lock_until
      WHERE j.lock_until <= s.locked_at
 WHEN NOT MATCHED THEN INSERT (name, locked_by, locked_at, lock_until)
      VALUES (s.name, s.locked_by, s.locked_at, s.lock_until)`)
}

// LeaseRelease implements Dialect: shorten the lease held by l.Owner since
// l.LockedAt to end at l.Until.
func (d *Oracle) LeaseRelease(l Lease) Query {
	var b binder
	return b.query("UPDATE " + d.tables.Jobs + " SET lock_until = " + b.t(l.Until) + " WHERE name = " + b.p(l.Name) +
		" AND locked_by = " + b.p(l.Owner) + " AND locked_at = " + b.t(l.LockedAt))
}

// EventsDueTypes implements Dialect: a recursive WITH (11gR2+) that jumps
// from one event type to the next through the claim index (status,
// event_type, next_retry_at, id), MIN() taking the first entry after the
// previous type (an INDEX RANGE SCAN (MIN/MAX): one probe), n stopping it
// after limit types; then, per type, one probe for its first entry due at
// now. As on PostgreSQL, the due test stays out of the jump, where MIN()
// would pass every entry of a type waiting for a retry. Oracle reads an
// empty string as NULL, so no lower bound is written when after is "".
func (d *Oracle) EventsDueTypes(now time.Time, after string, limit int) Query {
	var b binder
	from := ""
	if after != "" {
		from = " AND event_type > " + b.p(after)
	}
	return b.query("WITH t (event_type, n) AS (" +
		"\n    SELECT MIN(event_type), 1 FROM " + d.tables.Events +
		"\n     WHERE status = 'PENDING'" + from +
		"\n  UNION ALL" +
		"\n    SELECT (SELECT MIN(e.event_type) FROM " + d.tables.Events + " e" +
		"\n             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1" +
		"\n      FROM t" +
		"\n     WHERE t.event_type IS NOT NULL AND t.n < " + b.p(limit) +
		"\n)\nSELECT t.event_type," +
		"\n       CASE WHEN EXISTS (SELECT 1 FROM " + d.tables.Events + " e" +
		"\n                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= " + b.t(now) + ")" +
		"\n            THEN 1 ELSE 0 END" +
		"\n  FROM t" +
		"\n WHERE t.event_type IS NOT NULL" +
		"\n ORDER BY t.event_type")
}
