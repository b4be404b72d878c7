package dialects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// IsTransient reports whether err means "try later" rather than "this
// message is bad": the database or the broker could not be reached or
// went away, a connection broke, a deadline passed or the work was
// cancelled (a shutdown), the transaction was
// chosen as a deadlock or serialization victim, a lock could not be had in
// time, or the server is starting, shutting down or out of connections. It
// knows the errors of pgx, go-sql-driver/mysql, go-ora (by ORA- code),
// database/sql, the net package, and oncebox.ErrBrokerUnavailable (which
// the kafka and rabbitmq packages wrap their outages in).
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
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
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
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
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
