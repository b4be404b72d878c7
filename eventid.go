package oncebox

import (
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// EventID is the 128-bit, time-ordered id of an event: a UUID version 7
// (RFC 9562). Ids made by one process increase strictly, so inserts land at the
// tail of the primary-key index.
type EventID [16]byte

// NewEventID returns a new UUIDv7. Within a process the ids increase strictly
// (RFC 9562 method 3: the 12 bits after the millisecond timestamp hold a
// sub-millisecond counter), even when called faster than the clock ticks.
func NewEventID() (EventID, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return EventID{}, fmt.Errorf("oncebox: generate event id: %w", err)
	}
	return EventID(u), nil
}

// ParseEventID parses the canonical text form of an event id. It accepts any
// UUID version so that ids made by other producers can still be deduplicated.
func ParseEventID(s string) (EventID, error) {
	if s == "" {
		return EventID{}, fmt.Errorf("%w: event id is empty", ErrInvalidInput)
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return EventID{}, fmt.Errorf("%w: event id %q: %v", ErrInvalidInput, s, err)
	}
	return EventID(u), nil
}

// String returns the canonical text form, xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func (id EventID) String() string { return uuid.UUID(id).String() }

// IsZero reports whether id is the all-zero id.
func (id EventID) IsZero() bool { return id == EventID{} }

// Version returns the UUID version (7 for ids made by [NewEventID]).
func (id EventID) Version() int { return int(id[6] >> 4) }

// Time returns the millisecond timestamp of a version 7 id.
func (id EventID) Time() time.Time {
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 |
		int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	return time.UnixMilli(ms)
}

// MarshalText implements encoding.TextMarshaler.
func (id EventID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *EventID) UnmarshalText(b []byte) error {
	p, err := ParseEventID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// Value implements driver.Valuer with the canonical text form, which
// PostgreSQL's uuid type accepts. Dialects that store ids as bytes encode them
// themselves.
func (id EventID) Value() (driver.Value, error) { return id.String(), nil }

// Scan implements sql.Scanner from a 16-byte binary value (BINARY(16),
// RAW(16)) or the text form (PostgreSQL uuid).
func (id *EventID) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		if len(v) == 16 {
			copy(id[:], v)
			return nil
		}
		return id.UnmarshalText(v)
	case string:
		return id.UnmarshalText([]byte(v))
	case [16]byte:
		*id = v
		return nil
	default:
		return fmt.Errorf("oncebox: cannot scan %T into EventID", src)
	}
}
