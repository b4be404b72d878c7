-- Per-key ordering (docs/ordering.md): a claim of a type with ordering: key
-- takes a row with a key only when it is the head of its key. Each
-- candidate is probed for an earlier PENDING (or FAILED) row of its type and
-- key, and for any IN_PROCESS one: one range read each in this index.
-- Partial: rows without a key and PROCESSED rows are not in it.
CREATE INDEX {{.Index "outbox_events_key_idx"}}
    ON {{.Bare.Events}} (event_type, partition_key, status, id)
 WHERE partition_key IS NOT NULL AND status IN ('PENDING', 'IN_PROCESS', 'FAILED');

-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
CREATE INDEX {{.Index "outbox_dlq_events_key_idx"}}
    ON {{.Bare.DLQ}} (event_type, partition_key, event_id)
 WHERE source = 'publisher' AND status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS');
