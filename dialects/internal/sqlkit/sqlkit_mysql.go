package sqlkit

import (
	"fmt"
	"strings"
	"time"
)

// mysqlTime is t as the DATETIME(6) columns hold it: UTC, whole
// microseconds. The driver would send nanoseconds, which the server rounds
// (MySQL) or truncates (MariaDB) on store, so that an equality test against
// a stored time (the lease release) would miss; truncating here makes every
// time compare equal to what was stored.
func MicroUTC(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// mysqlHint adds the DSN requirement to the error a driver gives when a
// DATETIME is scanned without parseTime=true.
func ScanHint(err error) error {
	if err != nil && strings.Contains(err.Error(), "into type *time.Time") {
		return fmt.Errorf("%w (the MySQL DSN needs parseTime=true&loc=UTC)", err)
	}
	return err
}
