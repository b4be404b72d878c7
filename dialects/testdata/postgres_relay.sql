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

-- EventsClaim (ordering: key)
WITH RECURSIVE k (partition_key, n) AS (
    SELECT (SELECT f.partition_key FROM outbox_events f
                        WHERE f.event_type = $1 AND f.status = 'PENDING' AND f.partition_key IS NOT NULL AND f.next_retry_at IS NOT NULL
                        ORDER BY f.partition_key LIMIT 1), 1
  UNION ALL
    SELECT (SELECT e.partition_key FROM outbox_events e
                        WHERE e.event_type = $2 AND e.status = 'PENDING' AND e.partition_key > k.partition_key AND e.next_retry_at IS NOT NULL
                        ORDER BY e.partition_key LIMIT 1), k.n + 1
      FROM k
     WHERE k.partition_key IS NOT NULL AND k.n < $3
),
due AS (
    SELECT c.id
      FROM (SELECT w.id FROM (SELECT id FROM outbox_events
                        WHERE status = 'PENDING' AND event_type = $4 AND next_retry_at <= $5
                        ORDER BY next_retry_at, id
                        LIMIT $6) w
            UNION
            SELECT (SELECT h.id FROM outbox_events h
                        WHERE h.event_type = $7 AND h.partition_key = k.partition_key AND h.status = 'PENDING' AND h.next_retry_at IS NOT NULL
                        ORDER BY h.id LIMIT 1)
              FROM k WHERE k.partition_key IS NOT NULL) cand
      JOIN outbox_events c ON c.id = cand.id
     WHERE c.status = 'PENDING' AND c.next_retry_at <= $8
       AND (c.partition_key IS NULL OR (
           c.id = (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1)
       AND NOT EXISTS (SELECT 1 FROM outbox_events b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'IN_PROCESS')))
     ORDER BY c.next_retry_at, c.id
     LIMIT $9
       FOR UPDATE OF c SKIP LOCKED
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $11, claimed_at = $10, claimed_by = $12, updated_at = $10
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a a 200 a 2026-11-30 12:00:00 +0000 UTC 400 a 2026-11-30 12:00:00 +0000 UTC 200 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 host-1]

-- EventsClaim (ordering: key, on-failure: block)
WITH RECURSIVE k (partition_key, n) AS (
    SELECT (SELECT f.partition_key FROM outbox_events f
                        WHERE f.event_type = $1 AND f.status = 'PENDING' AND f.partition_key IS NOT NULL AND f.next_retry_at IS NOT NULL
                        ORDER BY f.partition_key LIMIT 1), 1
  UNION ALL
    SELECT (SELECT e.partition_key FROM outbox_events e
                        WHERE e.event_type = $2 AND e.status = 'PENDING' AND e.partition_key > k.partition_key AND e.next_retry_at IS NOT NULL
                        ORDER BY e.partition_key LIMIT 1), k.n + 1
      FROM k
     WHERE k.partition_key IS NOT NULL AND k.n < $3
),
due AS (
    SELECT c.id
      FROM (SELECT w.id FROM (SELECT id FROM outbox_events
                        WHERE status = 'PENDING' AND event_type = $4 AND next_retry_at <= $5
                        ORDER BY next_retry_at, id
                        LIMIT $6) w
            UNION
            SELECT (SELECT h.id FROM outbox_events h
                        WHERE h.event_type = $7 AND h.partition_key = k.partition_key AND h.status = 'PENDING' AND h.next_retry_at IS NOT NULL
                        ORDER BY h.id LIMIT 1)
              FROM k WHERE k.partition_key IS NOT NULL) cand
      JOIN outbox_events c ON c.id = cand.id
     WHERE c.status = 'PENDING' AND c.next_retry_at <= $8
       AND (c.partition_key IS NULL OR (
           c.id = (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1)
       AND NOT EXISTS (SELECT 1 FROM outbox_events b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'IN_PROCESS')
       AND NOT EXISTS (SELECT 1 FROM outbox_events b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'FAILED' AND b.id < c.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = c.event_type AND q.partition_key = c.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < c.id)))
     ORDER BY c.next_retry_at, c.id
     LIMIT $9
       FOR UPDATE OF c SKIP LOCKED
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $11, claimed_at = $10, claimed_by = $12, updated_at = $10
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a a 200 a 2026-11-30 12:00:00 +0000 UTC 400 a 2026-11-30 12:00:00 +0000 UTC 200 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 host-1]

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

