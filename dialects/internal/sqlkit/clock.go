package sqlkit

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The expressions of the database's current time, in UTC.
const (
	PostgresNow  = "clock_timestamp()"
	MysqlNowUTC  = "UTC_TIMESTAMP(6)"
	OracleNowUTC = "SYS_EXTRACT_UTC(SYSTIMESTAMP)"
)

// DatabaseTime reads the database's current time with q, its database's
// reading of the clock (one row of one column), in UTC: DatabaseTime of
// the database called dialect.
func DatabaseTime(ctx context.Context, db wsql.ContextExecutor, dialect string, q dialects.Query) (time.Time, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	var at time.Time
	if !rows.Next() {
		if err := RowsErr(rows); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, fmt.Errorf("oncebox: %s returned no row", q.SQL)
	}
	if err := rows.Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("oncebox: read the database's clock: %w", ScanHint(err))
	}
	if err := RowsErr(rows); err != nil {
		return time.Time{}, err
	}
	return databaseUTC(dialect, at), nil
}

// databaseUTC returns at, a reading of the database's clock in UTC, as a
// UTC time. PostgreSQL's is an instant (timestamptz). MySQL's
// UTC_TIMESTAMP and Oracle's SYS_EXTRACT_UTC are wall clocks without a
// zone, which the drivers put in a location of their own (the DSN's loc
// for go-sql-driver/mysql): their fields are UTC's.
func databaseUTC(dialect string, at time.Time) time.Time {
	if dialect == "postgres" {
		return at.UTC()
	}
	return time.Date(at.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.UTC)
}

// ProbeWithClock runs q, a plain read of one row (the database's time and
// a nullable integer that says whether some row exists), and returns both:
// the probe of an idle recovery run on MySQL and Oracle, which reads the
// clock in passing.
func ProbeWithClock(ctx context.Context, db wsql.ContextExecutor, dialect string, q dialects.Query) (dbNow time.Time, found bool, err error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, false, err
	}
	defer rows.Close()
	var hit sql.NullInt64
	if rows.Next() {
		if err := rows.Scan(&dbNow, &hit); err != nil {
			return time.Time{}, false, fmt.Errorf("scan: %w", ScanHint(err))
		}
	}
	if err := RowsErr(rows); err != nil {
		return time.Time{}, false, err
	}
	if dbNow.IsZero() {
		return time.Time{}, false, fmt.Errorf("oncebox: %s returned no row", q.SQL)
	}
	return databaseUTC(dialect, dbNow), hit.Valid && hit.Int64 != 0, nil
}
