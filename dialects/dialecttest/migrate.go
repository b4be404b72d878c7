package dialecttest

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// txBeginner is what a confused caller might build: a transaction that also
// claims to begin transactions.
type txBeginner struct{ wsql.Tx }

func (txBeginner) BeginTx(context.Context, *sql.TxOptions) (wsql.Tx, error) { return nil, nil }

// tableExists reports whether a select from table works.
func tableExists(e *Env, table string) bool {
	rows, err := e.DB.QueryContext(context.Background(), "SELECT 1 FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return false
	}
	_ = rows.Close()
	return true
}

func testMigrate(t *testing.T, tg Target) {
	t.Parallel()
	e := tg.NewEmpty(t)
	ctx := context.Background()

	// A transaction is refused, and nothing is created.
	tx, err := e.Beginner.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.ErrorIs(t, migrate.Migrate(ctx, txBeginner{tx}, e.Dialect), migrate.ErrInTransaction)
	require.NoError(t, tx.Rollback())
	require.ErrorIs(t, migrate.Migrate(ctx, e.Beginner, nil), oncebox.ErrInvalidInput)
	require.ErrorIs(t, migrate.Migrate(ctx, nil, e.Dialect), oncebox.ErrInvalidInput)
	require.False(t, tableExists(e, e.Tables.Events))

	// Four instances start at once: each version is applied once.
	const instances = 4
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Go(func() { errs[i] = migrate.Migrate(ctx, e.Beginner, e.Dialect) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "instance %d", i)
	}
	migrations, err := e.Dialect.Migrations()
	require.NoError(t, err)
	require.Equal(t, len(migrations), e.Count(t, e.Tables.Migrations, ""), "every version applied once")

	// A second run does nothing.
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, e.Dialect))
	require.Equal(t, len(migrations), e.Count(t, e.Tables.Migrations, ""))
	for _, name := range []string{e.Tables.Events, e.Tables.DLQ, e.Tables.Inbox, e.Tables.Jobs, e.Tables.Migrations} {
		require.True(t, tableExists(e, name), name)
	}
	applied, err := migrate.Applied(ctx, e.Beginner, e.Dialect)
	require.NoError(t, err)
	for _, m := range migrations {
		require.True(t, applied[m.Version], m.Name)
	}

	// A table prefix, over database/sql.
	var cfg oncebox.TablesConfig
	if schema, _, ok := strings.Cut(e.Tables.Events, "."); ok {
		cfg.Schema = schema
	}
	cfg.Prefix = e.Tables.Prefix + "billing_"
	d, err := registry.New(tg.Name, cfg)
	require.NoError(t, err)
	if tg.Name == "oracle" {
		t.Cleanup(func() {
			for _, table := range []string{d.Tables().DLQ, d.Tables().Events, d.Tables().Inbox, d.Tables().Jobs, d.Tables().Migrations} {
				_, _ = e.DB.ExecContext(context.Background(), "DROP TABLE "+table+" PURGE")
			}
		})
	}
	require.NoError(t, migrate.Migrate(ctx, wsql.BeginnerFromStdSQL(e.DB), d))
	require.True(t, tableExists(e, d.Tables().Events))
	require.True(t, tableExists(e, d.Tables().Inbox))
	require.Zero(t, e.Count(t, e.Tables.Events, ""), "the unprefixed tables are untouched")
}
