package dlq

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// Page limits.
const (
	// DefaultLimit is the page size when Page.Limit is 0.
	DefaultLimit = 50
	// MaxLimit is the largest Page.Limit.
	MaxLimit = 1000
	// MaxIDs is the most ids one SetStatusMany or DeleteMany takes.
	MaxIDs = 1000
)

// Filter selects DLQ rows. A zero field does not filter, so the zero Filter
// matches every row.
type Filter struct {
	// Statuses keeps rows in any of these statuses.
	Statuses []oncebox.DLQStatus
	// EventType keeps rows of this event type.
	EventType string
	// Source keeps rows of this side: publisher or consumer.
	Source oncebox.DLQSource
	// MovedFrom keeps rows moved to the DLQ at or after it.
	MovedFrom time.Time
	// MovedTo keeps rows moved before it.
	MovedTo time.Time
}

// Validate checks the filter: known statuses and source, an EventType of
// valid UTF-8 without NUL, MovedFrom not after MovedTo. Errors wrap
// oncebox.ErrInvalidInput and name the field.
func (f Filter) Validate() error {
	var errs []error
	for _, s := range f.Statuses {
		if !knownStatus(s) {
			errs = append(errs, fmt.Errorf("Filter.Statuses: unknown status %q", s))
		}
	}
	if len(f.EventType) > oncebox.MaxEventTypeLength {
		errs = append(errs, fmt.Errorf("Filter.EventType: longer than %d characters", oncebox.MaxEventTypeLength))
	}
	if reason := badText(f.EventType); reason != "" {
		errs = append(errs, fmt.Errorf("Filter.EventType: %s", reason))
	}
	switch f.Source {
	case "", oncebox.DLQSourcePublisher, oncebox.DLQSourceConsumer:
	default:
		errs = append(errs, fmt.Errorf("Filter.Source: unknown source %q (publisher or consumer)", f.Source))
	}
	if !f.MovedFrom.IsZero() && !f.MovedTo.IsZero() && f.MovedFrom.After(f.MovedTo) {
		errs = append(errs, fmt.Errorf("Filter.MovedFrom %s is after Filter.MovedTo %s",
			f.MovedFrom.Format(time.RFC3339Nano), f.MovedTo.Format(time.RFC3339Nano)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: dlq: %w", oncebox.ErrInvalidInput, err)
	}
	return nil
}

// badText says why s cannot be compared with a text column, "" when it can:
// PostgreSQL refuses a NUL or invalid UTF-8 with an error (a 500 for the
// REST handler), MySQL converts them and matches other rows than asked.
func badText(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

// dialect returns the filter for the dialect, its statuses de-duplicated:
// however many a caller repeats, at most the four statuses reach the SQL
// (MySQL would refuse a statement of more than 65,535 placeholders).
func (f Filter) dialect() dialects.DLQFilter {
	var statuses []oncebox.DLQStatus
	seen := make(map[oncebox.DLQStatus]bool, 4)
	for _, s := range f.Statuses {
		if !seen[s] {
			seen[s] = true
			statuses = append(statuses, s)
		}
	}
	return dialects.DLQFilter{Statuses: statuses, EventType: f.EventType, Source: f.Source,
		MovedFrom: f.MovedFrom, MovedTo: f.MovedTo}
}

// Page asks for one page of a listing.
type Page struct {
	// Limit is the most rows returned: 0 means DefaultLimit; at most
	// MaxLimit.
	Limit int
	// After is the cursor a previous page returned; nil for the first page.
	After *Cursor
}

func (p Page) limit() (int, error) {
	switch {
	case p.Limit == 0:
		return DefaultLimit, nil
	case p.Limit < 0 || p.Limit > MaxLimit:
		return 0, fmt.Errorf("%w: dlq: Page.Limit must be between 1 and %d, got %d", oncebox.ErrInvalidInput, MaxLimit, p.Limit)
	}
	return p.Limit, nil
}

// Cursor is a position in the (moved_at, id) order of a listing: the last
// row of a page. The next page starts after it.
type Cursor struct {
	MovedAt time.Time
	ID      oncebox.EventID
}

// cursorLen is the size of an encoded cursor: moved_at in Unix microseconds
// (the database's precision), then the id.
const cursorLen = 8 + 16

// String returns the cursor in an opaque, URL-safe form (unpadded
// base64url), for a REST API's query string. ParseCursor reads it back.
func (c Cursor) String() string {
	var b [cursorLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.MovedAt.UnixMicro()))
	copy(b[8:], c.ID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ParseCursor reads a cursor written by Cursor.String. The error wraps
// oncebox.ErrInvalidInput and quotes the input.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != cursorLen {
		return Cursor{}, fmt.Errorf("%w: dlq: cursor %q is not one this store wrote", oncebox.ErrInvalidInput, s)
	}
	var c Cursor
	c.MovedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC()
	copy(c.ID[:], b[8:])
	return c, nil
}
