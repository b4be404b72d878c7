package dialects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// IsTransient reports whether err means "try later" rather than "this
// message is bad": the database or the broker could not be reached or
// went away, a connection broke, a deadline passed or the work was
// cancelled (a shutdown), the transaction was
// chosen as a deadlock or serialization victim, a lock could not be had in
// time, or the server is starting, shutting down or out of connections. It
// knows the errors of pgx, go-sql-driver/mysql (without importing it: see
// mysqlErrorNumber), go-ora (by ORA- code), database/sql, the net package,
// and oncebox.ErrBrokerUnavailable (which the kafka and rabbitmq packages
// wrap their outages in).
//
// The poison queue nacks such errors instead of parking the message (see
// middleware.PoisonConfig.ShouldPoison), so that a handler whose database
// restarts does not fill the DLQ.
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
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientSQLState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || pgconn.Timeout(err) {
		return true
	}
	if number, ok := mysqlErrorNumber(err); ok {
		switch number {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1205, // lock wait timeout
			1213, // deadlock victim
			1927, // connection killed (MariaDB)
			3024: // query execution interrupted, max_execution_time (MySQL)
			return true
		}
		return false
	}
	msg := err.Error()
	for _, code := range transientOracleCodes {
		if strings.Contains(msg, code) {
			return true
		}
	}
	return false
}

// transientSQLState reports the PostgreSQL SQLSTATEs that a later try may
// not meet: class 08 (connection exception), 40001 serialization failure,
// 40P01 deadlock, 53xxx insufficient resources (too many connections, out
// of memory or disk), 55P03 lock not available, 57014 query cancelled (a
// statement timeout), 57P01-57P05 (admin shutdown, crash shutdown, cannot
// connect now, database dropped, idle session timeout).
func transientSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57P"):
		return true
	}
	switch code {
	case "40001", "40P01", "55P03", "57014":
		return true
	}
	return false
}

// transientOracleCodes are the ORA- errors a later try may not meet:
// deadlock, resource busy, end-of-file on the channel, not connected,
// no listener, connect timeout, initialisation or shutdown in progress,
// TNS could not resolve / lost contact.
var transientOracleCodes = []string{
	"ORA-00060", "ORA-00054", "ORA-03113", "ORA-03114", "ORA-03135",
	"ORA-12541", "ORA-12170", "ORA-12514", "ORA-12537", "ORA-12547",
	"ORA-01033", "ORA-01034", "ORA-01089",
}

// mysqlDriverPkg is the import path of go-sql-driver/mysql. The dialects
// package does not import the driver, so that a PostgreSQL or Oracle binary
// does not link it (docs/modules.md): its errors are recognised by their
// type's package path and name, the way the relay recognises Sarama's and
// amqp091-go's. dialects/mysql_errors_test.go checks this against the
// driver's real values.
const mysqlDriverPkg = "github.com/go-sql-driver/mysql"

// mysqlErrorNumber returns the server error number of the first
// *mysql.MySQLError in err's chain (the chain errors.As walks), and false
// when there is none.
func mysqlErrorNumber(err error) (number uint16, ok bool) {
	inChain(err, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return false
		}
		t := v.Elem().Type()
		if t.Name() != "MySQLError" || t.PkgPath() != mysqlDriverPkg {
			return false
		}
		f := v.Elem().FieldByName("Number")
		if f.Kind() != reflect.Uint16 {
			return false
		}
		number, ok = uint16(f.Uint()), true
		return true
	})
	return number, ok
}

// isMySQLInvalidConn reports whether err's chain holds the driver's
// mysql.ErrInvalidConn, a plain errors.New("invalid connection") value
// (the driver's connection broke): recognised by its type and exact text.
func isMySQLInvalidConn(err error) bool {
	return inChain(err, func(e error) bool {
		t := reflect.TypeOf(e)
		return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "errors" && t.Elem().Name() == "errorString" &&
			e.Error() == "invalid connection"
	})
}

// inChain reports whether match holds for err or an error it wraps, in the
// order errors.As looks at them (Unwrap() error and Unwrap() []error).
func inChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, match) {
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
