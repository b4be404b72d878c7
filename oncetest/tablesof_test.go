package oncetest_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/oncetest"
	"github.com/oncebox/watermill-oncebox/service"
)

// The schema NewSchema made is reachable by name (TablesOf), and a
// service built over it with service.New publishes into it.
func TestServiceNewOverTheTestSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.PostgresDSN())
	require.NoError(t, err)
	t.Cleanup(pool.Close) // after NewSchema's clean-up, which drops the schema through it
	d := oncetest.NewSchema(t, wsql.BeginnerFromPgx(pool), "postgres")
	tables := oncetest.TablesOf(d)
	require.Regexp(t, `^oncetest_[0-9a-f]{12}$`, tables.Schema)
	require.Empty(t, tables.Prefix)

	svc, err := service.New(wsql.BeginnerFromPgx(pool), oncebox.Config{Database: "postgres", Tables: tables}, watermill.NopLogger{})
	require.NoError(t, err)
	defer svc.Close()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	pub, err := svc.Publisher(wsql.TxFromPgx(tx))
	require.NoError(t, err)
	require.NoError(t, pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`))))
	oncetest.RequireEvents(t, wsql.TxFromPgx(tx), d, []oncetest.Expected{{Type: "order-created"}})
}

func TestTablesOfAPrefix(t *testing.T) {
	for _, tc := range []oncebox.TablesConfig{{}, {Prefix: "svc_"}, {Schema: "s", Prefix: "p_"}} {
		d, err := registry.New("postgres", tc)
		require.NoError(t, err)
		require.Equal(t, tc, oncetest.TablesOf(d))
	}
}
