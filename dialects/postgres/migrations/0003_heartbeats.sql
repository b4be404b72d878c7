-- Fast recovery after a crash (docs/design.md, "Recovery"): a claim records
-- the instance that holds it, and each instance holding claims writes a
-- heartbeat, so that another instance can return a dead instance's claims
-- to PENDING seconds after its heartbeat stopped, instead of after
-- max-batch-processing-time. NULL for claims taken before this migration
-- (or by an older relay): those are recovered by the old bound only.
ALTER TABLE {{.Events}} ADD COLUMN claimed_by varchar(255);

-- One row per instance that held claims for longer than a heartbeat
-- interval; deleted at Close, and by the clean-up when older than
-- max-batch-processing-time. The recovery looks an instance up by its
-- primary key; it finds the stale claims through the existing
-- (claimed_at) WHERE status = 'IN_PROCESS' index, so no index on
-- claimed_by is needed.
CREATE TABLE {{.Instances}} (
    instance_id  varchar(255) PRIMARY KEY,
    heartbeat_at timestamptz  NOT NULL
);
