-- Fast recovery after a crash (docs/design.md, "Recovery"): a claim records
-- the instance that holds it, and each instance holding claims writes a
-- heartbeat, so that another instance can return a dead instance's claims
-- to PENDING seconds after its heartbeat stopped, instead of after
-- max-batch-processing-time.
--
-- Re-runnable like migration 1 (DDL commits implicitly). MariaDB has ADD
-- COLUMN IF NOT EXISTS, MySQL 8 does not: the ALTER is prepared only when
-- information_schema does not list the column yet, else a no-op (DO 0).
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE {{.Events}} ADD COLUMN claimed_by VARCHAR(255) NULL',
        'DO 0')
      FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = {{.SchemaExpr}} AND TABLE_NAME = '{{.EventsTable}}' AND COLUMN_NAME = 'claimed_by');
PREPARE oncebox_ddl FROM @oncebox_ddl;
EXECUTE oncebox_ddl;
DEALLOCATE PREPARE oncebox_ddl;

-- One row per instance that held claims for longer than a heartbeat
-- interval. The recovery looks an instance up by its primary key and finds
-- the stale claims through the (status, claimed_at) index, so claimed_by
-- needs no index.
CREATE TABLE IF NOT EXISTS {{.Instances}} (
    instance_id  VARCHAR(255) NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (instance_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
