-- Per-key ordering (docs/ordering.md): a claim of a type with ordering: key
-- takes a row with a key only when it is the head of its key. Each
-- candidate is probed for an earlier PENDING (or FAILED) row of its type and
-- key, and for any IN_PROCESS one: one range read each in this index.
-- Rows without a key and PROCESSED rows are in it (no partial indexes), in
-- ranges the probes never read. Re-runnable: ORA-00955 and ORA-01408
-- ignored.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_events_key_idx
    ON {{.Events}} (event_type, partition_key, status, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_dlq_events_key_idx
    ON {{.DLQ}} (event_type, partition_key, event_id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/
