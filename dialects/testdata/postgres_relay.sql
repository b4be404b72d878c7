-- EventsClaim
WITH due AS (
    SELECT id FROM outbox_events
     WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at <= $2
     ORDER BY next_retry_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $4, claimed_at = $2, claimed_by = $5, updated_at = $2
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a 2026-11-30 12:00:00 +0000 UTC 200 01000000-0000-0000-0000-000000000000 host-1]

-- EventsDueTypes (discovery)
WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING' AND next_retry_at <= $1
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.next_retry_at <= $1 AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < $2
)
SELECT event_type FROM t WHERE event_type IS NOT NULL;
-- args: [2026-11-30 12:00:00 +0000 UTC 100]

-- EventsMarkProcessed
UPDATE outbox_events SET status = 'PROCESSED', updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'
RETURNING id;
-- args: [2026-11-30 12:00:00 +0000 UTC [0a000000-0000-0000-0000-000000000000 0b000000-0000-0000-0000-000000000000] 01000000-0000-0000-0000-000000000000]

-- EventsMarkProcessedClaims (a merged finalize: the token of each row's claim)
UPDATE outbox_events e SET status = 'PROCESSED', updated_at = $1
  FROM unnest($2::uuid[], $3::uuid[]) AS u(id, claim_token)
 WHERE e.id = u.id AND e.claim_token = u.claim_token AND e.status = 'IN_PROCESS'
RETURNING e.id;
-- args: [2026-11-30 12:00:00 +0000 UTC [0a000000-0000-0000-0000-000000000000 0b000000-0000-0000-0000-000000000000 0c000000-0000-0000-0000-000000000000] [01000000-0000-0000-0000-000000000000 01000000-0000-0000-0000-000000000000 02000000-0000-0000-0000-000000000000]]

