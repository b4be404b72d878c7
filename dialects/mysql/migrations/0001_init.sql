-- oncebox schema, version 1, MySQL 8.0.1+ and MariaDB 10.6+ (SKIP LOCKED).
-- Rendered with the configured database (schema) and table prefix; see
-- docs/mysql.md. DDL commits implicitly on MySQL, so every statement is
-- re-runnable: a migration that crashed half-way is completed by the next run.
-- Every index is inline (MySQL has no CREATE INDEX IF NOT EXISTS); index
-- names are per table, so they carry no prefix. Times are DATETIME(6) in UTC
-- (the DSN needs parseTime=true&loc=UTC). No partial indexes: the indexes
-- the relay scans lead with status.

-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE IF NOT EXISTS {{.Events}} (
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

-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE IF NOT EXISTS {{.DLQ}} (
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

-- The inbox: ids of processed events, per consumer namespace ('' by default).
-- VARBINARY, not VARCHAR: utf8mb4_bin is a PAD SPACE collation, under which
-- 'k' and 'k ' are one key; the inbox must compare keys byte for byte. 255
-- bytes is middleware.MaxKeyLength.
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer     VARBINARY(255) NOT NULL DEFAULT '',
    event_id     VARBINARY(255) NOT NULL,               -- the key may be a message UUID or any header
    processed_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (consumer, event_id),
    -- Inbox clean-up: ids older than the inbox ttl.
    KEY inbox_events_processed_idx (processed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE IF NOT EXISTS {{.Jobs}} (
    name       VARCHAR(255) NOT NULL,
    locked_by  VARCHAR(255) NULL,                       -- owner of the lease
    locked_at  DATETIME(6)  NULL,
    lock_until DATETIME(6)  NOT NULL,                   -- the lease ends here (at-most), or at release
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
