-- MigrationLock
DECLARE
  h VARCHAR2(128);
  r INTEGER;
BEGIN
  DBMS_LOCK.ALLOCATE_UNIQUE('oncebox-migrate:ONCEBOX_MIGRATIONS', h);
  r := DBMS_LOCK.REQUEST(h, DBMS_LOCK.X_MODE, 600, FALSE);
  IF r NOT IN (0, 4) THEN
    RAISE_APPLICATION_ERROR(-20001, 'oncebox: DBMS_LOCK.REQUEST returned ' || r);
  END IF;
END;
/
-- args: []

-- MigrationUnlock
DECLARE
  h VARCHAR2(128);
  r INTEGER;
BEGIN
  DBMS_LOCK.ALLOCATE_UNIQUE('oncebox-migrate:ONCEBOX_MIGRATIONS', h);
  r := DBMS_LOCK.RELEASE(h);
  IF r NOT IN (0, 4) THEN
    RAISE_APPLICATION_ERROR(-20001, 'oncebox: DBMS_LOCK.RELEASE returned ' || r);
  END IF;
END;
/
-- args: []

-- MigrationsTableCreate
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE oncebox_migrations (
    version    NUMBER(10)         PRIMARY KEY,
    name       VARCHAR2(255 CHAR) NOT NULL,
    applied_at TIMESTAMP(6)       NOT NULL
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE <> -955 THEN RAISE; END IF;
END;
/
-- args: []

-- MigrationsSelect
SELECT version FROM oncebox_migrations ORDER BY version
/
-- args: []

-- MigrationsInsert
INSERT INTO oncebox_migrations (version, name, applied_at) VALUES (:1, :2, SYS_EXTRACT_UTC(:3))
/
-- args: [1, "0001_init.sql", 2026-11-30T12:00:00Z]

-- EventsInsert (one row)
INSERT INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at, updated_at)
VALUES (:1, :2, :3, :4, :5, :6, :7, 'PENDING', 0, SYS_EXTRACT_UTC(:8), SYS_EXTRACT_UTC(:9), SYS_EXTRACT_UTC(:10))
/
-- args: [0x01000000000000000000000000000000, "a", "t", NULL, "m", 0x, "{}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z]

-- EventsInsert (two rows)
INSERT ALL
  INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at, updated_at)
    VALUES (:1, :2, :3, :4, :5, :6, :7, 'PENDING', 0, SYS_EXTRACT_UTC(:8), SYS_EXTRACT_UTC(:9), SYS_EXTRACT_UTC(:10))
  INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at, updated_at)
    VALUES (:11, :12, :13, :14, :15, :16, :17, 'PENDING', 0, SYS_EXTRACT_UTC(:18), SYS_EXTRACT_UTC(:19), SYS_EXTRACT_UTC(:20))
SELECT 1 FROM DUAL
/
-- args: [0x01000000000000000000000000000000, "a", "t", "k", "m1", 0x70, "{}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x02000000000000000000000000000000, "a", "t", NULL, "m2", 0x, "{}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z]

-- EventsDueTypes (discovery, first page)
WITH t (event_type, n) AS (
    SELECT MIN(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING'
  UNION ALL
    SELECT (SELECT MIN(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < :1
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM outbox_events e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= SYS_EXTRACT_UTC(:2))
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type
/
-- args: [100, 2026-11-30T12:00:00Z]

-- EventsDueTypes (discovery, next page)
WITH t (event_type, n) AS (
    SELECT MIN(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING' AND event_type > :1
  UNION ALL
    SELECT (SELECT MIN(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < :2
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM outbox_events e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= SYS_EXTRACT_UTC(:3))
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type
/
-- args: ["b", 100, 2026-11-30T12:00:00Z]

-- Claim probe: EventsClaimProbe (plain read, idle polls end here)
SELECT 1 FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2) AND ROWNUM = 1
/
-- args: ["order-created", 2026-11-30T12:00:00Z]

-- Claim 1/2: EventsClaimLock (cursor)
SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at
  FROM outbox_events
 WHERE status = 'PENDING' AND event_type = :1 AND next_retry_at <= SYS_EXTRACT_UTC(:2)
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED
/
-- args: ["order-created", 2026-11-30T12:00:00Z]

-- Claim 2/2: EventsClaimUpdate
UPDATE outbox_events SET status = 'IN_PROCESS', claim_token = :1, claimed_at = SYS_EXTRACT_UTC(:2), claimed_by = :3, updated_at = SYS_EXTRACT_UTC(:4)
 WHERE id IN (:5, :6)
/
-- args: [0x0F000000000000000000000000000000, 2026-11-30T12:00:00Z, "host-1", 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000]

-- Claim by key 1/3: EventsClaimCandidates (plain read, idle polls end here)
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = :1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS (
    SELECT DISTINCT y.partition_key FROM (
        SELECT * FROM (SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = :2 AND x.next_retry_at > SYS_EXTRACT_UTC(:3) AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at)
                        WHERE ROWNUM <= 10000) y
     WHERE y.retry_count > 0
),
w AS (
    SELECT * FROM (SELECT r.id, r.partition_key, r.next_retry_at FROM (
        SELECT q.id, q.partition_key, q.next_retry_at,
               ROW_NUMBER() OVER (PARTITION BY q.partition_key ORDER BY q.next_retry_at, q.id) AS wn
          FROM (SELECT s.id, s.partition_key, s.next_retry_at FROM (
        SELECT * FROM (SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = :4 AND next_retry_at <= SYS_EXTRACT_UTC(:5)
         ORDER BY next_retry_at, id)
                        WHERE ROWNUM <= 1000) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)))) q) r
     WHERE r.partition_key IS NULL OR r.wn <= 1
     ORDER BY r.next_retry_at, r.id)
                        WHERE ROWNUM <= 100
),
wr AS (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT MIN(b.id) FROM outbox_events b
                        WHERE b.event_type = :6 AND b.partition_key = wr.partition_key AND b.status = 'PENDING'
                          AND b.id NOT IN (SELECT id FROM w)) END AS stop1
      FROM wr
),
wt AS (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
)
SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= SYS_EXTRACT_UTC(:7)
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
UNION ALL
SELECT NULL, NULL, NULL FROM DUAL
 WHERE (SELECT COUNT(*) FROM busy) < 100
   AND (SELECT COUNT(*) FROM (
        SELECT * FROM (SELECT 1 AS one FROM outbox_events c
         WHERE c.status = 'PENDING' AND c.event_type = :8 AND c.next_retry_at <= SYS_EXTRACT_UTC(:9)
         ORDER BY c.next_retry_at, c.id)
                        WHERE ROWNUM <= 1000) cc) >= 1000
 ORDER BY next_retry_at, id
/
-- args: ["order-created", "order-created", 2026-11-30T12:00:00Z, "order-created", 2026-11-30T12:00:00Z, "order-created", 2026-11-30T12:00:00Z, "order-created", 2026-11-30T12:00:00Z]

-- Claim by key, on-failure block 1/3: EventsClaimCandidates
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = :1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS (
    SELECT DISTINCT y.partition_key FROM (
        SELECT * FROM (SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = :2 AND x.next_retry_at > SYS_EXTRACT_UTC(:3) AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at)
                        WHERE ROWNUM <= 10000) y
     WHERE y.retry_count > 0
),
blocked AS (
    SELECT bf.partition_key, bf.id FROM (
        SELECT * FROM (SELECT f.partition_key, f.id FROM outbox_events f
         WHERE f.status = 'FAILED' AND f.event_type = :4 AND f.partition_key IS NOT NULL
         ORDER BY f.updated_at)
                        WHERE ROWNUM <= 10000) bf
    UNION ALL
    SELECT bq.partition_key, bq.event_id FROM (
        SELECT * FROM (SELECT q.partition_key, q.event_id FROM outbox_dlq_events q
         WHERE q.event_type = :5 AND q.partition_key IS NOT NULL
           AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
         ORDER BY q.partition_key, q.event_id)
                        WHERE ROWNUM <= 10000) bq
),
w AS (
    SELECT * FROM (SELECT r.id, r.partition_key, r.next_retry_at FROM (
        SELECT q.id, q.partition_key, q.next_retry_at,
               ROW_NUMBER() OVER (PARTITION BY q.partition_key ORDER BY q.next_retry_at, q.id) AS wn
          FROM (SELECT s.id, s.partition_key, s.next_retry_at FROM (
        SELECT * FROM (SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = :6 AND next_retry_at <= SYS_EXTRACT_UTC(:7)
         ORDER BY next_retry_at, id)
                        WHERE ROWNUM <= 1000) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)
            AND NOT EXISTS (SELECT 1 FROM blocked k WHERE k.partition_key = s.partition_key AND k.id < s.id)))) q) r
     WHERE r.partition_key IS NULL OR r.wn <= 1
     ORDER BY r.next_retry_at, r.id)
                        WHERE ROWNUM <= 100
),
wr AS (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT MIN(b.id) FROM outbox_events b
                        WHERE b.event_type = :8 AND b.partition_key = wr.partition_key AND b.status = 'PENDING'
                          AND b.id NOT IN (SELECT id FROM w)) END AS stop1
      FROM wr
),
wt AS (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
)
SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id)
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = :9 AND f.partition_key = wt.partition_key
                          AND f.status = 'FAILED' AND f.id < wt.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = :10 AND q.partition_key = wt.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < wt.id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= SYS_EXTRACT_UTC(:11)
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = :12 AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = :13 AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
UNION ALL
SELECT NULL, NULL, NULL FROM DUAL
 WHERE (SELECT COUNT(*) FROM busy) < 100
   AND (SELECT COUNT(*) FROM (
        SELECT * FROM (SELECT 1 AS one FROM outbox_events c
         WHERE c.status = 'PENDING' AND c.event_type = :14 AND c.next_retry_at <= SYS_EXTRACT_UTC(:15)
         ORDER BY c.next_retry_at, c.id)
                        WHERE ROWNUM <= 1000) cc) >= 1000
 ORDER BY next_retry_at, id
/
-- args: ["order-created", "order-created", 2026-11-30T12:00:00Z, "order-created", "order-created", "order-created", 2026-11-30T12:00:00Z, "order-created", "order-created", "order-created", 2026-11-30T12:00:00Z, "order-created", "order-created", "order-created", 2026-11-30T12:00:00Z]

-- Claim by key 1/3 (window cut, candidates short): EventsClaimWalk
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = :1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
walk (partition_key, n) AS (
    SELECT (SELECT MIN(k.partition_key) FROM outbox_events k
                        WHERE k.event_type = :2 AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')), 1 FROM DUAL
    UNION ALL
    SELECT (SELECT MIN(k.partition_key) FROM outbox_events k
                        WHERE k.event_type = :3 AND k.partition_key > wk.partition_key AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')), wk.n + 1
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < 1000
)
SELECT * FROM (SELECT h.id, h.partition_key, h.next_retry_at FROM (
        SELECT wk.partition_key, (SELECT MIN(b.id) FROM outbox_events b
                        WHERE b.event_type = :4 AND b.partition_key = wk.partition_key AND b.status = 'PENDING') AS head
          FROM walk wk
         WHERE wk.partition_key IS NOT NULL) v
      JOIN outbox_events h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)
       AND h.status = 'PENDING' AND h.next_retry_at <= SYS_EXTRACT_UTC(:5)
     ORDER BY h.next_retry_at, h.id)
                        WHERE ROWNUM <= 100
/
-- args: ["order-created", "order-created", "order-created", "order-created", 2026-11-30T12:00:00Z]

-- Claim by key, on-failure block 1/3 (window cut, candidates short): EventsClaimWalk
WITH busy AS (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = :1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
walk (partition_key, n) AS (
    SELECT (SELECT MIN(k.partition_key) FROM outbox_events k
                        WHERE k.event_type = :2 AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')), 1 FROM DUAL
    UNION ALL
    SELECT (SELECT MIN(k.partition_key) FROM outbox_events k
                        WHERE k.event_type = :3 AND k.partition_key > wk.partition_key AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')), wk.n + 1
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < 1000
)
SELECT * FROM (SELECT h.id, h.partition_key, h.next_retry_at FROM (
        SELECT wk.partition_key, (SELECT MIN(b.id) FROM outbox_events b
                        WHERE b.event_type = :4 AND b.partition_key = wk.partition_key AND b.status = 'PENDING') AS head
          FROM walk wk
         WHERE wk.partition_key IS NOT NULL) v
      JOIN outbox_events h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)
       AND h.status = 'PENDING' AND h.next_retry_at <= SYS_EXTRACT_UTC(:5)
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = :6 AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = :7 AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
     ORDER BY h.next_retry_at, h.id)
                        WHERE ROWNUM <= 100
/
-- args: ["order-created", "order-created", "order-created", "order-created", 2026-11-30T12:00:00Z, "order-created", "order-created"]

-- Claim by key 2/3: EventsClaimLockCandidates (cursor)
SELECT id, topic, partition_key, message_uuid, payload, metadata, retry_count, next_retry_at, first_failed_at
  FROM outbox_events
 WHERE id IN (:1, :2) AND status = 'PENDING' AND next_retry_at <= SYS_EXTRACT_UTC(:3)
 ORDER BY next_retry_at, id
   FOR UPDATE SKIP LOCKED
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 2026-11-30T12:00:00Z]

-- MarkProcessed 1/2: EventsMarkProcessed
UPDATE outbox_events SET status = 'PROCESSED', updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2, :3) AND claim_token = :4 AND status = 'IN_PROCESS'
/
-- args: [2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 0x0F000000000000000000000000000000]

-- MarkProcessed (stale): EventsLockClaimed
SELECT id FROM outbox_events
 WHERE id IN (:1, :2) AND claim_token = :3 AND status = 'IN_PROCESS' FOR UPDATE
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 0x0F000000000000000000000000000000]

-- MarkProcessed, outbox.finalize: delete: EventsMarkProcessed
DELETE FROM outbox_events
 WHERE id IN (:1, :2) AND claim_token = :3 AND status = 'IN_PROCESS'
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 0x0F000000000000000000000000000000]

-- EventsMarkFailed
UPDATE outbox_events
   SET status = CASE id WHEN :1 THEN :2 WHEN :3 THEN :4 END,
       retry_count = CASE id WHEN :5 THEN :6 WHEN :7 THEN :8 END,
       next_retry_at = CASE id WHEN :9 THEN SYS_EXTRACT_UTC(:10) WHEN :11 THEN SYS_EXTRACT_UTC(:12) END,
       last_error = CASE id WHEN :13 THEN TO_CLOB(:14) WHEN :15 THEN TO_CLOB(:16) END,
       first_failed_at = COALESCE(first_failed_at, SYS_EXTRACT_UTC(:17)),
       claim_token = NULL, claimed_at = NULL, updated_at = SYS_EXTRACT_UTC(:18)
 WHERE id IN (:19, :20) AND claim_token = :21 AND status = 'IN_PROCESS'
/
-- args: [0x01000000000000000000000000000000, "PENDING", 0x02000000000000000000000000000000, "FAILED", 0x01000000000000000000000000000000, 1, 0x02000000000000000000000000000000, 5, 0x01000000000000000000000000000000, 2026-11-30T12:00:01Z, 0x02000000000000000000000000000000, 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, "boom", 0x02000000000000000000000000000000, "bang", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 0x0F000000000000000000000000000000]

-- EventsRelease
UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = SYS_EXTRACT_UTC(:1)
 WHERE id IN (:2, :3) AND claim_token = :4 AND status = 'IN_PROCESS'
/
-- args: [2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000, 0x0F000000000000000000000000000000]

-- EventsRecover
UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, updated_at = SYS_EXTRACT_UTC(:1)
 WHERE status = 'IN_PROCESS' AND claimed_at < SYS_EXTRACT_UTC(:2)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'IN_PROCESS' AND claimed_at < SYS_EXTRACT_UTC(:3) AND ROWNUM <= :4)
/
-- args: [2026-11-30T12:00:00Z, 2026-11-30T11:59:00Z, 2026-11-30T11:59:00Z, 1000]

-- MoveToDLQ probe: EventsFailedProbe
SELECT 1 FROM outbox_events WHERE status = 'FAILED' AND ROWNUM = 1
/
-- args: []

-- MoveToDLQ 1/3: EventsMoveLock (cursor)
SELECT id FROM outbox_events
 WHERE status = 'FAILED'
 ORDER BY updated_at
   FOR UPDATE SKIP LOCKED
/
-- args: []

-- MoveToDLQ 2/3: EventsMoveCopy
INSERT INTO outbox_dlq_events (id, event_id, source, handler_name, event_type, topic, partition_key,
    message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
    last_failed_at, moved_at, updated_at)
SELECT id, id, 'publisher', ' ', event_type, topic, partition_key, message_uuid, payload, metadata,
       'MOVED', retry_count, last_error, created_at, first_failed_at, updated_at, SYS_EXTRACT_UTC(:1), SYS_EXTRACT_UTC(:2)
  FROM outbox_events
 WHERE id IN (:3, :4) AND status = 'FAILED'
/
-- args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000]

-- MoveToDLQ 3/3: EventsMoveDelete
DELETE FROM outbox_events WHERE id IN (:1, :2) AND status = 'FAILED'
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000]

-- EventsDeleteProcessed
DELETE FROM outbox_events
 WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_events
                  WHERE status = 'PROCESSED' AND updated_at < SYS_EXTRACT_UTC(:2) AND ROWNUM <= :3)
/
-- args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]

-- AcquireLease: LeaseAcquire
MERGE INTO outbox_jobs j
USING (SELECT :1 AS name, :2 AS locked_by, SYS_EXTRACT_UTC(:3) AS locked_at, SYS_EXTRACT_UTC(:4) AS lock_until FROM DUAL) s
   ON (j.name = s.name)
 WHEN MATCHED THEN UPDATE SET j.locked_by = s.locked_by, j.locked_at = s.locked_at, j.lock_until = s.lock_until
      WHERE j.lock_until <= s.locked_at
 WHEN NOT MATCHED THEN INSERT (name, locked_by, locked_at, lock_until)
      VALUES (s.name, s.locked_by, s.locked_at, s.lock_until)
/
-- args: ["outbox-clean-up", "host-1", 2026-11-30T12:00:00Z, 2026-11-30T12:01:00Z]

-- LeaseRelease
UPDATE outbox_jobs SET lock_until = SYS_EXTRACT_UTC(:1) WHERE name = :2 AND locked_by = :3 AND locked_at = SYS_EXTRACT_UTC(:4)
/
-- args: [2026-11-30T12:01:00Z, "outbox-clean-up", "host-1", 2026-11-30T12:00:00Z]

-- InboxInsert
MERGE INTO inbox_events i
USING (SELECT :1 AS consumer, :2 AS event_id, SYS_EXTRACT_UTC(:3) AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)
/
-- args: ["billing", "e-1", 2026-11-30T12:00:00Z]

-- InboxInsert (default namespace)
MERGE INTO inbox_events i
USING (SELECT :1 AS consumer, :2 AS event_id, SYS_EXTRACT_UTC(:3) AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)
/
-- args: [" ", "e-1", 2026-11-30T12:00:00Z]

-- InboxDeleteBefore
DELETE FROM inbox_events WHERE ROWID IN (SELECT ROWID FROM inbox_events
 WHERE processed_at < SYS_EXTRACT_UTC(:1) AND ROWNUM <= :2)
/
-- args: [2026-11-30T12:00:00Z, 1000]

-- DLQUpsertConsumer (event id)
MERGE INTO outbox_dlq_events q
USING (SELECT :1 AS id, :2 AS event_id, :3 AS handler_name, :4 AS message_uuid, SYS_EXTRACT_UTC(:5) AS failed_at FROM DUAL) s
   ON (CASE WHEN q.event_id IS NOT NULL THEN q.event_id END = s.event_id
       AND CASE WHEN q.event_id IS NOT NULL THEN q.source END = 'consumer'
       AND CASE WHEN q.event_id IS NOT NULL THEN q.handler_name END = s.handler_name)
 WHEN MATCHED THEN UPDATE SET q.retry_count = q.retry_count + :6, q.last_error = :7,
      q.last_failed_at = s.failed_at, q.updated_at = s.failed_at
 WHEN NOT MATCHED THEN INSERT (id, event_id, source, handler_name, event_type, topic, partition_key,
      message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
      last_failed_at, moved_at, updated_at)
      VALUES (s.id, s.event_id, 'consumer', s.handler_name, :8, :9, :10,
      s.message_uuid, :11, :12, 'MOVED', :13, :14,
      s.failed_at, s.failed_at, s.failed_at, s.failed_at, s.failed_at)
/
-- args: [0x02000000000000000000000000000000, 0x01000000000000000000000000000000, "h", "m1", 2026-11-30T12:00:00Z, 1, "boom", "order-created", "orders", "k", 0x70, "{}", 1, "boom"]

-- DLQUpsertConsumer (no event id, handler '')
MERGE INTO outbox_dlq_events q
USING (SELECT :1 AS id, :2 AS event_id, :3 AS handler_name, :4 AS message_uuid, SYS_EXTRACT_UTC(:5) AS failed_at FROM DUAL) s
   ON (CASE WHEN q.event_id IS NULL THEN q.message_uuid END = s.message_uuid
       AND CASE WHEN q.event_id IS NULL THEN q.source END = 'consumer'
       AND CASE WHEN q.event_id IS NULL THEN q.handler_name END = s.handler_name)
 WHEN MATCHED THEN UPDATE SET q.retry_count = q.retry_count + :6, q.last_error = :7,
      q.last_failed_at = s.failed_at, q.updated_at = s.failed_at
 WHEN NOT MATCHED THEN INSERT (id, event_id, source, handler_name, event_type, topic, partition_key,
      message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
      last_failed_at, moved_at, updated_at)
      VALUES (s.id, s.event_id, 'consumer', s.handler_name, :8, :9, :10,
      s.message_uuid, :11, :12, 'MOVED', :13, :14,
      s.failed_at, s.failed_at, s.failed_at, s.failed_at, s.failed_at)
/
-- args: [0x02000000000000000000000000000000, NULL, " ", "m1", 2026-11-30T12:00:00Z, 1, "boom", "order-created", "orders", NULL, 0x, "{}", 1, "boom"]

-- DLQConsumerPayload (handler '')
SELECT payload FROM outbox_dlq_events
 WHERE CASE WHEN event_id IS NOT NULL THEN event_id END = :1
   AND CASE WHEN event_id IS NOT NULL THEN source END = 'consumer'
   AND CASE WHEN event_id IS NOT NULL THEN handler_name END = :2
/
-- args: [0x01000000000000000000000000000000, " "]

-- Backlog
SELECT 'outbox', event_type, status, count(*), min(next_retry_at) FROM outbox_events GROUP BY event_type, status UNION ALL SELECT 'dlq', source, status, count(*), CAST(NULL AS TIMESTAMP(6)) FROM outbox_dlq_events GROUP BY source, status
/
-- args: []

-- DLQGet
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at FROM outbox_dlq_events WHERE id = :1
/
-- args: [0x01000000000000000000000000000000]

-- DLQGetStatus
SELECT status FROM outbox_dlq_events WHERE id = :1
/
-- args: [0x01000000000000000000000000000000]

-- DLQList (no filter, first page)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, NVL(DBMS_LOB.GETLENGTH(payload), 0) AS payload_size
  FROM outbox_dlq_events
 ORDER BY moved_at, id
 FETCH FIRST :1 ROWS ONLY
/
-- args: [51]

-- DLQList (every filter, after a key)
SELECT id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at, NVL(DBMS_LOB.GETLENGTH(payload), 0) AS payload_size
  FROM outbox_dlq_events
 WHERE status IN (:1, :2)
   AND event_type = :3
   AND source = :4
   AND moved_at >= SYS_EXTRACT_UTC(:5)
   AND moved_at < SYS_EXTRACT_UTC(:6)
   AND (moved_at > SYS_EXTRACT_UTC(:7) OR (moved_at = SYS_EXTRACT_UTC(:8) AND id > :9))
 ORDER BY moved_at, id
 FETCH FIRST :10 ROWS ONLY
/
-- args: ["MOVED", "RESOLVED", "order-created", "consumer", 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 51]

-- DLQCount (no filter)
SELECT count(*) FROM outbox_dlq_events
/
-- args: []

-- DLQCount (every filter)
SELECT count(*) FROM outbox_dlq_events
 WHERE status IN (:1, :2)
   AND event_type = :3
   AND source = :4
   AND moved_at >= SYS_EXTRACT_UTC(:5)
   AND moved_at < SYS_EXTRACT_UTC(:6)
/
-- args: ["MOVED", "RESOLVED", "order-created", "consumer", 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z]

-- DLQSetStatus
UPDATE outbox_dlq_events SET status = :1, updated_at = SYS_EXTRACT_UTC(:2)
 WHERE id = :3 AND status IN (:4, :5)
/
-- args: ["TO_RETRY", 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, "MOVED", "RESOLVED"]

-- DLQSetStatusMany
UPDATE outbox_dlq_events SET status = :1, updated_at = SYS_EXTRACT_UTC(:2)
 WHERE id IN (:3, :4) AND status IN (:5, :6)
/
-- args: ["TO_RETRY", 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000, 0x02000000000000000000000000000000, "MOVED", "RESOLVED"]

-- DLQSetStatusWhere (no filter)
UPDATE outbox_dlq_events SET status = :1, updated_at = SYS_EXTRACT_UTC(:2)
 WHERE status IN (:3, :4)
/
-- args: ["TO_RETRY", 2026-11-30T12:00:00Z, "MOVED", "RESOLVED"]

-- DLQSetStatusWhere (every filter)
UPDATE outbox_dlq_events SET status = :1, updated_at = SYS_EXTRACT_UTC(:2)
 WHERE status IN (:3, :4)
   AND status IN (:5, :6)
   AND event_type = :7
   AND source = :8
   AND moved_at >= SYS_EXTRACT_UTC(:9)
   AND moved_at < SYS_EXTRACT_UTC(:10)
/
-- args: ["TO_RETRY", 2026-11-30T12:00:00Z, "MOVED", "RESOLVED", "MOVED", "RESOLVED", "order-created", "consumer", 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z]

-- DLQDelete
DELETE FROM outbox_dlq_events WHERE id = :1 AND status <> 'IN_PROCESS'
/
-- args: [0x01000000000000000000000000000000]

-- DLQDeleteMany
DELETE FROM outbox_dlq_events WHERE id IN (:1, :2) AND status <> 'IN_PROCESS'
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000]

-- DLQDeleteWhere (no filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS'
/
-- args: []

-- DLQDeleteWhere (every filter)
DELETE FROM outbox_dlq_events
 WHERE status <> 'IN_PROCESS'
   AND status IN (:1, :2)
   AND event_type = :3
   AND source = :4
   AND moved_at >= SYS_EXTRACT_UTC(:5)
   AND moved_at < SYS_EXTRACT_UTC(:6)
/
-- args: ["MOVED", "RESOLVED", "order-created", "consumer", 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z]

-- TransferDLQToOutbox probe: DLQToRetryProbe
SELECT 1 FROM outbox_dlq_events WHERE status = 'TO_RETRY' AND ROWNUM = 1
/
-- args: []

-- TransferDLQToOutbox 1/4: DLQTransferLock (cursor)
SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at
  FROM outbox_dlq_events
 WHERE status = 'TO_RETRY'
 ORDER BY moved_at, id
   FOR UPDATE SKIP LOCKED
/
-- args: []

-- TransferDLQToOutbox 2/4: DLQTransferRearm
UPDATE outbox_events SET event_type = :1, topic = :2, partition_key = :3,
       message_uuid = :4, payload = :5, metadata = :6,
       status = 'PENDING', retry_count = 0, next_retry_at = SYS_EXTRACT_UTC(:7),
       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL, updated_at = SYS_EXTRACT_UTC(:8)
 WHERE id = :9
/
-- args: ["order-created", "orders", "k", "m1", 0x70, "{\"oncebox_event_id\":\"x\"}", 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 0x01000000000000000000000000000000]

-- TransferDLQToOutbox 3/4: DLQTransferInsert (when not re-armed)
INSERT INTO outbox_events (id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, next_retry_at, created_at, updated_at)
VALUES (:1, :2, :3, :4, :5, :6, :7, 'PENDING', 0, SYS_EXTRACT_UTC(:8), SYS_EXTRACT_UTC(:9), SYS_EXTRACT_UTC(:10))
/
-- args: [0x01000000000000000000000000000000, "order-created", "orders", "k", "m1", 0x70, "{\"oncebox_event_id\":\"x\"}", 2026-11-30T12:00:00Z, 2026-11-30T11:00:00Z, 2026-11-30T12:00:00Z]

-- TransferDLQToOutbox 4/4: DLQTransferDelete
DELETE FROM outbox_dlq_events WHERE id IN (:1, :2)
/
-- args: [0x01000000000000000000000000000000, 0x02000000000000000000000000000000]

-- DLQDeleteResolved
DELETE FROM outbox_dlq_events
 WHERE status = 'RESOLVED' AND updated_at < SYS_EXTRACT_UTC(:1)
   AND ROWID IN (SELECT ROWID FROM outbox_dlq_events
                  WHERE status = 'RESOLVED' AND moved_at < SYS_EXTRACT_UTC(:2) AND updated_at < SYS_EXTRACT_UTC(:3) AND ROWNUM <= :4)
/
-- args: [2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 2026-11-30T12:00:00Z, 1000]

-- InstanceHeartbeat
MERGE INTO outbox_instances i
USING (SELECT :1 AS instance_id, SYS_EXTRACT_UTC(:2) AS heartbeat_at FROM DUAL) s
   ON (i.instance_id = s.instance_id)
 WHEN MATCHED THEN UPDATE SET i.heartbeat_at = s.heartbeat_at
 WHEN NOT MATCHED THEN INSERT (instance_id, heartbeat_at) VALUES (s.instance_id, s.heartbeat_at)
/
-- args: ["host-1", 2026-11-30T12:00:00Z]

-- InstanceEnd
DELETE FROM outbox_instances WHERE instance_id = :1
/
-- args: ["host-1"]

-- InstancesDeleteBefore
DELETE FROM outbox_instances WHERE heartbeat_at < SYS_EXTRACT_UTC(:1)
/
-- args: [2026-11-30T11:55:00Z]

-- RecoverStale probe: EventsInProcessProbe (plain read, idle runs end here)
SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP), (SELECT 1 FROM outbox_events WHERE status = 'IN_PROCESS' AND ROWNUM = 1) FROM DUAL
/
-- args: []

-- RecoverStale: EventsRecoverStale
UPDATE outbox_events e SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.claimed_by = NULL, e.updated_at = SYS_EXTRACT_UTC(:1)
 WHERE e.status = 'IN_PROCESS' AND e.claimed_at < SYS_EXTRACT_UTC(:2)
   AND (e.claimed_at < SYS_EXTRACT_UTC(:3)
        OR (e.claimed_by IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM outbox_instances i
                             WHERE i.instance_id = e.claimed_by AND i.heartbeat_at >= SYS_EXTRACT_UTC(:4))))
   AND e.ROWID IN (SELECT s.ROWID FROM outbox_events s
 WHERE s.status = 'IN_PROCESS' AND s.claimed_at < SYS_EXTRACT_UTC(:5)
   AND (s.claimed_at < SYS_EXTRACT_UTC(:6)
        OR (s.claimed_by IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM outbox_instances i
                             WHERE i.instance_id = s.claimed_by AND i.heartbeat_at >= SYS_EXTRACT_UTC(:7))))
   AND ROWNUM <= :8)
/
-- args: [2026-11-30T12:00:00Z, 2026-11-30T11:59:48Z, 2026-11-30T11:55:00Z, 2026-11-30T11:59:48Z, 2026-11-30T11:59:48Z, 2026-11-30T11:55:00Z, 2026-11-30T11:59:48Z, 1000]

