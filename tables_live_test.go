package oncebox_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	mysqldialect "github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/dialects/registry"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// TestReservedSchemaIsRefusedBeforeMigrate: a schema named "user" used to
// pass validation and fail at migrate time with a syntax error. It is now
// refused when the dialect is built, naming the field.
func TestReservedSchemaIsRefusedBeforeMigrate(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"postgres", "mysql", "oracle"} {
		_, err := registry.New(name, oncebox.TablesConfig{Schema: "user"})
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		require.ErrorContains(t, err, `tables.schema: "user" is a reserved word`, name)
	}
}

// TestUnusualSchemasMigrate: names the validation accepts must migrate.
// "action" is a keyword of all three engines and of SQL:2016 but reserved
// by none; a mixed-case name is folded by PostgreSQL and kept by MariaDB,
// consistently as long as every statement writes it unquoted.
func TestUnusualSchemasMigrate(t *testing.T) {
	t.Parallel()
	suffix := make([]byte, 4)
	_, err := rand.Read(suffix)
	require.NoError(t, err)
	schemas := []string{"action", "Oncebox_Mixed_" + hex.EncodeToString(suffix)}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pool, err := pgxpool.New(ctx, dbtest.PostgresDSN())
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		require.NoError(t, pool.Ping(ctx), "the tests need PostgreSQL at %s", dbtest.PostgresDSN())
		for _, schema := range schemas {
			drop := func() {
				_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				require.NoError(t, err)
			}
			drop()
			t.Cleanup(drop)
			d, err := postgres.New(oncebox.TablesConfig{Schema: schema, Prefix: "p_"})
			require.NoError(t, err, schema)
			require.NoError(t, migrate.Migrate(ctx, wsql.BeginnerFromPgx(pool), d), schema)
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+d.Tables().Events).Scan(&n), schema)
			require.Zero(t, n)
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		mcfg, err := mysql.ParseDSN(dbtest.MySQLDSN())
		require.NoError(t, err)
		db, err := sql.Open("mysql", mcfg.FormatDSN())
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		require.NoError(t, db.PingContext(ctx), "the tests need MariaDB at %s", dbtest.MySQLDSN())
		for _, schema := range schemas {
			drop := func() {
				_, err := db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+schema)
				require.NoError(t, err)
			}
			drop()
			t.Cleanup(drop)
			d, err := mysqldialect.New(oncebox.TablesConfig{Schema: schema, Prefix: "p_"})
			require.NoError(t, err, schema)
			require.NoError(t, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(db), d), schema)
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM "+d.Tables().Events).Scan(&n), schema)
			require.Zero(t, n)
		}
	})
}
