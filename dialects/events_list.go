package dialects

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// StoredEvent is one outbox row as EventsList returns it: what was
// published and where the row stands. Scan it with StoredEvent.ScanTargets.
type StoredEvent struct {
	ID          oncebox.EventID
	EventType   string
	Topic       string
	Key         *string // nil: published without an ordering key
	MessageUUID string
	Payload     []byte
	// Metadata is the stored JSON object of string values.
	Metadata   []byte
	Status     oncebox.Status
	RetryCount int
	CreatedAt  time.Time
}

// ScanTargets returns the destinations of a row of EventsList, in the order
// of its select list.
func (e *StoredEvent) ScanTargets() []any {
	return []any{&e.ID, &e.EventType, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &e.Metadata, &e.Status, &e.RetryCount, &e.CreatedAt}
}

// eventsList is the statement of EventsList, the same text on the three
// databases: every row of the table in id order, which is publish order for
// the events of one process (UUIDv7). A full scan of the primary key: it is
// meant for tests and tools over small tables, never for the relay.
func eventsList(t Tables) Query {
	return Query{SQL: `SELECT id, event_type, topic, partition_key, message_uuid, payload, metadata, status, retry_count, created_at
  FROM ` + t.Events + `
 ORDER BY id`}
}

// EventsList implements Dialect.
func (d *PostgreSQL) EventsList() Query { return eventsList(d.tables) }

// EventsList implements Dialect.
func (d *MySQL) EventsList() Query { return eventsList(d.tables) }

// EventsList implements Dialect.
func (d *Oracle) EventsList() Query { return eventsList(d.tables) }
