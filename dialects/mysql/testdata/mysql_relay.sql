-- EventsDueTypes (discovery, first page)
SELECT event_type, CASE WHEN MIN(next_retry_at) <= ? THEN 1 ELSE 0 END
  FROM outbox_events
 WHERE status BETWEEN 'PENDING' AND 'PENDING' AND event_type > ?
 GROUP BY status, event_type
 ORDER BY status, event_type
 LIMIT ?;
-- args: [2026-11-30 12:00:00 +0000 UTC  100]

-- EventsDueTypes (discovery, next page)
SELECT event_type, CASE WHEN MIN(next_retry_at) <= ? THEN 1 ELSE 0 END
  FROM outbox_events
 WHERE status BETWEEN 'PENDING' AND 'PENDING' AND event_type > ?
 GROUP BY status, event_type
 ORDER BY status, event_type
 LIMIT ?;
-- args: [2026-11-30 12:00:00 +0000 UTC b 100]

-- Claim: EventsClaimProbe
SELECT 1 FROM outbox_events WHERE status = 'PENDING' AND event_type = ? AND next_retry_at <= ? LIMIT 1;
-- args: [order-created 2026-11-30 12:00:00 +0000 UTC]

-- Claim: EventsClaimSelect
SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at FROM outbox_events
 WHERE status = 'PENDING' AND event_type = ? AND next_retry_at <= ?
 ORDER BY next_retry_at, id
 LIMIT ?
   FOR UPDATE SKIP LOCKED;
-- args: [order-created 2026-11-30 12:00:00 +0000 UTC 200]

-- Claim: EventsClaimUpdate
UPDATE outbox_events SET status = 'IN_PROCESS', claim_token = ?, claimed_at = ?, claimed_by = ?, updated_at = ?
 WHERE id IN (?,?);
-- args: [[238 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 2026-11-30 12:00:00 +0000 UTC host-1 2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- Claim by key 1/3: EventsClaimCandidates (plain read, idle polls end here)
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i FORCE INDEX (outbox_events_claimed_idx)
         WHERE i.status = 'IN_PROCESS' AND i.event_type = ? AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS (
    SELECT DISTINCT y.partition_key FROM (
        SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = ? AND x.next_retry_at > ? AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at
                        LIMIT 10000) y
     WHERE y.retry_count > 0
),
w AS (
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
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)))) q) r
     WHERE r.partition_key IS NULL OR r.wn <= 1
     ORDER BY r.next_retry_at, r.id
                        LIMIT 200
),
wr AS (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = ? AND b.partition_key = wr.partition_key AND b.status = 'PENDING'
                          AND b.id NOT IN (SELECT id FROM w)
                        ORDER BY b.id LIMIT 1) END AS stop1
      FROM wr
),
wt AS (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
)
SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= ?
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
UNION ALL
SELECT NULL, NULL, NULL FROM DUAL
 WHERE (SELECT COUNT(*) FROM busy) < 200
   AND (SELECT COUNT(*) FROM (
        SELECT 1 AS one FROM outbox_events c
         WHERE c.status = 'PENDING' AND c.event_type = ? AND c.next_retry_at <= ?
         ORDER BY c.next_retry_at, c.id
                        LIMIT 2000) cc) >= 2000
 ORDER BY next_retry_at, id;
-- args: [order-created order-created 2026-11-30 12:00:00 +0000 UTC order-created 2026-11-30 12:00:00 +0000 UTC order-created 2026-11-30 12:00:00 +0000 UTC order-created 2026-11-30 12:00:00 +0000 UTC]

-- Claim by key, on-failure block 1/3: EventsClaimCandidates
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i FORCE INDEX (outbox_events_claimed_idx)
         WHERE i.status = 'IN_PROCESS' AND i.event_type = ? AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS (
    SELECT DISTINCT y.partition_key FROM (
        SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = ? AND x.next_retry_at > ? AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at
                        LIMIT 10000) y
     WHERE y.retry_count > 0
),
blocked AS (
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
w AS (
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
wr AS (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = ? AND b.partition_key = wr.partition_key AND b.status = 'PENDING'
                          AND b.id NOT IN (SELECT id FROM w)
                        ORDER BY b.id LIMIT 1) END AS stop1
      FROM wr
),
wt AS (
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
SELECT NULL, NULL, NULL FROM DUAL
 WHERE (SELECT COUNT(*) FROM busy) < 200
   AND (SELECT COUNT(*) FROM (
        SELECT 1 AS one FROM outbox_events c
         WHERE c.status = 'PENDING' AND c.event_type = ? AND c.next_retry_at <= ?
         ORDER BY c.next_retry_at, c.id
                        LIMIT 2000) cc) >= 2000
 ORDER BY next_retry_at, id;
-- args: [order-created order-created 2026-11-30 12:00:00 +0000 UTC order-created order-created order-created 2026-11-30 12:00:00 +0000 UTC order-created order-created order-created 2026-11-30 12:00:00 +0000 UTC order-created order-created order-created 2026-11-30 12:00:00 +0000 UTC]

-- Claim by key 1/3 (window cut, candidates short): EventsClaimWalk
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i FORCE INDEX (outbox_events_claimed_idx)
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
     ORDER BY h.next_retry_at, h.id
                        LIMIT 200;
-- args: [order-created order-created 2026-11-30 12:00:00 +0000 UTC]

-- Claim by key, on-failure block 1/3 (window cut, candidates short): EventsClaimWalk
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i FORCE INDEX (outbox_events_claimed_idx)
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
-- args: [order-created order-created 2026-11-30 12:00:00 +0000 UTC order-created order-created]

-- Claim by key 2/3: EventsClaimLockCandidates
SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at FROM outbox_events
 WHERE id IN (?,?) AND status = 'PENDING' AND next_retry_at <= ?
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 2026-11-30 12:00:00 +0000 UTC]

-- MarkProcessed: EventsMarkProcessed
UPDATE outbox_events SET status = 'PROCESSED', updated_at = ?
 WHERE id IN (?,?) AND claim_token = ? AND status = 'IN_PROCESS';
-- args: [2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [238 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- MarkProcessed (stale): EventsLockClaimed
SELECT id FROM outbox_events WHERE id IN (?,?) AND claim_token = ? AND status = 'IN_PROCESS' FOR UPDATE;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [238 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsMarkFailed
UPDATE outbox_events SET
    status = CASE id WHEN X'01000000000000000000000000000000' THEN ? WHEN X'02000000000000000000000000000000' THEN ? ELSE status END,
    retry_count = CASE id WHEN X'01000000000000000000000000000000' THEN 1 WHEN X'02000000000000000000000000000000' THEN 5 ELSE retry_count END,
    next_retry_at = CASE id WHEN X'01000000000000000000000000000000' THEN ? WHEN X'02000000000000000000000000000000' THEN ? ELSE next_retry_at END,
    last_error = CASE id WHEN X'01000000000000000000000000000000' THEN ? WHEN X'02000000000000000000000000000000' THEN ? ELSE last_error END,
    first_failed_at = COALESCE(first_failed_at, ?), claim_token = NULL, claimed_at = NULL, updated_at = ?
 WHERE id IN (X'01000000000000000000000000000000',X'02000000000000000000000000000000') AND claim_token = ? AND status = 'IN_PROCESS';
-- args: [PENDING FAILED 2026-11-30 12:00:01 +0000 UTC 2026-11-30 12:00:00 +0000 UTC boom gone 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC [238 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsRelease
UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = ?
 WHERE id IN (?,?) AND claim_token = ? AND status = 'IN_PROCESS';
-- args: [2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [238 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsRecover
UPDATE outbox_events AS e
  JOIN (SELECT id FROM outbox_events
         WHERE status = 'IN_PROCESS' AND claimed_at < ?
         ORDER BY claimed_at, id
         LIMIT ?
           FOR UPDATE SKIP LOCKED) AS stuck ON e.id = stuck.id
   SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.updated_at = ?
 WHERE e.status = 'IN_PROCESS';
-- args: [2026-11-30 11:59:00 +0000 UTC 1000 2026-11-30 12:00:00 +0000 UTC]

-- MoveToDLQ: EventsFailedProbe
SELECT 1 FROM outbox_events WHERE status = 'FAILED' LIMIT 1;
-- args: []

-- MoveToDLQ: EventsMoveSelect
SELECT id FROM outbox_events WHERE status = 'FAILED' ORDER BY updated_at, id LIMIT ? FOR UPDATE SKIP LOCKED;
-- args: [1000]

-- MoveToDLQ: EventsCopyToDLQ
INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', '', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, ?, ?
  FROM outbox_events
 WHERE id IN (?,?);
-- args: [2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- MoveToDLQ: EventsDelete (per row)
DELETE FROM outbox_events WHERE id = ?;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- EventsDeleteProcessed
DELETE FROM outbox_events WHERE status = 'PROCESSED' AND updated_at < ?
 ORDER BY updated_at, id
 LIMIT ?;
-- args: [2026-11-30 12:00:00 +0000 UTC 1000]

-- AcquireLease: LeaseInsert
INSERT IGNORE INTO outbox_jobs (name, locked_by, locked_at, lock_until) VALUES (?, NULL, NULL, ?);
-- args: [outbox-clean-up 2026-11-30 12:00:00 +0000 UTC]

-- AcquireLease: LeaseTake
UPDATE outbox_jobs SET locked_by = ?, locked_at = ?, lock_until = ? WHERE name = ? AND lock_until <= ?;
-- args: [i1 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:01:00 +0000 UTC outbox-clean-up 2026-11-30 12:00:00 +0000 UTC]

-- LeaseRelease
UPDATE outbox_jobs SET lock_until = ? WHERE name = ? AND locked_by = ? AND locked_at = ?;
-- args: [2026-11-30 12:01:00 +0000 UTC outbox-clean-up i1 2026-11-30 12:00:00 +0000 UTC]

-- InboxInsert
INSERT IGNORE INTO inbox_events (consumer, event_id, processed_at) VALUES (?, ?, ?);
-- args: [ns k1 2026-11-30 12:00:00 +0000 UTC]

-- InboxRecordMany: InboxSelectPresent
SELECT event_id FROM inbox_events WHERE consumer = ? AND event_id IN (?,?);
-- args: [ns k1 k2]

-- InboxRecordMany: InboxInsertMany
INSERT IGNORE INTO inbox_events (consumer, event_id, processed_at) VALUES (?,?,?),(?,?,?);
-- args: [ns k1 2026-11-30 12:00:00 +0000 UTC ns k2 2026-11-30 12:00:00 +0000 UTC]

-- InboxDeleteBefore
DELETE FROM inbox_events WHERE processed_at < ?
 ORDER BY processed_at
 LIMIT ?;
-- args: [2026-11-30 12:00:00 +0000 UTC 1000]

-- DLQUpsertConsumer (event id)
INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?, ?, 'consumer', ?, ?, ?, ?, ?, ?, ?, 'MOVED', ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    retry_count = retry_count + VALUES(retry_count), last_error = VALUES(last_error),
    last_failed_at = VALUES(last_failed_at), updated_at = VALUES(updated_at);
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] h a ta k m [112] {} 1 e 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQUpsertConsumer (no event id)
INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?, ?, 'consumer', ?, ?, ?, ?, ?, ?, ?, 'MOVED', ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    retry_count = retry_count + VALUES(retry_count), last_error = VALUES(last_error),
    last_failed_at = VALUES(last_failed_at), updated_at = VALUES(updated_at);
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] <nil> h a ta <nil> m [] {} 1 e 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQConsumerPayload
SELECT payload FROM outbox_dlq_events WHERE event_id = ? AND source = 'consumer' AND handler_name = ?;
-- args: [[2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] h]

-- TransferDLQToOutbox: DLQToRetryProbe
SELECT 1 FROM outbox_dlq_events WHERE status = 'TO_RETRY' LIMIT 1;
-- args: []

-- TransferDLQToOutbox: DLQTransferSelect
SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at
  FROM outbox_dlq_events
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
 LIMIT ?
   FOR UPDATE SKIP LOCKED;
-- args: [1000]

-- TransferDLQToOutbox: DLQTransferInsert
INSERT INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload,
    metadata, status, retry_count, next_retry_at, created_at, updated_at) VALUES (?,?,?,?,?,?,?,'PENDING',0,?,?,?)
ON DUPLICATE KEY UPDATE
    event_type = VALUES(event_type), topic = VALUES(topic), partition_key = VALUES(partition_key),
    message_uuid = VALUES(message_uuid), payload = VALUES(payload), metadata = VALUES(metadata),
    status = 'PENDING', retry_count = 0, next_retry_at = VALUES(next_retry_at),
    claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
    updated_at = VALUES(updated_at);
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] a ta <nil> m1 [112] {"oncebox_event_id":"x"} 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- TransferDLQToOutbox: DLQDeleteID (per row)
DELETE FROM outbox_dlq_events WHERE id = ?;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- Backlog
SELECT 'outbox', event_type, status, count(*), min(next_retry_at) FROM outbox_events GROUP BY event_type, status UNION ALL SELECT 'dlq', source, status, count(*), CAST(NULL AS DATETIME(6)) FROM outbox_dlq_events GROUP BY source, status;
-- args: []

