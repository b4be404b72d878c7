-- InstanceHeartbeat
INSERT INTO outbox_instances (instance_id, heartbeat_at) VALUES ($1, $2)
ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at;
-- args: [host-1 2026-11-30 12:00:00 +0000 UTC]

-- InstanceEnd
DELETE FROM outbox_instances WHERE instance_id = $1;
-- args: [host-1]

-- InstancesDeleteBefore
DELETE FROM outbox_instances WHERE heartbeat_at < $1;
-- args: [2026-11-30 11:55:00 +0000 UTC]

-- RecoverStale: EventsRecoverStale
WITH recovered AS (
    UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, claimed_by = NULL, updated_at = $1
     WHERE id IN (SELECT e.id FROM outbox_events e
                   WHERE e.status = 'IN_PROCESS' AND e.claimed_at < $2
                     AND (e.claimed_at < $3
                          OR (e.claimed_by IS NOT NULL
                              AND NOT EXISTS (SELECT 1 FROM outbox_instances i
                                               WHERE i.instance_id = e.claimed_by AND i.heartbeat_at >= $2)))
                   LIMIT $4
                     FOR UPDATE OF e SKIP LOCKED)
    RETURNING 1
)
SELECT (SELECT count(*) FROM recovered),
       EXISTS (SELECT 1 FROM outbox_events WHERE status = 'IN_PROCESS'),
       clock_timestamp();
-- args: [2026-11-30 12:00:00 +0000 UTC 2026-11-30 11:59:48 +0000 UTC 2026-11-30 11:55:00 +0000 UTC 1000]

