package dialects

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// StoredEvent is one outbox row as Inspector.EventsList returns it: what
// was published and where the row stands.
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

// ScanTargets returns the destinations of a row of EventsList's statement,
// in the order of its select list: the database packages scan with it.
func (e *StoredEvent) ScanTargets() []any {
	return []any{&e.ID, &e.EventType, &e.Topic, &e.Key, &e.MessageUUID, &e.Payload, &e.Metadata, &e.Status, &e.RetryCount, &e.CreatedAt}
}
