-- Fast recovery after a crash (docs/design.md, "Recovery"): a claim records
-- the instance that holds it, and each instance holding claims writes a
-- heartbeat, so that another instance can return a dead instance's claims
-- to PENDING seconds after its heartbeat stopped. NULL for claims taken
-- without an instance: those are recovered by the old bound only.
ALTER TABLE {{.Events}} ADD COLUMN claimed_by TEXT;

-- One row per instance that held claims for longer than a heartbeat
-- interval; deleted at Close, and by the clean-up when older than
-- max-batch-processing-time. Looked up by its primary key.
CREATE TABLE {{.Instances}} (
    instance_id  TEXT      NOT NULL PRIMARY KEY,
    heartbeat_at TIMESTAMP NOT NULL CHECK (typeof(heartbeat_at) = 'integer')
);
