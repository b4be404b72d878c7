-- oncebox schema, version 1, PostgreSQL.
-- Rendered with the configured schema and table prefix; see docs/schema.md.

-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE {{.Events}} (
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

-- The claim: PENDING rows of one type whose time has come, in next_retry_at
-- order. Partial, so it holds only the backlog, not the processed history.
CREATE INDEX {{.Prefix}}outbox_events_pending_idx
    ON {{.Events}} (event_type, next_retry_at) WHERE status = 'PENDING';

-- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
CREATE INDEX {{.Prefix}}outbox_events_in_process_idx
    ON {{.Events}} (claimed_at) WHERE status = 'IN_PROCESS';

-- Clean-up: PROCESSED rows older than the ttl.
CREATE INDEX {{.Prefix}}outbox_events_processed_idx
    ON {{.Events}} (updated_at) WHERE status = 'PROCESSED';

-- DLQ transfer: FAILED rows.
CREATE INDEX {{.Prefix}}outbox_events_failed_idx
    ON {{.Events}} (updated_at) WHERE status = 'FAILED';

-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE {{.DLQ}} (
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

-- At most one DLQ row per event, side and handler: a crash between storing
-- and acking a poison message cannot store it twice.
CREATE UNIQUE INDEX {{.Prefix}}outbox_dlq_events_event_uq
    ON {{.DLQ}} (event_id, source, handler_name);

-- The same for a consumed message without a usable event id: one row per
-- message UUID, side and handler.
CREATE UNIQUE INDEX {{.Prefix}}outbox_dlq_events_message_uq
    ON {{.DLQ}} (message_uuid, source, handler_name) WHERE event_id IS NULL;

-- Listing with keyset pagination, by moved time and id, optionally by status.
CREATE INDEX {{.Prefix}}outbox_dlq_events_moved_idx ON {{.DLQ}} (moved_at, id);
CREATE INDEX {{.Prefix}}outbox_dlq_events_status_idx ON {{.DLQ}} (status, moved_at, id);

-- The inbox: ids of processed events, per consumer namespace ('' by default).
CREATE TABLE {{.Inbox}} (
    consumer     varchar(255) NOT NULL DEFAULT '',
    event_id     varchar(255) NOT NULL,               -- text: the key may be a message UUID or any header
    processed_at timestamptz  NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

-- Inbox clean-up: ids older than the inbox ttl.
CREATE INDEX {{.Prefix}}inbox_events_processed_idx ON {{.Inbox}} (processed_at);

-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE {{.Jobs}} (
    name       varchar(255) PRIMARY KEY,
    locked_by  varchar(255),                          -- owner of the lease
    locked_at  timestamptz,
    lock_until timestamptz                            -- the lease ends here (at-most), or at release
);
