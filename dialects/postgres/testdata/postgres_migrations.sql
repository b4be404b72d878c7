-- 0001_init.sql #00
-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE svc.p_outbox_events (
    id            uuid         PRIMARY KEY,            -- UUIDv7: inserts land at the index tail
    event_type    varchar(255) NOT NULL,
    topic         varchar(255) NOT NULL,               -- destination topic on the broker
    partition_key varchar(255),                        -- ordering key, the Kafka message key
    message_uuid  varchar(255) NOT NULL,               -- the Watermill message UUID, restored on send
    payload       bytea        NOT NULL,
    metadata      jsonb        NOT NULL DEFAULT '{}',
    status        varchar(16)  NOT NULL DEFAULT 'PENDING'
                  CHECK (status IN ('PENDING', 'IN_PROCESS', 'PROCESSED', 'FAILED')),
    retry_count   integer      NOT NULL DEFAULT 0,     -- failed attempts so far
    next_retry_at timestamptz  NOT NULL,               -- created_at until the first failure
    created_at    timestamptz  NOT NULL,
    updated_at    timestamptz  NOT NULL,
    claim_token   uuid,                                -- new at every claim: a finalize must match it
    claimed_at    timestamptz,                         -- when the current claim was taken
    first_failed_at timestamptz,                       -- the first failed attempt, carried to the DLQ
    last_error    text
);

-- 0001_init.sql #01
-- The claim: PENDING rows of one type whose time has come, in next_retry_at
-- order. Partial, so it holds only the backlog, not the processed history.
CREATE INDEX p_outbox_events_pending_idx
    ON svc.p_outbox_events (event_type, next_retry_at) WHERE status = 'PENDING';

-- 0001_init.sql #02
-- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
CREATE INDEX p_outbox_events_in_process_idx
    ON svc.p_outbox_events (claimed_at) WHERE status = 'IN_PROCESS';

-- 0001_init.sql #03
-- Clean-up: PROCESSED rows older than the ttl.
CREATE INDEX p_outbox_events_processed_idx
    ON svc.p_outbox_events (updated_at) WHERE status = 'PROCESSED';

-- 0001_init.sql #04
-- DLQ transfer: FAILED rows.
CREATE INDEX p_outbox_events_failed_idx
    ON svc.p_outbox_events (updated_at) WHERE status = 'FAILED';

-- 0001_init.sql #05
-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE svc.p_outbox_dlq_events (
    id              uuid         PRIMARY KEY,          -- the DLQ row's own UUIDv7
    event_id        uuid,                              -- NULL for a consumed message without a usable id
    source          varchar(16)  NOT NULL CHECK (source IN ('publisher', 'consumer')),
    handler_name    varchar(255) NOT NULL DEFAULT '',  -- consumer side: the handler that failed
    event_type      varchar(255) NOT NULL,
    topic           varchar(255) NOT NULL,             -- publisher: destination; consumer: consumed topic
    partition_key   varchar(255),
    message_uuid    varchar(255) NOT NULL,
    payload         bytea        NOT NULL,
    metadata        jsonb        NOT NULL DEFAULT '{}',
    status          varchar(16)  NOT NULL DEFAULT 'MOVED'
                    CHECK (status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS', 'RESOLVED')),
    retry_count     integer      NOT NULL DEFAULT 0,   -- attempts made before the move
    last_error      text,
    created_at      timestamptz  NOT NULL,             -- when the event was written or first received
    first_failed_at timestamptz,
    last_failed_at  timestamptz,
    moved_at        timestamptz  NOT NULL,
    updated_at      timestamptz  NOT NULL
);

-- 0001_init.sql #06
-- At most one DLQ row per event, side and handler: a crash between storing
-- and acking a poison message cannot store it twice.
CREATE UNIQUE INDEX p_outbox_dlq_events_event_uq
    ON svc.p_outbox_dlq_events (event_id, source, handler_name);

-- 0001_init.sql #07
-- The same for a consumed message without a usable event id: one row per
-- message UUID, side and handler.
CREATE UNIQUE INDEX p_outbox_dlq_events_message_uq
    ON svc.p_outbox_dlq_events (message_uuid, source, handler_name) WHERE event_id IS NULL;

-- 0001_init.sql #08
-- Listing with keyset pagination, by moved time and id, optionally by status.
CREATE INDEX p_outbox_dlq_events_moved_idx ON svc.p_outbox_dlq_events (moved_at, id);

-- 0001_init.sql #09
CREATE INDEX p_outbox_dlq_events_status_idx ON svc.p_outbox_dlq_events (status, moved_at, id);

-- 0001_init.sql #10
-- The inbox: ids of processed events, per consumer namespace ('' by default).
CREATE TABLE svc.p_inbox_events (
    consumer     varchar(255) NOT NULL DEFAULT '',
    event_id     varchar(255) NOT NULL,               -- text: the key may be a message UUID or any header
    processed_at timestamptz  NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

-- 0001_init.sql #11
-- Inbox clean-up: ids older than the inbox ttl.
CREATE INDEX p_inbox_events_processed_idx ON svc.p_inbox_events (processed_at);

-- 0001_init.sql #12
-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE svc.p_outbox_jobs (
    name       varchar(255) PRIMARY KEY,
    locked_by  varchar(255),                          -- owner of the lease
    locked_at  timestamptz,
    lock_until timestamptz                            -- the lease ends here (at-most), or at release
);

-- 0002_claim_order.sql #00
CREATE INDEX p_outbox_events_due_idx
    ON svc.p_outbox_events (event_type, next_retry_at, id) WHERE status = 'PENDING';

-- 0002_claim_order.sql #01
DROP INDEX IF EXISTS svc.p_outbox_events_pending_idx;

-- 0003_heartbeats.sql #00
ALTER TABLE svc.p_outbox_events ADD COLUMN claimed_by varchar(255);

-- 0003_heartbeats.sql #01
-- One row per instance that held claims for longer than a heartbeat
-- interval; deleted at Close, and by the clean-up when older than
-- max-batch-processing-time. The recovery looks an instance up by its
-- primary key; it finds the stale claims through the existing
-- (claimed_at) WHERE status = 'IN_PROCESS' index, so no index on
-- claimed_by is needed.
CREATE TABLE svc.p_outbox_instances (
    instance_id  varchar(255) PRIMARY KEY,
    heartbeat_at timestamptz  NOT NULL
);

-- 0004_key_order.sql #00
CREATE INDEX p_outbox_events_key_idx
    ON svc.p_outbox_events (event_type, partition_key, status, id)
 WHERE partition_key IS NOT NULL AND status IN ('PENDING', 'IN_PROCESS', 'FAILED');

-- 0004_key_order.sql #01
-- on-failure: block holds a key behind a DLQ row of the publisher for an
-- earlier event of it that waits for an operator.
CREATE INDEX p_outbox_dlq_events_key_idx
    ON svc.p_outbox_dlq_events (event_type, partition_key, event_id)
 WHERE source = 'publisher' AND status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS');

-- 0005_dlq_error_class.sql #00
ALTER TABLE svc.p_outbox_dlq_events
  ADD COLUMN error_class text GENERATED ALWAYS AS (
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(
      left(coalesce(last_error, ''), 1000),
      '"[^"]*"|''[^'']*''', '?', 'g'),
      '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
      '0[xX][0-9a-fA-F]+', '<hex>', 'g'),
      '[0-9]+', 'N', 'g')) STORED;

-- 0005_dlq_error_class.sql #01
-- A fingerprint's act pages through a group's ids by this index, one
-- range a page, and the view reads each group's newest error in it. (The
-- view's grouping of the whole table reads the table itself: a parallel
-- scan was faster than this index, 0.3 s against 1 s at 1,000,000 rows.)
-- About 170 MB at 1,000,000 rows with these error texts: each entry holds
-- its class.
CREATE INDEX p_outbox_dlq_events_class_idx
    ON svc.p_outbox_dlq_events (source, event_type, error_class, status, id);

