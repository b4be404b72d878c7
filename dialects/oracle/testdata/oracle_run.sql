==== Claim: Limit 2, three due rows: fetches two, updates two, commits
-- on the handle given (no transaction of its own)
QUERY SELECT 1 FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2) AND ROWNUM = 1
   args: ["order-created", 2026-11-30T12:00:00Z]
   fetch row 1 of 1
   close cursor (1 of 1 rows fetched)
BEGIN (default)
QUERY SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at
  FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2)
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED
   args: ["order-created", 2026-11-30T12:00:00Z]
   fetch row 1 of 3
   fetch row 2 of 3
   close cursor (2 of 3 rows fetched)
EXEC UPDATE outbox_events SET status = 'IN_PROCESS', claim_token = :1, claimed_at = SYS_EXTRACT_UTC(:2), claimed_by = :3, updated_at = SYS_EXTRACT_UTC(:4)
 WHERE id IN (:5, :6)
   args: [0xFF000000000070000000000000000000, 2026-11-30T12:00:00Z, NULL, 2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0x02000000000070000000000000000000]
   -> 2 rows affected
COMMIT
==> 2 claimed

==== Claim: nothing due: the probe finds nothing, no transaction
-- on the handle given (no transaction of its own)
QUERY SELECT 1 FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2) AND ROWNUM = 1
   args: ["order-created", 2026-11-30T12:00:00Z]
   fetch: no more rows
   close cursor (0 of 0 rows fetched)
==> 0 claimed

==== Claim: the update fails: rolls back
-- on the handle given (no transaction of its own)
QUERY SELECT 1 FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2) AND ROWNUM = 1
   args: ["order-created", 2026-11-30T12:00:00Z]
   fetch row 1 of 1
   close cursor (1 of 1 rows fetched)
BEGIN (default)
QUERY SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at
  FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2)
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED
   args: ["order-created", 2026-11-30T12:00:00Z]
   fetch row 1 of 1
   fetch: no more rows
   close cursor (1 of 1 rows fetched)
EXEC UPDATE outbox_events SET status = 'IN_PROCESS', claim_token = :1, claimed_at = SYS_EXTRACT_UTC(:2), claimed_by = :3, updated_at = SYS_EXTRACT_UTC(:4)
 WHERE id IN (:5)
   args: [0xFF000000000070000000000000000000, 2026-11-30T12:00:00Z, NULL, 2026-11-30T12:00:00Z, 0x01000000000070000000000000000000]
   -> error: ORA-00054: resource busy
ROLLBACK
==> error: ORA-00054: resource busy

==== MarkProcessed: every id marked: no read-back
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2, :3) AND claim_token = :4 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0x02000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 2 rows affected
COMMIT
==> marked [01000000-0000-7000-0000-000000000000 02000000-0000-7000-0000-000000000000]

==== MarkProcessed: one of two still this claim's (the other recovered meanwhile): rolled back, then lock-first
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2, :3) AND claim_token = :4 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0x02000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 1 rows affected
ROLLBACK
BEGIN (default)
QUERY SELECT id FROM outbox_events
 WHERE id IN (:1, :2) AND claim_token = :3 AND status = 'IN_PROCESS' FOR UPDATE
   args: [0x01000000000070000000000000000000, 0x02000000000070000000000000000000, 0xFF000000000070000000000000000000]
   fetch row 1 of 1
   fetch: no more rows
   close cursor (1 of 1 rows fetched)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2) AND claim_token = :3 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x02000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 1 rows affected
COMMIT
==> marked [02000000-0000-7000-0000-000000000000]

==== MarkProcessedClaims: two claims, every id marked: one transaction, no read-back
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2, :3) AND claim_token = :4 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0x02000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 2 rows affected
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2) AND claim_token = :3 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x03000000000070000000000000000000, 0x0F000000000000000000000000000000]
   -> 1 rows affected
COMMIT
==> marked [01000000-0000-7000-0000-000000000000 02000000-0000-7000-0000-000000000000 03000000-0000-7000-0000-000000000000]

==== MarkProcessedClaims: the first claim stale (recovered meanwhile): rolled back, then MarkProcessed per claim
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2) AND claim_token = :3 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 0 rows affected
ROLLBACK
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2) AND claim_token = :3 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0xFF000000000070000000000000000000]
   -> 0 rows affected
ROLLBACK
BEGIN (default)
QUERY SELECT id FROM outbox_events
 WHERE id IN (:1) AND claim_token = :2 AND status = 'IN_PROCESS' FOR UPDATE
   args: [0x01000000000070000000000000000000, 0xFF000000000070000000000000000000]
   fetch: no more rows
   close cursor (0 of 0 rows fetched)
COMMIT
BEGIN (default)
EXEC UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2) AND claim_token = :3 AND status = 'IN_PROCESS'
   args: [2026-11-30T12:00:00Z, 0x03000000000070000000000000000000, 0x0F000000000000000000000000000000]
   -> 1 rows affected
COMMIT
==> marked [03000000-0000-7000-0000-000000000000]

==== MoveToDLQ: limit 2, three FAILED rows: locks two, copies, deletes, commits
-- on the handle given (no transaction of its own)
QUERY SELECT 1 FROM outbox_events WHERE status = 'FAILED' AND ROWNUM = 1
   args: []
   fetch row 1 of 1
   close cursor (1 of 1 rows fetched)
BEGIN (default)
QUERY SELECT id FROM outbox_events
 WHERE status = 'FAILED'
 ORDER BY updated_at
   FOR UPDATE SKIP LOCKED
   args: []
   fetch row 1 of 3
   fetch row 2 of 3
   close cursor (2 of 3 rows fetched)
EXEC INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', ' ', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, SYS_EXTRACT_UTC(:1), SYS_EXTRACT_UTC(:2)
  FROM outbox_events
 WHERE id IN (:3, :4) AND status = 'FAILED'
   args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000070000000000000000000, 0x02000000000070000000000000000000]
   -> 2 rows affected
EXEC DELETE FROM outbox_events WHERE id IN (:1, :2) AND status = 'FAILED'
   args: [0x01000000000070000000000000000000, 0x02000000000070000000000000000000]
   -> 2 rows affected
COMMIT
==> 2 moved

==== TransferDLQToOutbox: two rows of one event (latest moved wins), one without event id
-- on the handle given (no transaction of its own)
QUERY SELECT 1 FROM outbox_dlq_events WHERE status = 'TO_RETRY' AND ROWNUM = 1
   args: []
   fetch row 1 of 1
   close cursor (1 of 1 rows fetched)
BEGIN (default)
QUERY SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at
  FROM outbox_dlq_events
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
   FOR UPDATE SKIP LOCKED
   args: []
   fetch row 1 of 3
   fetch row 2 of 3
   fetch row 3 of 3
   fetch: no more rows
   close cursor (3 of 3 rows fetched)
EXEC UPDATE outbox_events SET event_type = :1, topic = :2, partition_key = :3,
       message_uuid = :4, payload = :5, metadata = :6,
       status = 'PENDING', retry_count = 0, next_retry_at = SYS_EXTRACT_UTC(:7),
       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL, updated_at = SYS_EXTRACT_UTC(:8)
 WHERE id = :9
   args: ["order-created", "orders", "k", "m-new", 0x6E6577, "{\"a\":\"2\"}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000070000000000000000000]
   -> 1 rows affected
EXEC UPDATE outbox_events SET event_type = :1, topic = :2, partition_key = :3,
       message_uuid = :4, payload = :5, metadata = :6,
       status = 'PENDING', retry_count = 0, next_retry_at = SYS_EXTRACT_UTC(:7),
       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL, updated_at = SYS_EXTRACT_UTC(:8)
 WHERE id = :9
   args: ["order-paid", "payments", NULL, "m3", 0x, "{}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x13000000000070000000000000000000]
   -> 0 rows affected
EXEC INSERT INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at, updated_at)
VALUES (:1, :2, :3, :4, :5, :6, :7, 'PENDING', 0, SYS_EXTRACT_UTC(:8), SYS_EXTRACT_UTC(:9), SYS_EXTRACT_UTC(:10))
   args: [0x13000000000070000000000000000000, "order-paid", "payments", NULL, "m3", 0x, "{}", 2026-11-30T12:00:00Z, 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z]
   -> 1 rows affected
EXEC DELETE FROM outbox_dlq_events WHERE id IN (:1, :2, :3)
   args: [0x11000000000070000000000000000000, 0x12000000000070000000000000000000, 0x13000000000070000000000000000000]
   -> 3 rows affected
COMMIT
==> 3 DLQ rows moved

==== AcquireLease: taken
-- on the handle given (no transaction of its own)
EXEC MERGE INTO outbox_jobs j
USING (SELECT :1 AS name, :2 AS locked_by, SYS_EXTRACT_UTC(:3) AS locked_at, SYS_EXTRACT_UTC(:4) AS lock_until FROM DUAL) s
   ON (j.name = s.name)
 WHEN MATCHED THEN UPDATE SET j.locked_by = s.locked_by, j.locked_at = s.locked_at, j.lock_until = s.lock_until
      WHERE j.lock_until <= s.locked_at
 WHEN NOT MATCHED THEN INSERT (name, locked_by, locked_at, lock_until)
      VALUES (s.name, s.locked_by, s.locked_at, s.lock_until)
   args: ["j", "o", 2026-11-30T12:00:00Z, 2026-11-30T12:01:00Z]
   -> 1 rows affected
==> taken: true

==== AcquireLease: another instance inserted it first (ORA-00001): not taken
-- on the handle given (no transaction of its own)
EXEC MERGE INTO outbox_jobs j
USING (SELECT :1 AS name, :2 AS locked_by, SYS_EXTRACT_UTC(:3) AS locked_at, SYS_EXTRACT_UTC(:4) AS lock_until FROM DUAL) s
   ON (j.name = s.name)
 WHEN MATCHED THEN UPDATE SET j.locked_by = s.locked_by, j.locked_at = s.locked_at, j.lock_until = s.lock_until
      WHERE j.lock_until <= s.locked_at
 WHEN NOT MATCHED THEN INSERT (name, locked_by, locked_at, lock_until)
      VALUES (s.name, s.locked_by, s.locked_at, s.lock_until)
   args: ["j", "o", 2026-11-30T12:00:00Z, 2026-11-30T12:01:00Z]
   -> error: ORA-00001: unique constraint (X.SYS_C001) violated
==> taken: false

==== InboxRecordMany (default namespace): new, present, inserted concurrently (ORA-00001)
-- on the handle given (no transaction of its own)
EXEC MERGE INTO inbox_events i
USING (SELECT :1 AS consumer, :2 AS event_id, SYS_EXTRACT_UTC(:3) AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)
   args: [" ", "a", 2026-11-30T12:00:00Z]
   -> 1 rows affected
-- on the handle given (no transaction of its own)
EXEC MERGE INTO inbox_events i
USING (SELECT :1 AS consumer, :2 AS event_id, SYS_EXTRACT_UTC(:3) AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)
   args: [" ", "b", 2026-11-30T12:00:00Z]
   -> 0 rows affected
-- on the handle given (no transaction of its own)
EXEC MERGE INTO inbox_events i
USING (SELECT :1 AS consumer, :2 AS event_id, SYS_EXTRACT_UTC(:3) AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)
   args: [" ", "c", 2026-11-30T12:00:00Z]
   -> error: ORA-00001: unique constraint violated
==> new [a]

==== Exec
BEGIN (default)
EXEC DELETE FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:2) AND ROWNUM <= :3)
   args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]
   -> 7 rows affected
COMMIT
==> 7 rows

==== Exec: a deadlock victim (ORA-00060) is rolled back and run again
BEGIN (default)
EXEC DELETE FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:2) AND ROWNUM <= :3)
   args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]
   -> error: ORA-00060: deadlock detected while waiting for resource
ROLLBACK
BEGIN (default)
EXEC DELETE FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:2) AND ROWNUM <= :3)
   args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]
   -> 7 rows affected
COMMIT
==> 7 rows

==== Exec: any other error is returned at once
BEGIN (default)
EXEC DELETE FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:2) AND ROWNUM <= :3)
   args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]
   -> error: ORA-00942: table or view does not exist
ROLLBACK
==> error: ORA-00942: table or view does not exist

