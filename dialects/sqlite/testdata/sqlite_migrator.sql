-- MigrationLock #1
CREATE TABLE IF NOT EXISTS oncebox_migrations_lock (id INTEGER PRIMARY KEY CHECK (id = 1), locked_at INTEGER NOT NULL);
-- args: []

-- MigrationLock #2
INSERT INTO oncebox_migrations_lock (id, locked_at) VALUES (1, CAST(unixepoch('subsec') * 1000000 AS INTEGER))
ON CONFLICT (id) DO UPDATE SET locked_at = excluded.locked_at;
-- args: []

-- MigrationsTableCreate
CREATE TABLE IF NOT EXISTS oncebox_migrations (
    version    INTEGER   PRIMARY KEY,
    name       TEXT      NOT NULL,
    applied_at TIMESTAMP NOT NULL
);
-- args: []

-- MigrationsSelect
SELECT version FROM oncebox_migrations ORDER BY version;
-- args: []

-- Backlog
SELECT 'outbox', g.event_type, g.status, g.n, g.next_retry_at FROM (
    SELECT event_type, status, count(*) AS n, min(next_retry_at) AS m, next_retry_at FROM outbox_events
     GROUP BY event_type, status) g
UNION ALL
SELECT 'dlq', source, status, count(*), NULL FROM outbox_dlq_events GROUP BY source, status;
-- args: []

-- EventsList
SELECT id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, created_at
  FROM outbox_events
 ORDER BY id;
-- args: []

