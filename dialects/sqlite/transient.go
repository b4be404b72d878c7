package sqlite

import (
	"errors"
	"reflect"
	"strings"
)

// The SQLite result codes a later try may not meet (their extended codes,
// code&0xff, too): SQLITE_BUSY, another connection holds the write lock
// past the busy timeout (or a snapshot went stale, SQLITE_BUSY_SNAPSHOT),
// and SQLITE_LOCKED, a conflict inside one shared cache.
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// coder is the method of a driver error that gives its SQLite result
// code: modernc.org/sqlite's *Error has it (and so do other drivers'
// errors with the same shape). The driver is not imported: a program
// linking another database's driver links none of SQLite's.
type coder interface{ Code() int }

// IsTransient reports the SQLite errors a later try may not meet:
// SQLITE_BUSY and SQLITE_LOCKED, with their extended codes, recognised on
// an error of a SQLite driver's package (its type's path names sqlite)
// with a Code() int method. The errors every database shares are
// dialects.IsTransient's.
func IsTransient(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		c, ok := e.(coder)
		if !ok || !sqliteType(e) {
			continue
		}
		switch c.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true
		}
		return false
	}
	return false
}

// sqliteType reports whether err's type comes from a package whose path
// names sqlite (modernc.org/sqlite, …).
func sqliteType(err error) bool {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.Contains(strings.ToLower(t.PkgPath()), "sqlite")
}
