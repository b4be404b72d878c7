-- InboxInsert
INSERT INTO inbox_events (consumer, event_id, processed_at) VALUES (?1, ?2, ?3)
ON CONFLICT DO NOTHING;
-- args: [c id-1 1796040000000000]

-- InboxInsertMany
INSERT INTO inbox_events (consumer, event_id, processed_at) VALUES (?, ?, ?), (?, ?, ?)
ON CONFLICT DO NOTHING
RETURNING event_id;
-- args: [c id-1 1796040000000000 c id-2 1796040000000000]

-- InboxDeleteBefore
DELETE FROM inbox_events WHERE rowid IN (
    SELECT rowid FROM inbox_events WHERE processed_at < ?1 LIMIT ?2);
-- args: [1796040000000000 1000]

-- PoisonUpsert (an event id)
INSERT INTO outbox_dlq_events AS q (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?1, ?2, 'consumer', ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'MOVED', ?12, ?10, ?11, ?11, ?11, ?11, ?11)
ON CONFLICT (event_id, source, handler_name) DO UPDATE
   SET retry_count = q.retry_count + excluded.retry_count, last_error = excluded.last_error,
       last_failed_at = excluded.last_failed_at, updated_at = excluded.updated_at;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] h a t <nil> m [112] {} e 1796040000000000 1]

-- PoisonUpsert (no event id)
INSERT INTO outbox_dlq_events AS q (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
VALUES (?1, ?2, 'consumer', ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'MOVED', ?12, ?10, ?11, ?11, ?11, ?11, ?11)
ON CONFLICT (message_uuid, source, handler_name) WHERE event_id IS NULL DO UPDATE
   SET retry_count = q.retry_count + excluded.retry_count, last_error = excluded.last_error,
       last_failed_at = excluded.last_failed_at, updated_at = excluded.updated_at;
-- args: [[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] <nil> h a t <nil> m [] {} e 1796040000000000 1]

