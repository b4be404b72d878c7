-- Per-key ordering (docs/ordering.md): a claim of a type with ordering: key
-- takes a row with a key only when it is the head of its key. Each
-- candidate is probed for an earlier PENDING (or FAILED) row of its type and
-- key, and for any IN_PROCESS one: one range read each in this index
-- (InnoDB appends id). No partial indexes here: PROCESSED rows and rows
-- without a key are in it, in ranges the probes never read.
--
-- Re-runnable like migration 3 (DDL commits implicitly): MySQL 8 has no
-- CREATE INDEX IF NOT EXISTS, so each index is prepared only when
-- information_schema does not list it yet, else a no-op (DO 0).
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE {{.Events}} ADD KEY outbox_events_key_idx (event_type, partition_key, status)',
        'DO 0')
      FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = {{.SchemaExpr}} AND TABLE_NAME = '{{.EventsTable}}' AND INDEX_NAME = 'outbox_events_key_idx');
PREPARE oncebox_ddl FROM @oncebox_ddl;
EXECUTE oncebox_ddl;
DEALLOCATE PREPARE oncebox_ddl;

-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE {{.DLQ}} ADD KEY outbox_dlq_events_key_idx (event_type, partition_key, event_id)',
        'DO 0')
      FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = {{.SchemaExpr}} AND TABLE_NAME = '{{.DLQTable}}' AND INDEX_NAME = 'outbox_dlq_events_key_idx');
PREPARE oncebox_ddl FROM @oncebox_ddl;
EXECUTE oncebox_ddl;
DEALLOCATE PREPARE oncebox_ddl;
