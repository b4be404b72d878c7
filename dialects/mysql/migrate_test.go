package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqldialect "github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// TestMySQLFailedMigrationReleasesItsLock makes a migration fail after it
// took GET_LOCK (a migrations table that reads back garbage) and checks that
// the session lock is free again: the connection that held it went back to
// the pool, so without the release every other instance would wait 600 s.
func TestMySQLFailedMigrationReleasesItsLock(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).NewEmpty(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := e.DB.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+schemaOf(e.Tables.Migrations))
	require.NoError(t, err)
	_, err = e.DB.ExecContext(ctx, "CREATE TABLE "+e.Tables.Migrations+" (version VARCHAR(10) PRIMARY KEY)")
	require.NoError(t, err)
	_, err = e.DB.ExecContext(ctx, "INSERT INTO "+e.Tables.Migrations+" VALUES ('garbage')")
	require.NoError(t, err)

	err = migrate.Migrate(ctx, e.Beginner, e.Dialect)
	require.Error(t, err, "the applied versions cannot be read")
	t.Logf("migration failed as arranged: %v", err)

	name := e.Dialect.(*mysqldialect.Dialect).MigrationLockSQL()[0].Args[0]
	var free int
	require.NoError(t, e.DB.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", name).Scan(&free))
	require.Equal(t, 1, free, "the failed migration released %v", name)
}

func schemaOf(table string) string {
	for i := range table {
		if table[i] == '.' {
			return table[:i]
		}
	}
	return table
}
