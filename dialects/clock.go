package dialects

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// The database's clock. Every timestamp oncebox writes (created_at,
// claimed_at, heartbeat_at, next_retry_at) comes from the writer's clock
// (injectable, so that tests run on a fake one), and the recovery compares
// one instance's claimed_at and heartbeat_at with another's clock. The
// relay reads the database's clock to measure how far its own is from it
// (poller.Config.MaxClockOffset; docs/design.md, "Clocks"): at start with
// DatabaseNow, and on each recovery run with the reading that rides on the
// recovery's own first statement (RecoverStale), so that it costs no
// statement more.

// DatabaseNow implements Dialect: clock_timestamp(), the time of the
// reading itself (now() would be the transaction's start).
func (d *PostgreSQL) DatabaseNow() Query { return Query{SQL: "SELECT " + postgresNow} }

// DatabaseNow implements Dialect: UTC_TIMESTAMP(6), whatever the session's
// time zone.
func (d *MySQL) DatabaseNow() Query { return Query{SQL: "SELECT " + mysqlNowUTC} }

// DatabaseNow implements Dialect: SYSTIMESTAMP (the server's clock, not
// the session's CURRENT_TIMESTAMP) in UTC.
func (d *Oracle) DatabaseNow() Query {
	return Query{SQL: "SELECT " + oracleNowUTC + " FROM DUAL"}
}

// The expressions of the database's current time, in UTC.
const (
	postgresNow  = "clock_timestamp()"
	mysqlNowUTC  = "UTC_TIMESTAMP(6)"
	oracleNowUTC = "SYS_EXTRACT_UTC(SYSTIMESTAMP)"
)

// DatabaseTime reads the database's current time with d.DatabaseNow(), in
// UTC.
func DatabaseTime(ctx context.Context, db wsql.ContextExecutor, d Dialect) (time.Time, error) {
	q := d.DatabaseNow()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	var at time.Time
	if !rows.Next() {
		if err := rowsErr(rows); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, fmt.Errorf("oncebox: %s returned no row", q.SQL)
	}
	if err := rows.Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("oncebox: read the database's clock: %w", mysqlHint(err))
	}
	if err := rowsErr(rows); err != nil {
		return time.Time{}, err
	}
	return databaseUTC(d.Name(), at), nil
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

// probeWithClock runs q, a plain read of one row (the database's time and
// a nullable integer that says whether some row exists), and returns both:
// the probe of an idle recovery run on MySQL and Oracle, which reads the
// clock in passing.
func probeWithClock(ctx context.Context, db wsql.ContextExecutor, dialect string, q Query) (dbNow time.Time, found bool, err error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return time.Time{}, false, err
	}
	defer rows.Close()
	var hit sql.NullInt64
	if rows.Next() {
		if err := rows.Scan(&dbNow, &hit); err != nil {
			return time.Time{}, false, fmt.Errorf("scan: %w", mysqlHint(err))
		}
	}
	if err := rowsErr(rows); err != nil {
		return time.Time{}, false, err
	}
	if dbNow.IsZero() {
		return time.Time{}, false, fmt.Errorf("oncebox: %s returned no row", q.SQL)
	}
	return databaseUTC(dialect, dbNow), hit.Valid && hit.Int64 != 0, nil
}
