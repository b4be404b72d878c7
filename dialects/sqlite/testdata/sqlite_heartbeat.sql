-- InstanceHeartbeat
INSERT INTO outbox_instances (instance_id, heartbeat_at) VALUES (?1, ?2)
ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at;
-- args: [host-1 1796040000000000]

-- InstanceEnd
DELETE FROM outbox_instances WHERE instance_id = ?1;
-- args: [host-1]

-- InstancesDeleteBefore
DELETE FROM outbox_instances WHERE heartbeat_at < ?1;
-- args: [1796039700000000]

-- RecoverStale: EventsInProcessProbe
SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER), (SELECT 1 FROM outbox_events WHERE status = 'IN_PROCESS' LIMIT 1);
-- args: []

-- RecoverStale: EventsRecoverStale
UPDATE outbox_events SET status = 'PENDING', claim_token = NULL, claimed_at = NULL, claimed_by = NULL, updated_at = ?1
 WHERE id IN (SELECT e.id FROM outbox_events e
               WHERE e.status = 'IN_PROCESS' AND e.claimed_at < ?2
                 AND (e.claimed_at < ?3
                      OR (e.claimed_by IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM outbox_instances i
                                           WHERE i.instance_id = e.claimed_by AND i.heartbeat_at >= ?2)))
               LIMIT ?4);
-- args: [1796040000000000 1796039988000000 1796039700000000 1000]

-- DatabaseNow
SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER);
-- args: []

