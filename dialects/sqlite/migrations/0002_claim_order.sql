-- The claim takes due PENDING rows in (next_retry_at, id) order: the rows of
-- one multi-row publish share next_retry_at, and id keeps them in publish
-- order. The index carries id, so the claim reads the rows in that order
-- without a sort.
CREATE INDEX {{.Index "outbox_events_due_idx"}}
    ON {{.Bare.Events}} (event_type, next_retry_at, id) WHERE status = 'PENDING';
DROP INDEX IF EXISTS {{.Index "outbox_events_pending_idx"}};
