-- Fast recovery after a crash (docs/design.md, "Recovery"): a claim records
-- the instance that holds it, and each instance holding claims writes a
-- heartbeat, so that another instance can return a dead instance's claims
-- to PENDING seconds after its heartbeat stopped, instead of after
-- max-batch-processing-time. Re-runnable like migrations 1 and 2: the
-- column ignores ORA-01430 (column being added already exists), the table
-- ORA-00955.
BEGIN
  EXECUTE IMMEDIATE q'[ALTER TABLE {{.Events}} ADD (claimed_by VARCHAR2(255 CHAR))]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE != -1430 THEN RAISE; END IF;
END;
/

-- One row per instance that held claims for longer than a heartbeat
-- interval. The recovery looks an instance up by its primary key and finds
-- the stale claims through the (status, claimed_at) index.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE {{.Instances}} (
    instance_id  VARCHAR2(255 CHAR) PRIMARY KEY,
    heartbeat_at TIMESTAMP(6)       NOT NULL
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/
