-- 0001_init.sql #00
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE svc.p_outbox_events (
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

-- 0001_init.sql #01
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_events_pending_idx
    ON svc.p_outbox_events (status, event_type, next_retry_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #02
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_events_in_process_idx
    ON svc.p_outbox_events (status, claimed_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #03
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_events_status_upd_idx
    ON svc.p_outbox_events (status, updated_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #04
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE svc.p_outbox_dlq_events (
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

-- 0001_init.sql #05
BEGIN
  EXECUTE IMMEDIATE q'[CREATE UNIQUE INDEX svc.p_outbox_dlq_events_event_uq
    ON svc.p_outbox_dlq_events (CASE WHEN event_id IS NOT NULL THEN event_id END,
                 CASE WHEN event_id IS NOT NULL THEN source END,
                 CASE WHEN event_id IS NOT NULL THEN handler_name END)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #06
BEGIN
  EXECUTE IMMEDIATE q'[CREATE UNIQUE INDEX svc.p_outbox_dlq_events_message_uq
    ON svc.p_outbox_dlq_events (CASE WHEN event_id IS NULL THEN message_uuid END,
                 CASE WHEN event_id IS NULL THEN source END,
                 CASE WHEN event_id IS NULL THEN handler_name END)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #07
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_dlq_events_moved_idx ON svc.p_outbox_dlq_events (moved_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #08
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_dlq_events_status_idx ON svc.p_outbox_dlq_events (status, moved_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #09
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE svc.p_inbox_events (
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

-- 0001_init.sql #10
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_inbox_events_processed_idx ON svc.p_inbox_events (processed_at)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0001_init.sql #11
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE svc.p_outbox_jobs (
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

-- 0002_claim_order.sql #00
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_events_due_idx
    ON svc.p_outbox_events (status, event_type, next_retry_at, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0002_claim_order.sql #01
BEGIN
  EXECUTE IMMEDIATE q'[DROP INDEX svc.p_outbox_events_pending_idx]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE != -1418 THEN RAISE; END IF;
END;
/

-- 0003_heartbeats.sql #00
BEGIN
  EXECUTE IMMEDIATE q'[ALTER TABLE svc.p_outbox_events ADD (claimed_by VARCHAR2(255 CHAR))]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE != -1430 THEN RAISE; END IF;
END;
/

-- 0003_heartbeats.sql #01
BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE svc.p_outbox_instances (
    instance_id  VARCHAR2(255 CHAR) PRIMARY KEY,
    heartbeat_at TIMESTAMP(6)       NOT NULL
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0004_key_order.sql #00
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_events_key_idx
    ON svc.p_outbox_events (event_type, partition_key, status, id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

-- 0004_key_order.sql #01
BEGIN
  EXECUTE IMMEDIATE q'[CREATE INDEX svc.p_outbox_dlq_events_key_idx
    ON svc.p_outbox_dlq_events (event_type, partition_key, event_id)]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE NOT IN (-955, -1408) THEN RAISE; END IF;
END;
/

