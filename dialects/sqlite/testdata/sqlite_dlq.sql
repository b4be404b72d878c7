-- DLQGet
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at FROM outbox_dlq_events WHERE id = ?1;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQGetStatus
SELECT status FROM outbox_dlq_events WHERE id = ?1;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQList (no filter, first page)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, substr(payload, 1, 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, length(payload) AS payload_size
  FROM outbox_dlq_events
 ORDER BY moved_at, id
 LIMIT ?;
-- args: [51]

-- DLQList (every filter, after a key)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, substr(payload, 1, 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, length(payload) AS payload_size
  FROM outbox_dlq_events
 WHERE status IN (?, ?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?
   AND (moved_at, id) > (?, ?)
 ORDER BY moved_at, id
 LIMIT ?;
-- args: [MOVED RESOLVED order-created consumer 1796036400000000 1796040000000000 1796040000000000 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] 51]

-- DLQCount (no filter)
SELECT count(*) FROM outbox_dlq_events;
-- args: []

-- DLQCount (every filter)
SELECT count(*) FROM outbox_dlq_events
 WHERE status IN (?, ?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [MOVED RESOLVED order-created consumer 1796036400000000 1796040000000000]

-- DLQSetStatus
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE id = ? AND status IN (?, ?);
-- args: [TO_RETRY 1796040000000000 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] MOVED RESOLVED]

-- DLQSetStatusMany
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE id IN (?, ?) AND status IN (?, ?);
-- args: [TO_RETRY 1796040000000000 [1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] MOVED RESOLVED]

-- DLQSetStatusWhere (no filter)
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE status IN (?, ?);
-- args: [TO_RETRY 1796040000000000 MOVED RESOLVED]

-- DLQSetStatusWhere (every filter)
UPDATE outbox_dlq_events SET status = ?, updated_at = ?
 WHERE status IN (?, ?)
   AND status IN (?, ?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [TO_RETRY 1796040000000000 MOVED RESOLVED MOVED RESOLVED order-created consumer 1796036400000000 1796040000000000]

-- DLQDelete
DELETE FROM outbox_dlq_events WHERE id = ?1 AND status <> 'IN_PROCESS';
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQDeleteMany
DELETE FROM outbox_dlq_events WHERE id IN (?, ?) AND status <> 'IN_PROCESS';
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQDeleteWhere (no filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS';
-- args: []

-- DLQDeleteWhere (every filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS'
   AND status IN (?, ?)
   AND event_type = ?
   AND source = ?
   AND moved_at >= ?
   AND moved_at < ?;
-- args: [MOVED RESOLVED order-created consumer 1796036400000000 1796040000000000]

-- TransferDLQToOutbox: DLQToRetryProbe
SELECT 1 FROM outbox_dlq_events WHERE status = 'TO_RETRY' LIMIT 1;
-- args: []

-- TransferDLQToOutbox: DLQTransferSelect
SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at
  FROM outbox_dlq_events
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
 LIMIT ?1;
-- args: [1000]

-- TransferDLQToOutbox: DLQTransferInsert
INSERT INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload,
    metadata, status, retry_count, next_retry_at, created_at, updated_at) VALUES (?,?,?,?,?,?,?,'PENDING',0,?,?,?)
ON CONFLICT (id) DO UPDATE
   SET event_type = excluded.event_type, topic = excluded.topic, partition_key = excluded.partition_key,
       message_uuid = excluded.message_uuid, payload = excluded.payload, metadata = excluded.metadata,
       status = 'PENDING', retry_count = 0, next_retry_at = excluded.next_retry_at,
       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
       updated_at = excluded.updated_at;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] a ta k m1 [112] {} 1796040000000000 1796040000000000 1796040000000000]

-- TransferDLQToOutbox: DLQDeleteIDs
DELETE FROM outbox_dlq_events WHERE id IN (?, ?);
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]]

-- DLQDeleteResolved
DELETE FROM outbox_dlq_events WHERE id IN (SELECT id FROM outbox_dlq_events
 WHERE status = 'RESOLVED' AND moved_at < ?1 AND updated_at < ?1 ORDER BY moved_at, id LIMIT ?2);
-- args: [1796040000000000 1000]

-- DLQConsumerPayload
SELECT payload FROM outbox_dlq_events WHERE event_id = ?1 AND source = 'consumer' AND handler_name = ?2;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] h]

