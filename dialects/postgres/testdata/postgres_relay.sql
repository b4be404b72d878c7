-- EventsClaim
WITH due AS (
    SELECT id FROM outbox_events
     WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at <= $2
     ORDER BY next_retry_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $4, claimed_at = $2, claimed_by = $5, updated_at = $2
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a 2026-11-30 12:00:00 +0000 UTC 200 01000000-0000-0000-0000-000000000000 host-1]

-- EventsClaim (ordering: key)
WITH RECURSIVE busy AS MATERIALIZED (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = $1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS MATERIALIZED (
    SELECT DISTINCT y.partition_key FROM (
        SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = $2 AND x.next_retry_at > $3 AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at
                        LIMIT 10000) y
     WHERE y.retry_count > 0
),
pre AS MATERIALIZED (
    SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = $6 AND next_retry_at <= $7
         ORDER BY next_retry_at, id
                        LIMIT 200
),
deep AS MATERIALIZED (
    SELECT pre.partition_key FROM pre WHERE pre.partition_key IS NOT NULL
     GROUP BY pre.partition_key HAVING COUNT(*) > 1
),
kfirst AS MATERIALIZED (
    SELECT c.id FROM (
        SELECT h.id, ROW_NUMBER() OVER (PARTITION BY h.partition_key ORDER BY h.next_retry_at, h.id) AS wn
          FROM pre h WHERE h.partition_key IN (SELECT partition_key FROM deep)) c
     WHERE c.wn <= 1
),
w AS MATERIALIZED (
    SELECT s.id, s.partition_key, s.next_retry_at FROM (
        SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = $4 AND next_retry_at <= $5
         ORDER BY next_retry_at, id
                        LIMIT 2000) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)))
           AND (s.partition_key IS NULL OR s.partition_key NOT IN (SELECT partition_key FROM deep) OR s.id IN (SELECT id FROM kfirst))
     ORDER BY s.next_retry_at, s.id
                        LIMIT 200
),
wr AS MATERIALIZED (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS MATERIALIZED (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $8 AND b.partition_key = wr.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                          AND b.id NOT IN (SELECT id FROM w)
                        ORDER BY b.id LIMIT 1) END AS stop1
      FROM wr
),
wt AS MATERIALIZED (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
),
cand0 AS MATERIALIZED (
    SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= $9
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
),
walk (partition_key, n, found) AS (
    SELECT (SELECT k.partition_key FROM outbox_events k
                        WHERE k.event_type = $12 AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')
                        ORDER BY k.partition_key LIMIT 1), 1, 0
     WHERE (SELECT COUNT(*) FROM cand0) < 200
       AND (SELECT COUNT(*) FROM busy) < 200
       AND (SELECT COUNT(*) FROM pre) >= 200
    UNION ALL
    SELECT (SELECT k.partition_key FROM outbox_events k
                        WHERE k.event_type = $13 AND k.partition_key > wk.partition_key AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')
                        ORDER BY k.partition_key LIMIT 1), wk.n + 1,
           wk.found + CASE WHEN wk.partition_key NOT IN (SELECT partition_key FROM busy)
                AND wk.partition_key NOT IN (SELECT x.partition_key FROM cand0 x WHERE x.partition_key IS NOT NULL)
                AND EXISTS (SELECT 1 FROM outbox_events hh
                             WHERE hh.id = (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $11 AND b.partition_key = wk.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1)
                               AND hh.status = 'PENDING' AND hh.next_retry_at <= $10)
           THEN 1 ELSE 0 END
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < 2000 AND wk.found < 200
),
wh AS MATERIALIZED (
    SELECT h.id, h.partition_key, h.next_retry_at FROM (
        SELECT wk.partition_key, (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $14 AND b.partition_key = wk.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1) AS head
          FROM walk wk
         WHERE wk.partition_key IS NOT NULL) v
      JOIN outbox_events h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)
           AND v.partition_key NOT IN (SELECT x.partition_key FROM cand0 x WHERE x.partition_key IS NOT NULL)
       AND h.status = 'PENDING' AND h.next_retry_at <= $15
     ORDER BY h.next_retry_at, h.id
                        LIMIT 200
),
cand AS MATERIALIZED (
    SELECT id, partition_key, next_retry_at FROM cand0
    UNION ALL
    SELECT id, partition_key, next_retry_at FROM wh
),
locked AS MATERIALIZED (
    SELECT c.id, c.partition_key, c.next_retry_at FROM cand CROSS JOIN LATERAL (
        SELECT l.id, l.partition_key, l.next_retry_at FROM outbox_events l
         WHERE l.id = cand.id AND l.status = 'PENDING' AND l.next_retry_at <= $16
           FOR UPDATE SKIP LOCKED) c
),
missed AS MATERIALIZED (
    SELECT m.id, m.partition_key FROM cand m
     WHERE m.partition_key IS NOT NULL AND m.id NOT IN (SELECT id FROM locked)
),
kept AS (
    SELECT l.id, l.partition_key, l.next_retry_at,
           first_value(l.next_retry_at) OVER g AS g_at, first_value(l.id) OVER g AS g_id
      FROM locked l
     WHERE NOT EXISTS (SELECT 1 FROM missed g WHERE g.partition_key = l.partition_key AND g.id < l.id)
    WINDOW g AS (PARTITION BY l.partition_key, CASE WHEN l.partition_key IS NULL THEN l.id END ORDER BY l.next_retry_at, l.id)
),
due AS (
    SELECT id FROM kept ORDER BY g_at, g_id, id LIMIT 200
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $17, claimed_at = $16, claimed_by = $18, updated_at = $16
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a a 2026-11-30 12:00:00 +0000 UTC a 2026-11-30 12:00:00 +0000 UTC a 2026-11-30 12:00:00 +0000 UTC a 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC a a a a 2026-11-30 12:00:00 +0000 UTC 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 host-1]

-- EventsClaim (ordering: key, on-failure: block)
WITH RECURSIVE busy AS MATERIALIZED (
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM outbox_events i
         WHERE i.status = 'IN_PROCESS' AND i.event_type = $1 AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
),
waiting AS MATERIALIZED (
    SELECT DISTINCT y.partition_key FROM (
        SELECT x.partition_key, x.retry_count FROM outbox_events x
         WHERE x.status = 'PENDING' AND x.event_type = $2 AND x.next_retry_at > $3 AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at
                        LIMIT 10000) y
     WHERE y.retry_count > 0
),
blocked AS MATERIALIZED (
    SELECT bf.partition_key, bf.id FROM (
        SELECT f.partition_key, f.id FROM outbox_events f
         WHERE f.status = 'FAILED' AND f.event_type = $4 AND f.partition_key IS NOT NULL
         ORDER BY f.updated_at
                        LIMIT 10000) bf
    UNION ALL
    SELECT bq.partition_key, bq.event_id FROM (
        SELECT q.partition_key, q.event_id FROM outbox_dlq_events q
         WHERE q.event_type = $5 AND q.partition_key IS NOT NULL
           AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
         ORDER BY q.partition_key, q.event_id
                        LIMIT 10000) bq
),
pre AS MATERIALIZED (
    SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = $8 AND next_retry_at <= $9
         ORDER BY next_retry_at, id
                        LIMIT 200
),
deep AS MATERIALIZED (
    SELECT pre.partition_key FROM pre WHERE pre.partition_key IS NOT NULL
     GROUP BY pre.partition_key HAVING COUNT(*) > 1
),
kfirst AS MATERIALIZED (
    SELECT c.id FROM (
        SELECT h.id, ROW_NUMBER() OVER (PARTITION BY h.partition_key ORDER BY h.next_retry_at, h.id) AS wn
          FROM pre h WHERE h.partition_key IN (SELECT partition_key FROM deep)) c
     WHERE c.wn <= 1
),
w AS MATERIALIZED (
    SELECT s.id, s.partition_key, s.next_retry_at FROM (
        SELECT id, partition_key, next_retry_at FROM outbox_events
         WHERE status = 'PENDING' AND event_type = $6 AND next_retry_at <= $7
         ORDER BY next_retry_at, id
                        LIMIT 2000) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)
            AND NOT EXISTS (SELECT 1 FROM blocked k WHERE k.partition_key = s.partition_key AND k.id < s.id)))
           AND (s.partition_key IS NULL OR s.partition_key NOT IN (SELECT partition_key FROM deep) OR s.id IN (SELECT id FROM kfirst))
     ORDER BY s.next_retry_at, s.id
                        LIMIT 200
),
wr AS MATERIALIZED (
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS MATERIALIZED (
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $10 AND b.partition_key = wr.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                          AND b.id NOT IN (SELECT id FROM w)
                        ORDER BY b.id LIMIT 1) END AS stop1
      FROM wr
),
wt AS MATERIALIZED (
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
),
cand0 AS MATERIALIZED (
    SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id)
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = $11 AND f.partition_key = wt.partition_key
                          AND f.status = 'FAILED' AND f.id < wt.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = $12 AND q.partition_key = wt.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < wt.id))
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN outbox_events h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= $13
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = $14 AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = $15 AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= 1
),
walk (partition_key, n, found) AS (
    SELECT (SELECT k.partition_key FROM outbox_events k
                        WHERE k.event_type = $20 AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')
                        ORDER BY k.partition_key LIMIT 1), 1, 0
     WHERE (SELECT COUNT(*) FROM cand0) < 200
       AND (SELECT COUNT(*) FROM busy) < 200
       AND (SELECT COUNT(*) FROM pre) >= 200
    UNION ALL
    SELECT (SELECT k.partition_key FROM outbox_events k
                        WHERE k.event_type = $21 AND k.partition_key > wk.partition_key AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')
                        ORDER BY k.partition_key LIMIT 1), wk.n + 1,
           wk.found + CASE WHEN wk.partition_key NOT IN (SELECT partition_key FROM busy)
                AND wk.partition_key NOT IN (SELECT x.partition_key FROM cand0 x WHERE x.partition_key IS NOT NULL)
                AND EXISTS (SELECT 1 FROM outbox_events hh
                             WHERE hh.id = (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $19 AND b.partition_key = wk.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1)
                               AND hh.status = 'PENDING' AND hh.next_retry_at <= $16
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = $17 AND f.partition_key = hh.partition_key
                          AND f.status = 'FAILED' AND f.id < hh.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = $18 AND q.partition_key = hh.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < hh.id))
           THEN 1 ELSE 0 END
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < 2000 AND wk.found < 200
),
wh AS MATERIALIZED (
    SELECT h.id, h.partition_key, h.next_retry_at FROM (
        SELECT wk.partition_key, (SELECT b.id FROM outbox_events b
                        WHERE b.event_type = $22 AND b.partition_key = wk.partition_key AND b.status = 'PENDING' AND b.next_retry_at IS NOT NULL
                        ORDER BY b.id LIMIT 1) AS head
          FROM walk wk
         WHERE wk.partition_key IS NOT NULL) v
      JOIN outbox_events h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)
           AND v.partition_key NOT IN (SELECT x.partition_key FROM cand0 x WHERE x.partition_key IS NOT NULL)
       AND h.status = 'PENDING' AND h.next_retry_at <= $23
       AND NOT EXISTS (SELECT 1 FROM outbox_events f
                        WHERE f.event_type = $24 AND f.partition_key = h.partition_key
                          AND f.status = 'FAILED' AND f.id < h.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_dlq_events q
                        WHERE q.event_type = $25 AND q.partition_key = h.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < h.id)
     ORDER BY h.next_retry_at, h.id
                        LIMIT 200
),
cand AS MATERIALIZED (
    SELECT id, partition_key, next_retry_at FROM cand0
    UNION ALL
    SELECT id, partition_key, next_retry_at FROM wh
),
locked AS MATERIALIZED (
    SELECT c.id, c.partition_key, c.next_retry_at FROM cand CROSS JOIN LATERAL (
        SELECT l.id, l.partition_key, l.next_retry_at FROM outbox_events l
         WHERE l.id = cand.id AND l.status = 'PENDING' AND l.next_retry_at <= $26
           FOR UPDATE SKIP LOCKED) c
),
missed AS MATERIALIZED (
    SELECT m.id, m.partition_key FROM cand m
     WHERE m.partition_key IS NOT NULL AND m.id NOT IN (SELECT id FROM locked)
),
kept AS (
    SELECT l.id, l.partition_key, l.next_retry_at,
           first_value(l.next_retry_at) OVER g AS g_at, first_value(l.id) OVER g AS g_id
      FROM locked l
     WHERE NOT EXISTS (SELECT 1 FROM missed g WHERE g.partition_key = l.partition_key AND g.id < l.id)
    WINDOW g AS (PARTITION BY l.partition_key, CASE WHEN l.partition_key IS NULL THEN l.id END ORDER BY l.next_retry_at, l.id)
),
due AS (
    SELECT id FROM kept ORDER BY g_at, g_id, id LIMIT 200
)
UPDATE outbox_events e
   SET status = 'IN_PROCESS', claim_token = $27, claimed_at = $26, claimed_by = $28, updated_at = $26
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at;
-- args: [a a 2026-11-30 12:00:00 +0000 UTC a a a 2026-11-30 12:00:00 +0000 UTC a 2026-11-30 12:00:00 +0000 UTC a a a 2026-11-30 12:00:00 +0000 UTC a a 2026-11-30 12:00:00 +0000 UTC a a a a a a 2026-11-30 12:00:00 +0000 UTC a a 2026-11-30 12:00:00 +0000 UTC 01000000-0000-0000-0000-000000000000 host-1]

-- EventsDueTypes (discovery, first page)
WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING' AND event_type > $2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < $3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM outbox_events e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= $1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type;
-- args: [2026-11-30 12:00:00 +0000 UTC  100]

-- EventsDueTypes (discovery, next page)
WITH RECURSIVE t(event_type, n) AS (
    SELECT min(event_type), 1 FROM outbox_events
     WHERE status = 'PENDING' AND event_type > $2
  UNION ALL
    SELECT (SELECT min(e.event_type) FROM outbox_events e
             WHERE e.status = 'PENDING' AND e.event_type > t.event_type), t.n + 1
      FROM t
     WHERE t.event_type IS NOT NULL AND t.n < $3
)
SELECT t.event_type,
       CASE WHEN EXISTS (SELECT 1 FROM outbox_events e
                          WHERE e.status = 'PENDING' AND e.event_type = t.event_type AND e.next_retry_at <= $1)
            THEN 1 ELSE 0 END
  FROM t
 WHERE t.event_type IS NOT NULL
 ORDER BY t.event_type;
-- args: [2026-11-30 12:00:00 +0000 UTC b 100]

-- EventsMarkProcessed
UPDATE outbox_events SET status = 'PROCESSED', updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'
RETURNING id;
-- args: [2026-11-30 12:00:00 +0000 UTC [0a000000-0000-0000-0000-000000000000 0b000000-0000-0000-0000-000000000000] 01000000-0000-0000-0000-000000000000]

-- EventsMarkProcessedClaims (a merged finalize: the token of each row's claim)
UPDATE outbox_events e SET status = 'PROCESSED', updated_at = $1
  FROM unnest($2::uuid[], $3::uuid[]) AS u(id, claim_token)
 WHERE e.id = u.id AND e.claim_token = u.claim_token AND e.status = 'IN_PROCESS'
RETURNING e.id;
-- args: [2026-11-30 12:00:00 +0000 UTC [0a000000-0000-0000-0000-000000000000 0b000000-0000-0000-0000-000000000000 0c000000-0000-0000-0000-000000000000] [01000000-0000-0000-0000-000000000000 01000000-0000-0000-0000-000000000000 02000000-0000-0000-0000-000000000000]]

