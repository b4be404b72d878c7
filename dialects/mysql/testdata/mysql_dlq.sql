-- DLQGet
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at FROM outbox_dlq_events WHERE id = ?;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQGetStatus
SELECT status FROM outbox_dlq_events WHERE id = ?;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQList (no filter, first page)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, SUBSTRING(payload, 1, 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, LENGTH(payload) AS payload_size
  FROM outbox_dlq_events
 ORDER BY moved_at, id
 LIMIT ?;
-- args: [51]

-- DLQList (every filter, after a key)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, SUBSTRING(payload, 1, 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, LENGTH(payload) AS payload_size
  FROM outbox_dlq_events
 WHERE status IN (?,?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?
   AND (moved_at > ? OR (moved_at = ? AND id > ?))
 ORDER BY moved_at, id
 LIMIT ?;
-- args: [MOVED RESOLVED order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 51]

-- DLQCount (no filter)
SELECT count(*) FROM outbox_dlq_events;
-- args: []

-- DLQCount (every filter)
SELECT count(*) FROM outbox_dlq_events
 WHERE status IN (?,?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [MOVED RESOLVED order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQSetStatus
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE id = ? AND status IN (?,?);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] MOVED RESOLVED]

-- DLQSetStatusMany
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE id IN (?,?) AND status IN (?,?);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] MOVED RESOLVED]

-- DLQSetStatusWhere (no filter)
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE status IN (?,?);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC MOVED RESOLVED]

-- DLQSetStatusWhere (every filter)
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE status IN (?,?)
   AND status IN (?,?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC MOVED RESOLVED MOVED RESOLVED order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQDelete
DELETE FROM outbox_dlq_events WHERE id = ? AND status <> 'IN_PROCESS';
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQDeleteMany
DELETE FROM outbox_dlq_events WHERE id IN (?,?) AND status <> 'IN_PROCESS';
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQDeleteWhere (no filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS';
-- args: []

-- DLQDeleteWhere (every filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS'
   AND status IN (?,?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [MOVED RESOLVED order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQDeleteResolved
DELETE FROM outbox_dlq_events WHERE status = 'RESOLVED' AND moved_at < ? AND updated_at < ?
 ORDER BY moved_at, id
 LIMIT ?;
-- args: [2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 1000]

