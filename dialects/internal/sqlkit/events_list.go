package sqlkit

import (
	"github.com/oncebox/watermill-oncebox/dialects"
)

// EventsList is the statement of Inspector.EventsList, the same text on
// every database: every row of the table in id order, which is publish order for
// the events of one process (UUIDv7). A full scan of the primary key: it is
// meant for tests and tools over small tables, never for the relay.
func EventsList(t dialects.Tables) dialects.Query {
	return dialects.Query{SQL: `SELECT id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, created_at
  FROM ` + t.Events + `
 ORDER BY id`}
}
