package postgres

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// eventsMarkProcessed is MarkProcessed's statement. The claim token guards
// the update: a row recovered and claimed again by another instance has a
// new token, so a late finalize of the old claim changes nothing. It
// returns the ids it marked, so that only those are reported as sent.
func (d *Dialect) eventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	if d.deleteConfirmed {
		return dialects.Query{
			SQL: "DELETE FROM " + d.tables.Events + `
 WHERE id = ANY($1::uuid[]) AND claim_token = $2 AND status = 'IN_PROCESS'
RETURNING id`,
			Args: []any{d.idArray(ids), d.EncodeID(token)},
		}
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PROCESSED', updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'
RETURNING id`,
		Args: []any{now, d.idArray(ids), d.EncodeID(token)},
	}
}

// eventsMarkProcessedClaims is eventsMarkProcessed for the confirmed rows of
// several claims at once (a merged finalize): one statement, one commit.
// Each row carries its own claim's token, so the guard is the same as
// eventsMarkProcessed's: a row whose claim was recovered and taken again
// meanwhile has a new token and is left alone, whatever the other claims
// of the statement. It returns the ids it marked.
//
// Locks: row locks on the rows it updates, as eventsMarkProcessed. Index:
// the primary key, one probe per (id, token) pair of the unnested arrays.
func (d *Dialect) eventsMarkProcessedClaims(claims []dialects.ClaimIDs, now time.Time) dialects.Query {
	n := 0
	for _, c := range claims {
		n += len(c.IDs)
	}
	ids := make([]string, 0, n)
	tokens := make([]string, 0, n)
	for _, c := range claims {
		token := c.Token.String()
		for _, id := range c.IDs {
			ids = append(ids, id.String())
			tokens = append(tokens, token)
		}
	}
	if d.deleteConfirmed {
		return dialects.Query{
			SQL: "DELETE FROM " + d.tables.Events + ` e
 USING unnest($1::uuid[], $2::uuid[]) AS u(id, claim_token)
 WHERE e.id = u.id AND e.claim_token = u.claim_token AND e.status = 'IN_PROCESS'
RETURNING e.id`,
			Args: []any{ids, tokens},
		}
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` e SET status = 'PROCESSED', updated_at = $1
  FROM unnest($2::uuid[], $3::uuid[]) AS u(id, claim_token)
 WHERE e.id = u.id AND e.claim_token = u.claim_token AND e.status = 'IN_PROCESS'
RETURNING e.id`,
		Args: []any{now, ids, tokens},
	}
}

// eventsMarkFailed is Relay.MarkFailed's statement: each row gets its own
// retry count, next retry time and status from arrays unnested in one
// statement, under the same claim-token guard as eventsMarkProcessed.
func (d *Dialect) eventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	ids := make([]string, len(rows))
	statuses := make([]string, len(rows))
	counts := make([]int32, len(rows))
	next := make([]time.Time, len(rows))
	errs := make([]string, len(rows))
	for i, r := range rows {
		ids[i], statuses[i], counts[i], next[i], errs[i] = r.ID.String(), string(r.Status), int32(r.RetryCount), r.NextRetryAt, sqlkit.ErrorText(r.Error)
	}
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` e
   SET status = u.status, retry_count = u.retry_count, next_retry_at = u.next_retry_at,
       last_error = u.last_error, first_failed_at = COALESCE(e.first_failed_at, $1),
       claim_token = NULL, claimed_at = NULL, updated_at = $1
  FROM unnest($2::uuid[], $3::text[], $4::int[], $5::timestamptz[], $6::text[])
       AS u(id, status, retry_count, next_retry_at, last_error)
 WHERE e.id = u.id AND e.claim_token = $7 AND e.status = 'IN_PROCESS'`,
		Args: []any{now, ids, statuses, counts, next, errs, d.EncodeID(token)},
	}
}

// eventsRelease is Relay.ReleaseClaims's statement: rows of a claim go back
// to PENDING as they were, without counting an attempt (broker unreachable,
// shutdown).
func (d *Dialect) eventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'`,
		Args: []any{now, d.idArray(ids), d.EncodeID(token)},
	}
}

// eventsRecover returns up to limit rows IN_PROCESS since before cutoff to
// PENDING without counting an attempt, and clears their claim token so that
// the stuck claimer's late finalize matches nothing. No run method runs it:
// the relay recovers with eventsRecoverStale, this statement with the
// heartbeat bound added. It is kept, with its golden file, as the plain
// form of the recovery.
//
// Locks: SKIP LOCKED passes over rows a finalizing claimer is updating right
// now; they are no longer stuck. Index: the partial index (claimed_at) WHERE
// status = 'IN_PROCESS'.
func (d *Dialect) eventsRecover(cutoff, now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.Events + ` SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = $1
 WHERE id IN (SELECT id FROM ` + d.tables.Events + `
               WHERE status = 'IN_PROCESS' AND claimed_at < $2
               LIMIT $3 FOR UPDATE SKIP LOCKED)`,
		Args: []any{now, cutoff, limit},
	}
}

// eventsMoveToDLQ is MoveToDLQ's statement: up to limit FAILED rows are
// locked, copied into the DLQ table (status MOVED, source publisher, the DLQ
// row's id is the event id) and deleted, all in one statement and so in one
// transaction: a crash leaves each row either in the outbox or in the DLQ.
func (d *Dialect) eventsMoveToDLQ(now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH moved AS (
    DELETE FROM ` + d.tables.Events + `
     WHERE id IN (SELECT id FROM ` + d.tables.Events + `
                   WHERE status = 'FAILED' ORDER BY updated_at
                   LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING *
)
INSERT INTO ` + d.tables.DLQ + ` (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, $1, $1
  FROM moved`,
		Args: []any{now, limit},
	}
}

// eventsDeleteProcessed is Relay.DeleteProcessed's statement: up to limit
// PROCESSED rows last updated before cutoff. Index: the partial index
// (updated_at) WHERE status = 'PROCESSED'.
func (d *Dialect) eventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.Events + ` WHERE id IN (SELECT id FROM ` + d.tables.Events + `
 WHERE status = 'PROCESSED' AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		Args: []any{cutoff, limit},
	}
}

// leaseAcquire is AcquireLease's statement: take the lease when nobody holds
// it or when the holder's lease has run out; one row affected means taken.
func (d *Dialect) leaseAcquire(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL: "INSERT INTO " + d.tables.Jobs + ` AS j (name, locked_by, locked_at, lock_until) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET locked_by = EXCLUDED.locked_by, locked_at = EXCLUDED.locked_at,
       lock_until = EXCLUDED.lock_until
 WHERE j.lock_until <= EXCLUDED.locked_at`,
		Args: []any{l.Name, l.Owner, l.LockedAt, l.Until},
	}
}

// leaseRelease is Relay.ReleaseLease's statement: shorten the lease held by
// l.Owner since l.LockedAt to end at l.Until (the at-least time, or now).
func (d *Dialect) leaseRelease(l dialects.Lease) dialects.Query {
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.Jobs + " SET lock_until = $1 WHERE name = $2 AND locked_by = $3 AND locked_at = $4",
		Args: []any{l.Until, l.Name, l.Owner, l.LockedAt},
	}
}

func (d *Dialect) idArray(ids []oncebox.EventID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// eventsDueTypes is Relay.DueTypes's statement: a recursive CTE that jumps
// from one event type to the next through the claim index (event_type,
// next_retry_at, id) WHERE status = 'PENDING' (min() takes the first entry
// after the previous type: one probe), n stopping it after limit types;
// then, for each type, one probe for its first entry due at now (the
// index's order within a type is next_retry_at's). The due test is not in
// the jump: there it made min() pass every entry of a type that waits for
// a retry (200,000 such rows: a 21–35 ms scan of the index per idle poll,
// measured, against 0.1 ms now). PostgreSQL evaluates a recursive CTE only
// as far as the outer query reads it.
func (d *Dialect) eventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM ` + d.tables.Events + `
     WHERE status = 'PENDING' AND event_type > $2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM ` + d.tables.Events + ` e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < $3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM ` + d.tables.Events + ` e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= $1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type`,
		Args: []any{now, after, limit},
	}
}
