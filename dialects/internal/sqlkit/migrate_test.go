package sqlkit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// fakeStatements are a database's migration statements with $n
// placeholders, told apart by their text.
func fakeStatements(record string) sqlkit.MigratorStatements {
	q := func(sql string) func() []dialects.Query {
		return func() []dialects.Query { return []dialects.Query{{SQL: sql}} }
	}
	none := func() (dialects.Query, error) { return dialects.Query{}, nil }
	return sqlkit.MigratorStatements{
		Lock: q("LOCK"), Unlock: q("UNLOCK"), SchemaCreate: q("CREATE SCHEMA s"),
		TableCreate: func() dialects.Query { return dialects.Query{SQL: "CREATE TABLE m"} },
		Applied:     func() dialects.Query { return dialects.Query{SQL: "SELECT version FROM m"} },
		Record: func(version int, name string, at time.Time) dialects.Query {
			return dialects.Query{SQL: record, Args: []any{version, name, at}}
		},
		TestSchemaCreate: none, TestSchemaDrop: none,
	}
}

// MigrationScript writes what Migrate runs: the schema and the migrations
// table when missing, the migration's statements, and the record with the
// database's clock in place of the time.
func TestMigrationScriptIsTheBootstrapTheMigrationAndTheRecord(t *testing.T) {
	t.Parallel()
	m := dialects.Migration{Version: 2, Name: "0002_claim_order.sql", Statements: []string{"ALTER a", "ALTER b"}}
	for _, c := range []struct{ record, now, want string }{
		{"INSERT INTO m VALUES ($1, $2, $3)", "now()", "INSERT INTO m VALUES (2, '0002_claim_order.sql', now())"},
		{"INSERT INTO m VALUES (?, ?, ?)", "UTC_TIMESTAMP(6)", "INSERT INTO m VALUES (2, '0002_claim_order.sql', UTC_TIMESTAMP(6))"},
		{"INSERT INTO m VALUES (:1, :2, SYS_EXTRACT_UTC(:3))", "SYSTIMESTAMP",
			"INSERT INTO m VALUES (2, '0002_claim_order.sql', SYS_EXTRACT_UTC(SYSTIMESTAMP))"},
	} {
		r := sqlkit.Migrator{S: fakeStatements(c.record), Script: sqlkit.ScriptForm{Database: "Db", End: ";", Now: c.now}}
		s, err := r.MigrationScript(m)
		require.NoError(t, err)
		require.Equal(t, dialects.MigrationScript{Database: "Db", End: ";",
			Statements: []string{"CREATE SCHEMA s", "CREATE TABLE m", "ALTER a", "ALTER b", c.want}}, s)
	}

	// A value that cannot be a literal is refused, not written.
	for _, name := range []string{"it's.sql", `back\slash.sql`} {
		r := sqlkit.Migrator{S: fakeStatements("INSERT INTO m VALUES ($1, $2, $3)")}
		_, err := r.MigrationScript(dialects.Migration{Version: 1, Name: name})
		require.ErrorContains(t, err, "cannot be written as a literal")
	}
	r := sqlkit.Migrator{S: fakeStatements("INSERT INTO m VALUES ($1, $2, $3, $4)")}
	_, err := r.MigrationScript(m)
	require.ErrorContains(t, err, "parameter 4 has no value")
}
