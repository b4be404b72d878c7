package sqlite

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// binder binds parameters as anonymous ?, in the order they are written.
type binder = sqlkit.Binder[style]

// style is SQLite's way of binding: anonymous ? placeholders, bound in
// text order (each value bound where it is used), a time bound as INTEGER
// unix microseconds in UTC, no limit on an IN list beyond the bind
// parameters. The statements of a fixed shape, a dozen parameters at
// most, are written with numbered ?n, which may repeat. Not for the
// large ones: SQLite looks a numbered or named parameter up in a list
// (and modernc.org/sqlite asks each one's name), so a statement's cost
// grew with the square of its parameters: an INSERT of 4,000 rows of
// eight parameters took 2.3 s with ?n, 6.1 s with $n, 39 ms with ?
// (measured, modernc.org/sqlite v1.62.0).
type style struct{}

func (style) Placeholder(int) string { return "?" }

func (style) Time(v time.Time, bind func(any) string) string { return bind(us(v)) }

func (style) MaxInList() int { return 0 }

// us is t as every time column holds it: unix microseconds (UTC by
// definition), an INTEGER, so that ORDER BY next_retry_at, id is numeric.
func us(t time.Time) int64 { return t.UnixMicro() }

// usPtr is us of a nullable time.
func usPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return us(*t)
}

// microTime scans a time column whether the driver gives the stored
// INTEGER (no _inttotime in the DSN) or a time.Time it converted.
type microTime struct{ t *time.Time }

func (m microTime) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*m.t = time.UnixMicro(v).UTC()
	case time.Time:
		*m.t = v.UTC()
	default:
		return fmt.Errorf("sqlite: a time column holds %T, not an INTEGER of microseconds", src)
	}
	return nil
}

// nullMicroTime is microTime of a nullable column.
type nullMicroTime struct{ t **time.Time }

func (m nullMicroTime) Scan(src any) error {
	if src == nil {
		*m.t = nil
		return nil
	}
	var t time.Time
	if err := (microTime{&t}).Scan(src); err != nil {
		return err
	}
	*m.t = &t
	return nil
}

var (
	_ sql.Scanner = microTime{}
	_ sql.Scanner = nullMicroTime{}
)
