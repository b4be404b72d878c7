-- The claim takes due PENDING rows in (next_retry_at, id) order: the rows of
-- one multi-row publish share next_retry_at, and without id the batch they
-- go out in followed the table's physical order. The index carries id, so
-- the claim's cursor reads the rows in that order without a sort.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_events_due_idx
    ON {{.Events}} (status, event_type, next_retry_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

BEGIN
  EXECUTE IMMEDIATE q'[DROP INDEX {{.IndexPrefix}}outbox_events_pending_idx]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE != -1418 THEN RAISE; END IF;
END;
/
