SELECT next_retry_at FROM outbox_events
 WHERE status = 'PENDING' AND event_type = ? AND next_retry_at > ? AND next_retry_at > created_at
 ORDER BY next_retry_at
 LIMIT 1
