-- Claim: EventsClaimProbe
SELECT 1 FROM outbox_events WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at <= ?2 LIMIT 1;
-- args: [a 1796040000000000]

-- Claim: EventsClaim
UPDATE outbox_events
   SET status = 'IN_PROCESS', claim_token = ?4, claimed_at = ?2, claimed_by = ?5, updated_at = ?2
 WHERE id IN (SELECT id FROM outbox_events
               WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at <= ?2
               ORDER BY next_retry_at, id
               LIMIT ?3)
RETURNING id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at;
-- args: [a 1796040000000000 200 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] host-1]

-- Claim (ordering: key, on-failure: block): EventsClaimCandidates
WITH busy AS MATERIALIZED (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = ? AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS MATERIALIZED (
    SELECT DISTINCT y.partition_key FROM (
        SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = ? AND x.next_retry_at > ? AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at
                        LIMIT 10000) y
     WHERE y.retry_count > 0
),
blocked AS MATERIALIZED (
    SELECT bf.partition_key, bf.id FROM (
        SELECT f.partition_key, f.id FROM outbox_events f
         WHERE f.status = 'FAILED' AND f.event_type = ? AND f.partition_key IS NOT NULL
         ORDER BY f.updated_at
                        LIMIT 10000) bf
    UNION ALL
    SELECT bq.partition_key, bq.event_id FROM (
        SELECT q.partition_key, q.event_id FROM outbox_dlq_events q
         WHERE q.event_type = ? AND q.partition_key IS NOT NULL
           AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
         ORDER BY q.partition_key, q.event_id
                        LIMIT 10000) bq
),
w AS MATERIALIZED (
    SELECT r.id, r.partition_key, r.next_retry_at FROM (
        SELECT q.id, q.partition_key, q.next_retry_at,
               ROW_NUMBER() OVER (PARTITION BY q.partition_key ORDER BY q.next_retry_at, q.id) AS wn
          FROM (SELECT s.id, s.partition_key, s.next_retry_at FROM (
        SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = ? AND next_retry_at <= ?
         ORDER BY next_retry_at, id
                        LIMIT 2000) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)
            AND NOT EXISTS (SELECT 1 FROM blocked k WHERE k.partition_key = s.partition_key AND k.id < s.id)))) q) r
     WHERE r.partition_key IS NULL OR r.wn <= 1
     ORDER BY r.next_retry_at, r.id
                        LIMIT 200
),
wr AS MATERIALIZED (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS MATERIALIZED (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = ? AND b.partition_key = wr.partition_key AND b.status = 'PENDING'
                          AND b.id NOT IN (SELECT id FROM w)
                        ORDER BY b.id LIMIT 1) END AS stop1
      FROM wr
),
wt AS MATERIALIZED (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
)
SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id)
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = ? AND f.partition_key = wt.partition_key
                          AND f.status = 'FAILED' AND f.id < wt.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = ? AND q.partition_key = wt.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < wt.id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= ?
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = ? AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = ? AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
UNION ALL
SELECT NULL, NULL, NULL
 WHERE (SELECT COUNT(*) FROM busy) < 200
   AND (SELECT COUNT(*) FROM (
        SELECT 1 AS one FROM outbox_events c
         WHERE c.status = 'PENDING' AND c.event_type = ? AND c.next_retry_at <= ?
         ORDER BY c.next_retry_at, c.id
                        LIMIT 2000) cc) >= 2000
 ORDER BY next_retry_at, id;
-- args: [a a 1796040000000000 a a a 1796040000000000 a a a 1796040000000000 a a a 1796040000000000]

-- Claim (ordering: key): EventsClaimWalk
WITH busy AS MATERIALIZED (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = ? AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
)
SELECT h.id, h.partition_key, h.next_retry_at FROM (
        SELECT k.partition_key, MIN(k.id) AS head FROM outbox_events k
         WHERE k.event_type = ? AND k.partition_key IS NOT NULL AND k.status BETWEEN 'PENDING' AND 'PENDING'
         GROUP BY k.event_type, k.partition_key, k.status
         ORDER BY k.event_type, k.partition_key, k.status
         LIMIT 2000) v
      JOIN outbox_events h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)
       AND h.status = 'PENDING' AND h.next_retry_at <= ?
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = ? AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = ? AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
     ORDER BY h.next_retry_at, h.id
                        LIMIT 200;
-- args: [a a 1796040000000000 a a]

-- Claim (ordering: key): EventsClaimLockCandidates
SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at FROM outbox_events
 WHERE id IN (?, ?) AND status = 'PENDING' AND next_retry_at <= ?
 ORDER BY next_retry_at, id;
-- args: [[10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [11 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 1796040000000000]

-- Claim (ordering: key): EventsClaimUpdate
UPDATE outbox_events SET status = 'IN_PROCESS', claim_token = ?, claimed_at = ?, claimed_by = ?, updated_at = ?
 WHERE id IN (?, ?);
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 1796040000000000 host-1 1796040000000000 [10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [11 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsDueTypes (discovery, first page)
WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING' AND event_type > ?2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < ?3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM outbox_events e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= ?1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type;
-- args: [1796040000000000  100]

-- EventsMarkProcessed
UPDATE outbox_events SET status = 'PROCESSED', updated_at = ?
 WHERE id IN (?, ?) AND claim_token = ? AND status = 'IN_PROCESS'
RETURNING id;
-- args: [1796040000000000 [10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [11 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsMarkFailed
UPDATE outbox_events AS e
   SET status = u.column2, retry_count = u.column3, next_retry_at = u.column4,
       last_error = u.column5, first_failed_at = COALESCE(e.first_failed_at, ?),
       claim_token = NULL, claimed_at = NULL, updated_at = ?
  FROM (VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)) AS u
 WHERE e.id = u.column1 AND e.claim_token = ? AND e.status = 'IN_PROCESS';
-- args: [1796040000000000 1796040000000000 [10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] PENDING 1 1796040001000000 e1 [11 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] FAILED 3 1796040000000000 e2 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsRelease
UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = ?
 WHERE id IN (?, ?) AND claim_token = ? AND status = 'IN_PROCESS';
-- args: [1796040000000000 [10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [11 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- MoveToDLQ: EventsFailedProbe
SELECT 1 FROM outbox_events WHERE status = 'FAILED' LIMIT 1;
-- args: []

-- MoveToDLQ: EventsCopyToDLQ
INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ?1, ?1
  FROM outbox_events
 WHERE id IN (SELECT id FROM outbox_events
               WHERE status = 'FAILED' ORDER BY updated_at, id LIMIT ?2);
-- args: [1796040000000000 1000]

-- MoveToDLQ: EventsDeleteMoved
DELETE FROM outbox_events WHERE id IN (SELECT id FROM outbox_events
               WHERE status = 'FAILED' ORDER BY updated_at, id LIMIT ?1);
-- args: [1000]

-- EventsDeleteProcessed
DELETE FROM outbox_events WHERE id IN (SELECT id FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < ?1 LIMIT ?2);
-- args: [1796040000000000 1000]

-- LeaseAcquire
INSERT INTO outbox_jobs AS j (name, locked_by, locked_at, lock_until) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, locked_at = excluded.locked_at,
       lock_until = excluded.lock_until
 WHERE j.lock_until <= excluded.locked_at;
-- args: [cleanup host-1 1796040000000000 1796040060000000]

-- LeaseRelease
UPDATE outbox_jobs SET lock_until = ?1 WHERE name = ?2 AND locked_by = ?3 AND locked_at = ?4;
-- args: [1796040060000000 cleanup host-1 1796040000000000]

