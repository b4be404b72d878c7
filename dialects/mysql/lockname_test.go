package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	mysqldialect "github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// Two services whose tables live in the DSN's database (no tables.schema),
// in two databases of one server, do not share the migration lock: its
// name was hashed from the unqualified table name, so one service's
// migration made the other's wait (and time out after 600 s).
func TestMySQLMigrationLockIsPerDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("mysql", dbtest.MySQLDSN())
	require.NoError(t, err)
	defer admin.Close()
	d, err := mysqldialect.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	lock := d.MigrationLockSQL()
	require.Len(t, lock, 2)

	// take runs the lock statements on a connection to database db, giving
	// up at once if another session holds the lock.
	take := func(db string) error {
		_, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+db)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+db) })
		cfg, err := mysql.ParseDSN(dbtest.MySQLDSN())
		require.NoError(t, err)
		cfg.DBName = db
		pool, err := sql.Open("mysql", cfg.FormatDSN())
		require.NoError(t, err)
		t.Cleanup(func() { _ = pool.Close() })
		conn, err := pool.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		args := append([]any(nil), lock[0].Args...)
		args[len(args)-1] = 0 // the timeout: do not wait
		if _, err := conn.ExecContext(ctx, lock[0].SQL, args...); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, lock[1].SQL, lock[1].Args...)
		return err
	}
	require.NoError(t, take("oncebox_lock_a"))
	require.NoError(t, take("oncebox_lock_b"), "another database's migration does not hold this one's lock")
	require.Error(t, take("oncebox_lock_a"), "a second migration of one database waits for the first")
}
