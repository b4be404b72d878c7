-- InstanceHeartbeat
INSERT INTO outbox_instances (instance_id, heartbeat_at) VALUES (?, ?)
ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at);
-- args: [host-1 2026-11-30 12:00:00 +0000 UTC]

-- InstanceEnd
DELETE FROM outbox_instances WHERE instance_id = ?;
-- args: [host-1]

-- InstancesDeleteBefore
DELETE FROM outbox_instances WHERE heartbeat_at < ?;
-- args: [2026-11-30 11:55:00 +0000 UTC]

-- RecoverStale probe: EventsInProcessProbe (plain read, idle runs end here)
SELECT UTC_TIMESTAMP(6), EXISTS (SELECT 1 FROM outbox_events WHERE status = 'IN_PROCESS');
-- args: []

-- RecoverStale: EventsRecoverStale
UPDATE outbox_events AS e
  JOIN (SELECT s.id FROM outbox_events s
         WHERE s.status = 'IN_PROCESS' AND s.claimed_at < ?
           AND (s.claimed_at < ?
                OR (s.claimed_by IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM outbox_instances i
                                     WHERE i.instance_id = s.claimed_by AND i.heartbeat_at >= ?)))
         ORDER BY s.claimed_at, s.id
         LIMIT ?
           FOR UPDATE SKIP LOCKED) AS stuck ON e.id = stuck.id
   SET e.status = 'PENDING', e.claim_token = NULL, e.claimed_at = NULL, e.claimed_by = NULL, e.updated_at = ?
 WHERE e.status = 'IN_PROCESS';
-- args: [2026-11-30 11:59:48 +0000 UTC 2026-11-30 11:55:00 +0000 UTC 2026-11-30 11:59:48 +0000 UTC 1000 2026-11-30 12:00:00 +0000 UTC]

