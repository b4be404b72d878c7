-- oncebox schema, version 1, Oracle 19c and later (12.2+ for identifiers
-- longer than 30 bytes). Rendered with the configured schema and table
-- prefix; see docs/oracle.md. Index names are qualified with the schema
-- (IndexPrefix): unqualified, Oracle would create them in the connected
-- user's schema rather than in their table's.
--
-- Statements are separated by a line holding only "/" (splitOracleScript),
-- as in SQL*Plus: each is a PL/SQL block, whose inner semicolons end lines.
-- DDL commits on Oracle, so a failed migration leaves what it created; every
-- block ignores ORA-00955 (name already used) and ORA-01408 (column list
-- already indexed), so that the migration can simply run again.
--
-- Times are TIMESTAMP(6) holding UTC (the dialect binds SYS_EXTRACT_UTC of
-- each time). Oracle stores '' as NULL: handler_name and consumer store a
-- single space for '' (see docs/oracle.md).

-- The outbox: one row per event, written in the caller's transaction.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE {{.Events}} (
    id              RAW(16)            PRIMARY KEY,
    event_type      VARCHAR2(255 CHAR) NOT NULL,
    topic           VARCHAR2(255 CHAR) NOT NULL,
    partition_key   VARCHAR2(255 CHAR),
    message_uuid    VARCHAR2(255 CHAR) NOT NULL,
    payload         BLOB,
    metadata        CLOB               DEFAULT '{}' NOT NULL CHECK (metadata IS JSON),
    status          VARCHAR2(16 CHAR)  DEFAULT 'PENDING' NOT NULL
                    CHECK (status IN ('PENDING', 'IN_PROCESS', 'PROCESSED', 'FAILED')),
    retry_count     NUMBER(10)         DEFAULT 0 NOT NULL,
    next_retry_at   TIMESTAMP(6)       NOT NULL,
    created_at      TIMESTAMP(6)       NOT NULL,
    updated_at      TIMESTAMP(6)       NOT NULL,
    claim_token     RAW(16),
    claimed_at      TIMESTAMP(6),
    first_failed_at TIMESTAMP(6),
    last_error      CLOB
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- The claim: PENDING rows of one type whose time has come, in next_retry_at
-- order. No partial indexes on Oracle: the index leads with status, so the
-- claim ranges over the PENDING rows of the type only.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_events_pending_idx
    ON {{.Events}} (status, event_type, next_retry_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- Stuck recovery: IN_PROCESS rows claimed before a cut-off.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_events_in_process_idx
    ON {{.Events}} (status, claimed_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- Clean-up (PROCESSED rows older than the ttl) and the DLQ move (FAILED
-- rows): one index serves both.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_events_status_upd_idx
    ON {{.Events}} (status, updated_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- The dead letter queue.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE {{.DLQ}} (
    id              RAW(16)            PRIMARY KEY,
    event_id        RAW(16),
    source          VARCHAR2(16 CHAR)  NOT NULL CHECK (source IN ('publisher', 'consumer')),
    handler_name    VARCHAR2(255 CHAR) DEFAULT ' ' NOT NULL,
    event_type      VARCHAR2(255 CHAR) NOT NULL,
    topic           VARCHAR2(255 CHAR) NOT NULL,
    partition_key   VARCHAR2(255 CHAR),
    message_uuid    VARCHAR2(255 CHAR) NOT NULL,
    payload         BLOB,
    metadata        CLOB               DEFAULT '{}' NOT NULL CHECK (metadata IS JSON),
    status          VARCHAR2(16 CHAR)  DEFAULT 'MOVED' NOT NULL
                    CHECK (status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS', 'RESOLVED')),
    retry_count     NUMBER(10)         DEFAULT 0 NOT NULL,
    last_error      CLOB,
    created_at      TIMESTAMP(6)       NOT NULL,
    first_failed_at TIMESTAMP(6),
    last_failed_at  TIMESTAMP(6),
    moved_at        TIMESTAMP(6)       NOT NULL,
    updated_at      TIMESTAMP(6)       NOT NULL
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- At most one DLQ row per event, side and handler. A unique index skips a
-- row only when ALL its keys are NULL, so rows without event_id are kept out
-- of this one by the CASEs (else they would collide by source and handler).
BEGIN
  EXECUTE IMMEDIATE q'[CREATE UNIQUE INDEX {{.IndexPrefix}}outbox_dlq_events_event_uq
    ON {{.DLQ}} (CASE WHEN event_id IS NOT NULL THEN event_id END,
                 CASE WHEN event_id IS NOT NULL THEN source END,
                 CASE WHEN event_id IS NOT NULL THEN handler_name END)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- The same for a consumed message without a usable event id: one row per
-- message UUID, side and handler.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE UNIQUE INDEX {{.IndexPrefix}}outbox_dlq_events_message_uq
    ON {{.DLQ}} (CASE WHEN event_id IS NULL THEN message_uuid END,
                 CASE WHEN event_id IS NULL THEN source END,
                 CASE WHEN event_id IS NULL THEN handler_name END)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- Listing with keyset pagination, by moved time and id, optionally by status.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_dlq_events_moved_idx ON {{.DLQ}} (moved_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}outbox_dlq_events_status_idx ON {{.DLQ}} (status, moved_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- The inbox: ids of processed events, per consumer namespace (' ' stands
-- for the default namespace '', which Oracle would store as NULL).
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE {{.Inbox}} (
    consumer     VARCHAR2(255 CHAR) DEFAULT ' ' NOT NULL,
    event_id     VARCHAR2(255 CHAR) NOT NULL,
    processed_at TIMESTAMP(6)       NOT NULL,
    PRIMARY KEY (consumer, event_id)
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- Inbox clean-up: ids older than the inbox ttl.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX {{.IndexPrefix}}inbox_events_processed_idx ON {{.Inbox}} (processed_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- Leases of the clean-up jobs: one instance at a time runs each job.
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE {{.Jobs}} (
    name       VARCHAR2(255 CHAR) PRIMARY KEY,
    locked_by  VARCHAR2(255 CHAR),
    locked_at  TIMESTAMP(6),
    lock_until TIMESTAMP(6)
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/
