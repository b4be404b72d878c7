-- 0001_init.sql #00
-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE svc.p_outbox_events (
    id            BLOB      NOT NULL PRIMARY KEY CHECK (length(id) = 16), -- UUIDv7: inserts land at the index tail
    event_type    TEXT      NOT NULL,
    topic         TEXT      NOT NULL,                   -- destination topic on the broker
    partition_key TEXT,                                 -- ordering key, the Kafka message key
    message_uuid  TEXT      NOT NULL,                   -- the Watermill message UUID, restored on send
    payload       BLOB      NOT NULL,
    metadata      TEXT      NOT NULL DEFAULT '{}',
    status        TEXT      NOT NULL DEFAULT 'PENDING'
                  CHECK (status IN ('PENDING', 'IN_PROCESS', 'PROCESSED', 'FAILED')),
    retry_count   INTEGER   NOT NULL DEFAULT 0,         -- failed attempts so far
    next_retry_at TIMESTAMP NOT NULL CHECK (typeof(next_retry_at) = 'integer'), -- created_at until the first failure
    created_at    TIMESTAMP NOT NULL CHECK (typeof(created_at) = 'integer'),
    updated_at    TIMESTAMP NOT NULL CHECK (typeof(updated_at) = 'integer'),
    claim_token   BLOB,                                 -- new at every claim: a finalize must match it
    claimed_at    TIMESTAMP CHECK (typeof(claimed_at) IN ('integer', 'null')), -- when the current claim was taken
    first_failed_at TIMESTAMP CHECK (typeof(first_failed_at) IN ('integer', 'null')), -- carried to the DLQ
    last_error    TEXT
);

-- 0001_init.sql #01
-- The claim: PENDING rows of one type whose time has come, in next_retry_at
-- order. Partial, so it holds only the backlog, not the processed history.
CREATE INDEX svc.p_outbox_events_pending_idx
    ON p_outbox_events (event_type, next_retry_at) WHERE status = 'PENDING';

-- 0001_init.sql #02
-- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
CREATE INDEX svc.p_outbox_events_in_process_idx
    ON p_outbox_events (claimed_at) WHERE status = 'IN_PROCESS';

-- 0001_init.sql #03
-- Clean-up: PROCESSED rows older than the ttl.
CREATE INDEX svc.p_outbox_events_processed_idx
    ON p_outbox_events (updated_at) WHERE status = 'PROCESSED';

-- 0001_init.sql #04
-- DLQ transfer: FAILED rows.
CREATE INDEX svc.p_outbox_events_failed_idx
    ON p_outbox_events (updated_at) WHERE status = 'FAILED';

-- 0001_init.sql #05
-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE svc.p_outbox_dlq_events (
    id              BLOB      NOT NULL PRIMARY KEY CHECK (length(id) = 16), -- the DLQ row's own UUIDv7
    event_id        BLOB,                               -- NULL for a consumed message without a usable id
    source          TEXT      NOT NULL CHECK (source IN ('publisher', 'consumer')),
    handler_name    TEXT      NOT NULL DEFAULT '',      -- consumer side: the handler that failed
    event_type      TEXT      NOT NULL,
    topic           TEXT      NOT NULL,                 -- publisher: destination; consumer: consumed topic
    partition_key   TEXT,
    message_uuid    TEXT      NOT NULL,
    payload         BLOB      NOT NULL,
    metadata        TEXT      NOT NULL DEFAULT '{}',
    status          TEXT      NOT NULL DEFAULT 'MOVED'
                    CHECK (status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS', 'RESOLVED')),
    retry_count     INTEGER   NOT NULL DEFAULT 0,       -- attempts made before the move
    last_error      TEXT,
    created_at      TIMESTAMP NOT NULL CHECK (typeof(created_at) = 'integer'), -- when the event was written or first received
    first_failed_at TIMESTAMP CHECK (typeof(first_failed_at) IN ('integer', 'null')),
    last_failed_at  TIMESTAMP CHECK (typeof(last_failed_at) IN ('integer', 'null')),
    moved_at        TIMESTAMP NOT NULL CHECK (typeof(moved_at) = 'integer'),
    updated_at      TIMESTAMP NOT NULL CHECK (typeof(updated_at) = 'integer')
);

-- 0001_init.sql #06
-- At most one DLQ row per event, side and handler: a crash between storing
-- and acking a poison message cannot store it twice.
CREATE UNIQUE INDEX svc.p_outbox_dlq_events_event_uq
    ON p_outbox_dlq_events (event_id, source, handler_name);

-- 0001_init.sql #07
-- The same for a consumed message without a usable event id: one row per
-- message UUID, side and handler.
CREATE UNIQUE INDEX svc.p_outbox_dlq_events_message_uq
    ON p_outbox_dlq_events (message_uuid, source, handler_name) WHERE event_id IS NULL;

-- 0001_init.sql #08
-- Listing with keyset pagination, by moved time and id, optionally by status.
CREATE INDEX svc.p_outbox_dlq_events_moved_idx ON p_outbox_dlq_events (moved_at, id);

-- 0001_init.sql #09
CREATE INDEX svc.p_outbox_dlq_events_status_idx ON p_outbox_dlq_events (status, moved_at, id);

-- 0001_init.sql #10
-- The inbox: ids of processed events, per consumer namespace ('' by default).
CREATE TABLE svc.p_inbox_events (
    consumer     TEXT      NOT NULL DEFAULT '',
    event_id     TEXT      NOT NULL,                    -- text: the key may be a message UUID or any header
    processed_at TIMESTAMP NOT NULL CHECK (typeof(processed_at) = 'integer'),
    PRIMARY KEY (consumer, event_id)
);

-- 0001_init.sql #11
-- Inbox clean-up: ids older than the inbox ttl.
CREATE INDEX svc.p_inbox_events_processed_idx ON p_inbox_events (processed_at);

-- 0001_init.sql #12
-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE svc.p_outbox_jobs (
    name       TEXT      NOT NULL PRIMARY KEY,
    locked_by  TEXT,                                    -- owner of the lease
    locked_at  TIMESTAMP CHECK (typeof(locked_at) IN ('integer', 'null')),
    lock_until TIMESTAMP CHECK (typeof(lock_until) IN ('integer', 'null')) -- the lease ends here (at-most), or at release
);

-- 0002_claim_order.sql #00
CREATE INDEX svc.p_outbox_events_due_idx
    ON p_outbox_events (event_type, next_retry_at, id) WHERE status = 'PENDING';

-- 0002_claim_order.sql #01
DROP INDEX IF EXISTS svc.p_outbox_events_pending_idx;

-- 0003_heartbeats.sql #00
ALTER TABLE svc.p_outbox_events ADD COLUMN claimed_by TEXT;

-- 0003_heartbeats.sql #01
-- One row per instance that held claims for longer than a heartbeat
-- interval; deleted at Close, and by the clean-up when older than
-- max-batch-processing-time. Looked up by its primary key.
CREATE TABLE svc.p_outbox_instances (
    instance_id  TEXT      NOT NULL PRIMARY KEY,
    heartbeat_at TIMESTAMP NOT NULL CHECK (typeof(heartbeat_at) = 'integer')
);

-- 0004_key_order.sql #00
CREATE INDEX svc.p_outbox_events_key_idx
    ON p_outbox_events (event_type, partition_key, status, id)
 WHERE partition_key IS NOT NULL;

-- 0004_key_order.sql #01
-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
CREATE INDEX svc.p_outbox_dlq_events_key_idx
    ON p_outbox_dlq_events (event_type, partition_key, event_id)
 WHERE source = 'publisher' AND status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS');

