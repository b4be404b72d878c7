package mysql_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/stretchr/testify/require"
)

// MySQLError is a look-alike of the driver's error type in another package:
// the dialects recognise the driver's by its package path, not its name.
type MySQLError struct{ Number uint16 }

func (e *MySQLError) Error() string { return fmt.Sprintf("Error %d", e.Number) }

// The dialects package recognises go-sql-driver/mysql's errors without
// importing the driver (a PostgreSQL binary links no MySQL driver): this
// checks the recognition against the driver's real types and values,
// however they are wrapped.
func TestIsTransientKnowsTheMySQLDriversErrorsWithoutImportingIt(t *testing.T) {
	t.Parallel()
	for _, number := range []uint16{1040, 1053, 1205, 1213, 1927, 3024} {
		err := &mysql.MySQLError{Number: number, Message: "from the server"}
		require.True(t, registry.IsTransient(err), "%v", err)
		require.True(t, registry.IsTransient(fmt.Errorf("claim: %w", err)), "wrapped %v", err)
		require.True(t, registry.IsTransient(errors.Join(errors.New("rollback failed"), fmt.Errorf("claim: %w", err))),
			"joined %v", err)
	}
	for _, err := range []error{
		&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"},
		fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1064, Message: "syntax"}),
		&MySQLError{Number: 1213},
		errors.New("invalid connection: not the driver's"),
	} {
		require.False(t, registry.IsTransient(err), "%v", err)
	}
	require.True(t, registry.IsTransient(mysql.ErrInvalidConn))
	require.True(t, registry.IsTransient(fmt.Errorf("exec: %w", mysql.ErrInvalidConn)))
}
