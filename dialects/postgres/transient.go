package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsTransient reports the PostgreSQL errors a later try may not meet: pgx's
// connection and timeout errors, and the SQLSTATEs of class 08 (connection
// exception), 40001 serialization failure, 40P01 deadlock, 53xxx
// insufficient resources (too many connections, out of memory or disk),
// 55P03 lock not available, 57014 query cancelled (a statement timeout),
// 57P01-57P05 (admin shutdown, crash shutdown, cannot connect now, database
// dropped, idle session timeout). The errors every database shares are
// dialects.IsTransient's.
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientSQLState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr) || pgconn.Timeout(err)
}

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
