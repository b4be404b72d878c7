-- DLQGet
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at FROM outbox_dlq_events WHERE id = $1;
-- args: [01000000-0000-0000-0000-000000000000]

-- DLQGetStatus
SELECT status FROM outbox_dlq_events WHERE id = $1;
-- args: [01000000-0000-0000-0000-000000000000]

-- DLQList (no filter, first page)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, substring(payload FROM 1 FOR 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, octet_length(payload) AS payload_size
  FROM outbox_dlq_events
 ORDER BY moved_at, id
 LIMIT $1;
-- args: [51]

-- DLQList (every filter, after a key)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, substring(payload FROM 1 FOR 4096) AS payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, octet_length(payload) AS payload_size
  FROM outbox_dlq_events
 WHERE status = ANY($1::text[])
   AND event_type = $2
   AND source = $3
   AND moved_at >= $4
   AND moved_at < $5
   AND (moved_at, id) > ($6, $7)
 ORDER BY moved_at, id
 LIMIT $8;
-- args: [[MOVED RESOLVED] order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 51]

-- DLQCount (no filter)
SELECT count(*) FROM outbox_dlq_events;
-- args: []

-- DLQCount (every filter)
SELECT count(*) FROM outbox_dlq_events
 WHERE status = ANY($1::text[])
   AND event_type = $2
   AND source = $3
   AND moved_at >= $4
   AND moved_at < $5;
-- args: [[MOVED RESOLVED] order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQSetStatus
UPDATE outbox_dlq_events SET status = $1, updated_at = $2
 WHERE id = $3 AND status = ANY($4::text[]);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 [MOVED RESOLVED]]

-- DLQSetStatusMany
UPDATE outbox_dlq_events SET status = $1, updated_at = $2
 WHERE id = ANY($3::uuid[]) AND status = ANY($4::text[]);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC [01000000-0000-0000-0000-000000000000 02000000-0000-0000-0000-000000000000] [MOVED RESOLVED]]

-- DLQSetStatusWhere (no filter)
UPDATE outbox_dlq_events SET status = $1, updated_at = $2
 WHERE status = ANY($3::text[]);
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC [MOVED RESOLVED]]

-- DLQSetStatusWhere (every filter)
UPDATE outbox_dlq_events SET status = $1, updated_at = $2
 WHERE status = ANY($3::text[])
   AND status = ANY($4::text[])
   AND event_type = $5
   AND source = $6
   AND moved_at >= $7
   AND moved_at < $8;
-- args: [TO_RETRY 2026-11-30 12:00:00 +0000 UTC [MOVED RESOLVED] [MOVED RESOLVED] order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQDelete
DELETE FROM outbox_dlq_events WHERE id = $1 AND status <> 'IN_PROCESS';
-- args: [01000000-0000-0000-0000-000000000000]

-- DLQDeleteMany
DELETE FROM outbox_dlq_events WHERE id = ANY($1::uuid[]) AND status <> 'IN_PROCESS';
-- args: [[01000000-0000-0000-0000-000000000000 02000000-0000-0000-0000-000000000000]]

-- DLQDeleteWhere (no filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS';
-- args: []

-- DLQDeleteWhere (every filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS'
   AND status = ANY($1::text[])
   AND event_type = $2
   AND source = $3
   AND moved_at >= $4
   AND moved_at < $5;
-- args: [[MOVED RESOLVED] order-created consumer 2026-11-30 11:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC]

-- DLQTransferToOutbox
WITH picked AS MATERIALIZED (
    SELECT id, COALESCE(event_id, id) AS event_id, event_type, topic, partition_key, message_uuid,
           payload, metadata, created_at, moved_at
      FROM outbox_dlq_events
     WHERE status = 'TO_RETRY'
     ORDER BY moved_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
armed AS (
    INSERT INTO outbox_events AS e (id, event_type, topic, partition_key, message_uuid, payload,
        metadata, status, retry_count, next_retry_at, created_at, updated_at)
    SELECT DISTINCT ON (event_id) event_id, event_type, topic, partition_key, message_uuid, payload,
           metadata - 'oncebox_event_id' - 'oncebox_event_type',
           'PENDING', 0, $1, created_at, $1
      FROM picked
     ORDER BY event_id, moved_at DESC, id DESC
    ON CONFLICT (id) DO UPDATE
       SET event_type = EXCLUDED.event_type, topic = EXCLUDED.topic, partition_key = EXCLUDED.partition_key,
           message_uuid = EXCLUDED.message_uuid, payload = EXCLUDED.payload, metadata = EXCLUDED.metadata,
           status = 'PENDING', retry_count = 0, next_retry_at = EXCLUDED.next_retry_at,
           claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
           updated_at = EXCLUDED.updated_at
)
DELETE FROM outbox_dlq_events q
 USING picked
 WHERE q.id = picked.id;
-- args: [2026-11-30 12:00:00 +0000 UTC 1000]

-- DLQDeleteResolved
DELETE FROM outbox_dlq_events WHERE id IN (SELECT id FROM outbox_dlq_events
 WHERE status = 'RESOLVED' AND moved_at < $1 AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED);
-- args: [2026-11-30 12:00:00 +0000 UTC 1000]

-- DLQConsumerPayload
SELECT payload FROM outbox_dlq_events WHERE event_id = $1 AND source = 'consumer' AND handler_name = $2;
-- args: [01000000-0000-0000-0000-000000000000 h]

