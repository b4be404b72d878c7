-- ConsoleTypes
SELECT event_type,
       SUM(CASE WHEN status = 'PENDING' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'IN_PROCESS' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END),
       MIN(CASE WHEN status = 'PENDING' AND next_retry_at <= ?1 THEN next_retry_at END),
       SUM(CASE WHEN status = 'PROCESSED' THEN 1 ELSE 0 END)
  FROM outbox_events
 WHERE status IN ('PENDING', 'IN_PROCESS', 'FAILED')
    OR (status = 'PROCESSED' AND updated_at >= ?2)
 GROUP BY event_type
 ORDER BY event_type;
-- args: [1796040000000000 1796039700000000]

-- ConsoleInstances: heartbeats
SELECT instance_id, heartbeat_at FROM outbox_instances;
-- args: []

-- ConsoleInstances: claims
SELECT claimed_by, COUNT(*), MIN(claimed_at) FROM outbox_events WHERE status = 'IN_PROCESS' GROUP BY claimed_by;
-- args: []

-- ConsoleFingerprints: first page, no filter
SELECT id, source, event_type, status, moved_at, last_error FROM outbox_dlq_events
 ORDER BY id
 LIMIT ?;
-- args: [1000]

-- ConsoleFingerprints: a page after an id, every filter
SELECT id, source, event_type, status, moved_at, last_error FROM outbox_dlq_events
 WHERE status IN (?, ?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?
   AND id > ?
 ORDER BY id
 LIMIT ?;
-- args: [MOVED RESOLVED a publisher 1796036400000000 1796040000000000 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 1000]

-- ConsoleFingerprintIDs: first page
SELECT id, last_error FROM outbox_dlq_events
 WHERE status IN (?)
   AND event_type = ?
   AND source = ?
 ORDER BY id
 LIMIT ?;
-- args: [MOVED a publisher 100]

-- ConsoleFingerprintIDs: a page after an id
SELECT id, last_error FROM outbox_dlq_events
 WHERE status IN (?)
   AND event_type = ?
   AND source = ?
   AND id > ?
 ORDER BY id
 LIMIT ?;
-- args: [MOVED a consumer [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 100]

-- ConsoleOutboxEvent
SELECT status, retry_count, created_at, updated_at FROM outbox_events WHERE id = ?1;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

