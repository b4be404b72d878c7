MERGE INTO outbox_events e
USING (SELECT :1 AS id, :2 AS status, :3 AS retry_count, SYS_EXTRACT_UTC(:4) AS next_retry_at, :5 AS last_error FROM DUAL
       UNION ALL SELECT :6, :7, :8, SYS_EXTRACT_UTC(:9), :10 FROM DUAL) u
   ON (e.id = u.id)
 WHEN MATCHED THEN UPDATE SET e.status = u.status, e.retry_count = u.retry_count, e.next_retry_at = u.next_retry_at,
      e.last_error = TO_CLOB(u.last_error), e.first_failed_at = COALESCE(e.first_failed_at, SYS_EXTRACT_UTC(:11)),
      e.claim_token = NULL, e.claimed_at = NULL, e.updated_at = SYS_EXTRACT_UTC(:12)
      WHERE e.claim_token = :13 AND e.status = 'IN_PROCESS'
/
-- args: [0x01000000000070000000000000000000, "PENDING", 1, 2026-11-30T12:00:01Z, "boom", 0x02000000000070000000000000000000, "FAILED", 5, 2026-11-30T12:00:00Z, "bang", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0xFF000000000070000000000000000000]
