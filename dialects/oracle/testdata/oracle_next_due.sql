SELECT * FROM (SELECT next_retry_at FROM svc.p_outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at > SYS_EXTRACT_UTC(:2) AND next_retry_at > created_at
 ORDER BY next_retry_at)
                        WHERE ROWNUM <= 1
