package dialects_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// The channel is a plain identifier of at most 63 bytes, distinct for
// tables that differ by schema or prefix, and the same for names that
// PostgreSQL folds to the same tables.
func TestNotifyChannelNamesTheTables(t *testing.T) {
	t.Parallel()
	channel := func(schema, prefix string) string {
		tables, err := dialects.NewTables(oncebox.TablesConfig{Schema: schema, Prefix: prefix})
		require.NoError(t, err)
		return dialects.NotifyChannel(tables)
	}
	ident := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	long := strings.Repeat("s", 63)
	seen := map[string]string{}
	for _, c := range [][2]string{{"", ""}, {"shop", ""}, {"billing", ""}, {"shop", "b_"}, {"", "shop_"}, {long, strings.Repeat("p", 40)}, {long, strings.Repeat("p", 39)}} {
		ch := channel(c[0], c[1])
		require.LessOrEqual(t, len(ch), 63, ch)
		require.Regexp(t, ident, ch)
		require.NotContains(t, seen, ch, "%v and %s share a channel", c, seen[ch])
		seen[ch] = c[0] + "." + c[1]
	}
	require.Equal(t, channel("shop", ""), channel("Shop", ""), "unquoted names fold to lower case")
	require.Equal(t, "oncebox_shop_outbox_events_", channel("shop", "")[:27])
}

// Only PostgreSQL can wake the relay on commit. Elsewhere Notify does
// nothing and the listener's statements are refused, before any statement
// runs (db is nil); PostgreSQL's statement is in its golden test.
func TestNotifyIsPostgreSQLOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"postgres", "mysql", "oracle"} {
		d, err := registry.New(name, oncebox.TablesConfig{})
		require.NoError(t, err)
		if name == "postgres" {
			require.True(t, d.CanNotify())
			continue
		}
		require.False(t, d.CanNotify(), name)
		require.NoError(t, d.Notify(ctx, nil, "ch", "order-created"), name)
		_, err = d.NotifyQueueUsage(ctx, nil)
		require.ErrorIs(t, err, errors.ErrUnsupported, name)
		require.ErrorIs(t, d.Listen(ctx, nil, "ch"), errors.ErrUnsupported, name)
	}
}
