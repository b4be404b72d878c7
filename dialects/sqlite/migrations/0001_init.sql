-- oncebox schema, version 1, SQLite.
-- Rendered with the configured schema (an attached database) and table
-- prefix; see docs/sqlite.md. Every time column is an INTEGER of unix
-- microseconds in UTC (declared TIMESTAMP, so that the driver can read it
-- back as a time; the CHECK keeps a text time out, which would sort
-- before every integer). Ids are the 16 bytes of the UUID (BLOB).

-- The outbox: one row per event, written in the caller's transaction.
CREATE TABLE {{.Events}} (
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

-- The claim: PENDING rows of one type whose time has come, in next_retry_at
-- order. Partial, so it holds only the backlog, not the processed history.
CREATE INDEX {{.Index "outbox_events_pending_idx"}}
    ON {{.Bare.Events}} (event_type, next_retry_at) WHERE status = 'PENDING';

-- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
CREATE INDEX {{.Index "outbox_events_in_process_idx"}}
    ON {{.Bare.Events}} (claimed_at) WHERE status = 'IN_PROCESS';

-- Clean-up: PROCESSED rows older than the ttl.
CREATE INDEX {{.Index "outbox_events_processed_idx"}}
    ON {{.Bare.Events}} (updated_at) WHERE status = 'PROCESSED';

-- DLQ transfer: FAILED rows.
CREATE INDEX {{.Index "outbox_events_failed_idx"}}
    ON {{.Bare.Events}} (updated_at) WHERE status = 'FAILED';

-- The dead letter queue: outbox events that exhausted their retries
-- (source = publisher) and messages whose handler failed (source = consumer).
CREATE TABLE {{.DLQ}} (
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

-- At most one DLQ row per event, side and handler: a crash between storing
-- and acking a poison message cannot store it twice.
CREATE UNIQUE INDEX {{.Index "outbox_dlq_events_event_uq"}}
    ON {{.Bare.DLQ}} (event_id, source, handler_name);

-- The same for a consumed message without a usable event id: one row per
-- message UUID, side and handler.
CREATE UNIQUE INDEX {{.Index "outbox_dlq_events_message_uq"}}
    ON {{.Bare.DLQ}} (message_uuid, source, handler_name) WHERE event_id IS NULL;

-- Listing with keyset pagination, by moved time and id, optionally by status.
CREATE INDEX {{.Index "outbox_dlq_events_moved_idx"}} ON {{.Bare.DLQ}} (moved_at, id);
CREATE INDEX {{.Index "outbox_dlq_events_status_idx"}} ON {{.Bare.DLQ}} (status, moved_at, id);

-- The inbox: ids of processed events, per consumer namespace ('' by default).
CREATE TABLE {{.Inbox}} (
    consumer     TEXT      NOT NULL DEFAULT '',
    event_id     TEXT      NOT NULL,                    -- text: the key may be a message UUID or any header
    processed_at TIMESTAMP NOT NULL CHECK (typeof(processed_at) = 'integer'),
    PRIMARY KEY (consumer, event_id)
);

-- Inbox clean-up: ids older than the inbox ttl.
CREATE INDEX {{.Index "inbox_events_processed_idx"}} ON {{.Bare.Inbox}} (processed_at);

-- Leases of the clean-up jobs: one instance at a time runs each job.
CREATE TABLE {{.Jobs}} (
    name       TEXT      NOT NULL PRIMARY KEY,
    locked_by  TEXT,                                    -- owner of the lease
    locked_at  TIMESTAMP CHECK (typeof(locked_at) IN ('integer', 'null')),
    lock_until TIMESTAMP CHECK (typeof(lock_until) IN ('integer', 'null')) -- the lease ends here (at-most), or at release
);
