package dialects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"syscall"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// IsTransient reports whether err means "try later" in a way every
// database shares: the database or the broker could not be reached or went
// away, a connection broke, a deadline passed or the work was cancelled (a
// shutdown). It knows database/sql's errors, the net package's,
// go-sql-driver/mysql's broken connection and oncebox.ErrBrokerUnavailable
// (which the kafka and rabbitmq packages wrap their outages in). Each
// database adds its own codes (a deadlock victim, a server shutting down,
// too many connections) in its Database.IsTransient; registry.IsTransient
// asks them all, and is what the poison queue uses.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, oncebox.ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		isMySQLInvalidConn(err) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// isMySQLInvalidConn reports whether err's chain holds go-sql-driver/mysql's
// mysql.ErrInvalidConn, a plain errors.New("invalid connection") value
// (the driver's connection broke): recognised by its type and exact text,
// without importing the driver.
func isMySQLInvalidConn(err error) bool {
	return InChain(err, func(e error) bool {
		t := reflect.TypeOf(e)
		return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "errors" && t.Elem().Name() == "errorString" &&
			e.Error() == "invalid connection"
	})
}

// InChain reports whether match holds for err or an error it wraps, in the
// order errors.As looks at them (Unwrap() error and Unwrap() []error). The
// database packages use it to find a driver's error by its type's package
// path without importing the driver.
func InChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if InChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
