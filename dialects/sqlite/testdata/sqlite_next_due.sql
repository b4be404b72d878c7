SELECT next_retry_at FROM outbox_events
 WHERE status = 'PENDING' AND event_type = ?1 AND next_retry_at > ?2 AND next_retry_at > created_at
 ORDER BY next_retry_at
 LIMIT 1
