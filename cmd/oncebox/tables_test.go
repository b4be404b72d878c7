package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sijms/go-ora/v2/network"
	"github.com/stretchr/testify/require"
)

// TestIsMissingTable: the drivers' typed errors, wrapped, decide; Oracle's
// ORA-00942 is here because no Oracle runs on the test machine (PostgreSQL's
// and MariaDB's come from the servers in TestMissingTablesHint*).
func TestIsMissingTable(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		fmt.Errorf("read: %w", &network.OracleError{ErrCode: 942}):             true,
		fmt.Errorf("read: %w", &network.OracleError{ErrCode: 1017}):            false,
		fmt.Errorf("read: %w", &pgconn.PgError{Code: "42P01"}):                 true,
		fmt.Errorf("read: %w", &pgconn.PgError{Code: "42703"}):                 false,
		fmt.Errorf("read: %w", &mysql.MySQLError{Number: 1146}):                true,
		fmt.Errorf("read: %w", &mysql.MySQLError{Number: 1054}):                false,
		errors.New(`relation "outbox_events" does not exist (SQLSTATE 42P01)`): false,
	} {
		require.Equal(t, want, isMissingTable(err), err.Error())
		require.Equal(t, want, errors.Is(withTablesHint(err), err) && withTablesHint(err) != err, err.Error())
	}
	require.NoError(t, withTablesHint(nil))
}
