package sqlkit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The migration hint goes only with an error that says a table is missing.
func TestMissingTable(t *testing.T) {
	for _, msg := range []string{
		`ERROR: relation "x.oncebox_migrations" does not exist (SQLSTATE 42P01)`,
		"Error 1146 (42S02): Table 'x.oncebox_migrations' doesn't exist",
		"SQL logic error: no such table: oncebox_migrations (1)",
		"ORA-00942: table or view does not exist",
	} {
		require.True(t, missingTable(fmt.Errorf("wrapped: %w", errors.New(msg))), msg)
	}
	for _, msg := range []string{
		"failed to connect to `user=root database=test`: 127.0.0.1:5999: dial error: connection refused",
		"context deadline exceeded",
		"Error 1142 (42000): SELECT command denied",
	} {
		require.False(t, missingTable(errors.New(msg)), msg)
	}
}
