package dialects_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/dialects/oracle"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

func TestTablesAreQualifiedAndValidated(t *testing.T) {
	t.Parallel()
	tb, err := dialects.NewTables(oncebox.TablesConfig{Schema: "svc", Prefix: "billing_"})
	require.NoError(t, err)
	require.Equal(t, dialects.Tables{
		Events: "svc.billing_outbox_events", DLQ: "svc.billing_outbox_dlq_events",
		Inbox: "svc.billing_inbox_events", Jobs: "svc.billing_outbox_jobs",
		Migrations: "svc.billing_oncebox_migrations", Instances: "svc.billing_outbox_instances", Prefix: "billing_",
	}, tb)

	for _, bad := range []oncebox.TablesConfig{
		{Schema: "svc; DROP TABLE x"}, {Schema: "a.b"}, {Schema: `"quoted"`}, {Prefix: "p-"},
		{Prefix: "1abc"}, {Prefix: strings.Repeat("p", 41)}, {Schema: "sch ema"},
	} {
		_, err := postgres.New(bad)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, "%+v", bad)
	}
}

func TestPlaceholderStyles(t *testing.T) {
	t.Parallel()
	require.Equal(t, "$3", postgres.Database.Placeholder(3))
	require.Equal(t, "?", mysql.Database.Placeholder(3))
	require.Equal(t, ":3", oracle.Database.Placeholder(3))
	for _, db := range registry.All() {
		require.NotNil(t, db.Placeholder, "%s: every database tells its placeholders (the conformance suite writes statements of its own)", db.Name)
	}
}
