-- migrate
SET @oncebox_migration_lock = GET_LOCK(?, ?);
-- args: [oncebox-migrate-de8e1d6da168b80e 600]

-- migrate
SELECT (SELECT 'oncebox: the migration lock is held by another migration' FROM (SELECT 1 AS n UNION ALL SELECT 2) AS t WHERE COALESCE(@oncebox_migration_lock, 0) <> 1);
-- args: []

-- migrate
CREATE DATABASE IF NOT EXISTS svc CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
-- args: []

-- migrate
CREATE TABLE IF NOT EXISTS svc.p_oncebox_migrations (
    version    INT          NOT NULL,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- args: []

-- migrate
SELECT version FROM svc.p_oncebox_migrations ORDER BY version;
-- args: []

-- migrate
INSERT INTO svc.p_oncebox_migrations (version, name, applied_at) VALUES (?, ?, ?);
-- args: [1 0001_init.sql 2026-11-30 12:00:00.123456 +0000 UTC]

-- 0001_init.sql #00
-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE IF NOT EXISTS svc.p_outbox_events (
    id              BINARY(16)   NOT NULL,              -- UUIDv7 bytes: inserts land at the index tail
    event_type      VARCHAR(255) NOT NULL,
    topic           VARCHAR(255) NOT NULL,              -- destination topic on the broker
    partition_key   VARCHAR(255) NULL,                  -- ordering key, the Kafka message key
    message_uuid    VARCHAR(255) NOT NULL,              -- the Watermill message UUID, restored on send
    payload         LONGBLOB     NOT NULL,
    metadata        JSON         NOT NULL,
    status          VARCHAR(16)  NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'IN_PROCESS', 'PROCESSED', 'FAILED')),
    retry_count     INT          NOT NULL DEFAULT 0,    -- failed attempts so far
    next_retry_at   DATETIME(6)  NOT NULL,              -- created_at until the first failure
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    claim_token     BINARY(16)   NULL,                  -- new at every claim: a finalize must match it
    claimed_at      DATETIME(6)  NULL,                  -- when the current claim was taken
    first_failed_at DATETIME(6)  NULL,                  -- the first failed attempt, carried to the DLQ
    last_error      TEXT         NULL,
    PRIMARY KEY (id),
    -- The claim: PENDING rows of one type whose time has come, in
    -- next_retry_at order.
    KEY outbox_events_claim_idx (status, event_type, next_retry_at),
    -- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
    KEY outbox_events_claimed_idx (status, claimed_at),
    -- Clean-up of PROCESSED rows and the move of FAILED rows to the DLQ.
    KEY outbox_events_updated_idx (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0001_init.sql #01
-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE IF NOT EXISTS svc.p_outbox_dlq_events (
    id              BINARY(16)   NOT NULL,              -- the DLQ row's own UUIDv7
    event_id        BINARY(16)   NULL,                  -- NULL for a consumed message without a usable id
    source          VARCHAR(16)  NOT NULL CHECK (source IN ('publisher', 'consumer')),
    handler_name    VARCHAR(255) NOT NULL DEFAULT '',   -- consumer side: the handler that failed
    event_type      VARCHAR(255) NOT NULL,
    topic           VARCHAR(255) NOT NULL,              -- publisher: destination; consumer: consumed topic
    partition_key   VARCHAR(255) NULL,
    message_uuid    VARCHAR(255) NOT NULL,
    payload         LONGBLOB     NOT NULL,
    metadata        JSON         NOT NULL,
    status          VARCHAR(16)  NOT NULL DEFAULT 'MOVED'
                    CHECK (status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS', 'RESOLVED')),
    retry_count     INT          NOT NULL DEFAULT 0,    -- attempts made before the move
    last_error      TEXT         NULL,
    created_at      DATETIME(6)  NOT NULL,              -- when the event was written or first received
    first_failed_at DATETIME(6)  NULL,
    last_failed_at  DATETIME(6)  NULL,
    moved_at        DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    -- The message UUID of a row without an event id, NULL otherwise: the
    -- partial unique index of PostgreSQL as a plain one (NULLs are distinct).
    -- Binary so that keys differing in trailing spaces stay distinct.
    message_key     VARBINARY(255) AS (IF(event_id IS NULL, CAST(message_uuid AS BINARY), NULL)) STORED,
    PRIMARY KEY (id),
    -- At most one DLQ row per event, side and handler: a crash between
    -- storing and acking a poison message cannot store it twice.
    UNIQUE KEY outbox_dlq_events_event_uq (event_id, source, handler_name),
    -- The same for a consumed message without a usable event id.
    UNIQUE KEY outbox_dlq_events_message_uq (message_key, source, handler_name),
    -- Listing with keyset pagination, by moved time and id, optionally by
    -- status; the transfer of TO_RETRY rows; the clean-up of RESOLVED rows.
    KEY outbox_dlq_events_moved_idx (moved_at, id),
    KEY outbox_dlq_events_status_idx (status, moved_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0001_init.sql #02
-- The inbox: ids of processed events, per consumer namespace ('' by default).
-- VARBINARY, not VARCHAR: utf8mb4_bin is a PAD SPACE collation, under which
-- 'k' and 'k ' are one key; the inbox must compare keys byte for byte. 255
-- bytes is middleware.MaxKeyLength.
CREATE TABLE IF NOT EXISTS svc.p_inbox_events (
    consumer     VARBINARY(255) NOT NULL DEFAULT '',
    event_id     VARBINARY(255) NOT NULL,               -- the key may be a message UUID or any header
    processed_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (consumer, event_id),
    -- Inbox clean-up: ids older than the inbox ttl.
    KEY inbox_events_processed_idx (processed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0001_init.sql #03
-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE IF NOT EXISTS svc.p_outbox_jobs (
    name       VARCHAR(255) NOT NULL,
    locked_by  VARCHAR(255) NULL,                       -- owner of the lease
    locked_at  DATETIME(6)  NULL,
    lock_until DATETIME(6)  NOT NULL,                   -- the lease ends here (at-most), or at release
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0003_heartbeats.sql #00
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE svc.p_outbox_events ADD COLUMN claimed_by VARCHAR(255) NULL',
        'DO 0')
      FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = 'svc' AND TABLE_NAME = 'p_outbox_events' AND COLUMN_NAME = 'claimed_by');

-- 0003_heartbeats.sql #01
PREPARE oncebox_ddl FROM @oncebox_ddl;

-- 0003_heartbeats.sql #02
EXECUTE oncebox_ddl;

-- 0003_heartbeats.sql #03
DEALLOCATE PREPARE oncebox_ddl;

-- 0003_heartbeats.sql #04
-- One row per instance that held claims for longer than a heartbeat
-- interval. The recovery looks an instance up by its primary key and finds
-- the stale claims through the (status, claimed_at) index, so claimed_by
-- needs no index.
CREATE TABLE IF NOT EXISTS svc.p_outbox_instances (
    instance_id  VARCHAR(255) NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (instance_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0004_key_order.sql #00
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE svc.p_outbox_events ADD KEY outbox_events_key_idx (event_type, partition_key, status)',
        'DO 0')
      FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = 'svc' AND TABLE_NAME = 'p_outbox_events' AND INDEX_NAME = 'outbox_events_key_idx');

-- 0004_key_order.sql #01
PREPARE oncebox_ddl FROM @oncebox_ddl;

-- 0004_key_order.sql #02
EXECUTE oncebox_ddl;

-- 0004_key_order.sql #03
DEALLOCATE PREPARE oncebox_ddl;

-- 0004_key_order.sql #04
-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
SET @oncebox_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE svc.p_outbox_dlq_events ADD KEY outbox_dlq_events_key_idx (event_type, partition_key, event_id)',
        'DO 0')
      FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = 'svc' AND TABLE_NAME = 'p_outbox_dlq_events' AND INDEX_NAME = 'outbox_dlq_events_key_idx');

-- 0004_key_order.sql #05
PREPARE oncebox_ddl FROM @oncebox_ddl;

-- 0004_key_order.sql #06
EXECUTE oncebox_ddl;

-- 0004_key_order.sql #07
DEALLOCATE PREPARE oncebox_ddl;

-- migrate
DO RELEASE_LOCK(?);
-- args: [oncebox-migrate-de8e1d6da168b80e]

